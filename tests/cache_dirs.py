"""Finding a store in a test's cache folder, whatever else the cache holds (the parsed-corpus cache `corpora/`)."""

from __future__ import annotations

from pathlib import Path


def store_dir(cache: Path, prefix: str = "") -> Path:
    """The one store directory under `cache` whose name starts with `prefix`; fails if there are none or several.
    The small stores of the heads task's induction sequences (``-induction-`` in the name) are left out unless
    `prefix` names one."""
    found = [p for p in Path(cache).iterdir() if p.is_dir() and p.name != "corpora" and p.name.startswith(prefix)
             and ("-induction-" not in p.name or "-induction-" in prefix)]
    assert len(found) == 1, f"{cache}: expected one store, found {sorted(p.name for p in found)}"
    return found[0]
