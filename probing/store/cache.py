"""The store cache as a user sees it: every store with what it holds, its size and its last use, and removal
by key or by age that never touches a store another process is building (its lock is held)."""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from filelock import FileLock, Timeout

from probing.errors import ProbingError
from probing.store.shards import MANIFEST

LAST_USED = ".last_used"  # touched whenever a run reuses the store


@dataclass(frozen=True)
class CachedStore:
    """One store directory of the cache (``complete``: its manifest is written)."""

    dir: Path
    key: str
    model: str
    corpus: str
    split: str
    what: str
    sentences: int
    bytes: int
    last_used: float
    complete: bool


def touch(directory: Path) -> None:
    """Record that a store was used now (its last use, for ``probing-cache``)."""
    try:
        (Path(directory) / LAST_USED).touch()
    except OSError:
        pass  # a read-only cache still serves; only the record of its use is lost


def scan(cache: Path, skip: frozenset[str] = frozenset()) -> list[CachedStore]:
    """Every store directory under ``cache`` but the folders named in ``skip`` (the cache's other contents,
    such as its parsed corpora), most recently used first."""
    out = []
    dirs = sorted(p for p in Path(cache).iterdir() if p.is_dir() and p.name not in skip) if Path(cache).is_dir() else []
    for d in dirs:
        manifest = d / MANIFEST
        try:
            m = json.loads(manifest.read_text()) if manifest.is_file() else {}
        except (OSError, ValueError):
            m = {}
        files = [f for f in d.rglob("*") if f.is_file()]
        used = max([f.stat().st_mtime for f in (d / LAST_USED, manifest) if f.is_file()] or [d.stat().st_mtime])
        out.append(CachedStore(d, str(m.get("key", "")), str(m.get("model_name", "?")), str(m.get("corpus_name", "?")),
                               str(m.get("split", "")), str(m.get("measure") or m.get("representation") or "?"),
                               int(m.get("n_sentences", 0)), sum(f.stat().st_size for f in files), used,
                               bool(m)))
    return sorted(out, key=lambda s: -s.last_used)


def remove(store: CachedStore) -> None:
    """Delete a store, refused in one line while another process holds its lock (it is being built)."""
    lock = FileLock(str(store.dir) + ".lock")
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise ProbingError(f"{store.dir}: in use by another process (its lock is held); not removed") from None
    try:
        shutil.rmtree(store.dir)
    finally:
        lock.release()
    Path(str(store.dir) + ".lock").unlink(missing_ok=True)


def select(stores: list[CachedStore], keys: list[str], older_than_days: Optional[float]) -> list[CachedStore]:
    """The stores named by key (or directory name) and those unused for more than ``older_than_days``; a key
    that names no store is one line."""
    chosen = {}
    for k in keys:
        hits = [s for s in stores if k in (s.key, s.dir.name, str(s.dir))]
        if not hits:
            raise ProbingError(f"no store with key or name {k!r} in the cache (probing-cache list shows them)")
        chosen.update({s.dir: s for s in hits})
    if older_than_days is not None:
        cutoff = time.time() - older_than_days * 86400
        chosen.update({s.dir: s for s in stores if s.last_used < cutoff})
    return list(chosen.values())
