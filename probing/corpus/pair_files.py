"""A user's minimal pairs from a JSONL or CSV file (one pair a line / row).

Fields (words split on spaces):
- ``clean`` and ``corrupt``: the two sentences, aligned word for word; ``target``: the 0-based index of the word
  read out; ``good`` and ``bad``: the word the clean side takes there and the one the corrupt side takes;
- or, BLiMP-style, ``clean_prefix`` and ``corrupt_prefix`` with ``good`` and ``bad`` continuations: the target is
  the word after the prefix.

Optional: ``id``, ``label`` (the clean side's feature value, for a probe readout), and word indices ``cue``,
``subject``, ``attractor``. A pair that does not align, or whose target is outside it, is one line naming the
file and line (``strict``), or skipped and counted (:class:`~probing.corpus.sentence.Skip`).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from probing.corpus.minimal_pairs import MinimalPair
from probing.corpus.sentence import Sentence, Skip
from probing.errors import ProbingError

ROLES = ("cue", "subject", "attractor")


def _words(value: object, field: str) -> list[str]:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{field!r} must be a non-empty string of words")
    return value.split()


def _pair(row: dict, default_id: str) -> MinimalPair:
    pid = str(row.get("id") or default_id)
    good, bad = str(row.get("good", "")).strip(), str(row.get("bad", "")).strip()
    if not good or not bad:
        raise ValueError("'good' and 'bad' are both needed")
    if "clean_prefix" in row or "corrupt_prefix" in row:
        clean = _words(row.get("clean_prefix"), "clean_prefix") + [good]
        corrupt = _words(row.get("corrupt_prefix"), "corrupt_prefix") + [bad]
        target = len(clean) - 1
    else:
        clean, corrupt = _words(row.get("clean"), "clean"), _words(row.get("corrupt"), "corrupt")
        if row.get("target") in (None, ""):
            raise ValueError("'target' (the index of the word read out) is needed with 'clean' and 'corrupt'")
        target = int(row["target"])
    if len(clean) != len(corrupt):
        raise ValueError(f"clean has {len(clean)} words, corrupt {len(corrupt)}; the two sides must align word "
                         "for word")
    if not 0 <= target < len(clean):
        raise ValueError(f"target {target} is outside its {len(clean)} words")
    if clean[target] != good or corrupt[target] != bad:
        raise ValueError(f"word {target} is {clean[target]!r} / {corrupt[target]!r}, not good {good!r} / bad {bad!r}")
    roles = {"target": target}
    for role in ROLES:
        if row.get(role) not in (None, ""):
            roles[role] = int(row[role])
            if not 0 <= roles[role] < len(clean):
                raise ValueError(f"{role} {roles[role]} is outside its {len(clean)} words")
    return MinimalPair(pid, "file", Sentence(f"{pid}-clean", tuple(clean)), Sentence(f"{pid}-corrupt", tuple(corrupt)),
                       target, good, bad, str(row.get("label") or ""), roles)


def _rows(path: Path) -> list[tuple[int, dict]]:
    """``(line, row)`` of a JSONL file (blank lines skipped) or a CSV file with a header."""
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".csv":
        return [(i + 2, row) for i, row in enumerate(csv.DictReader(text.splitlines()))]
    out = []
    for i, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ProbingError(f"{path}:{i}: not a JSON object ({e.msg})") from None
            if not isinstance(row, dict):
                raise ProbingError(f"{path}:{i}: not a JSON object")
            out.append((i, row))
    return out


def read_pairs(path: str | Path, strict: bool = True) -> tuple[list[MinimalPair], list[Skip]]:
    """The pairs of a ``.jsonl`` or ``.csv`` file and those skipped (``strict=False``); a bad pair under
    ``strict`` is one :class:`ProbingError` line naming the file and line."""
    path = Path(path)
    if not path.is_file():
        raise ProbingError(f"patching.pairs_file={path}: no such file")
    pairs, skipped = [], []
    for line, row in _rows(path):
        try:
            pairs.append(_pair(row, f"{path.stem}-{line}"))
        except (ValueError, TypeError) as e:
            if strict:
                raise ProbingError(f"{path}:{line}: pair {row.get('id') or line}: {e} (patching.strict=false skips "
                                   "and counts such pairs)") from None
            skipped.append(Skip(str(path), line, str(row.get("id") or ""), str(e), "pair"))
    if not pairs:
        raise ProbingError(f"{path}: no usable pairs ({len(skipped)} skipped)")
    return pairs, skipped
