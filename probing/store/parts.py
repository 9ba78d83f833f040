"""A store built in parts: which sentences each part holds, where it is written, and the merge that makes the
parts one store.

The corpus is cut into blocks of ``block`` consecutive sentences; extraction batches within a block only, so a
sentence's arrays do not depend on which process extracted its block. Part ``k`` of ``n`` holds the blocks
``[k * B // n, (k + 1) * B // n)`` of the corpus's ``B`` blocks: a contiguous range of sentences, the same in
every run. It is written as a store of its own under ``<store>/parts/<k>-of-<n>/`` (shards and a manifest with
a ``part`` entry); the store is complete when every part is and they are merged: each part's manifest is checked
against the store's fingerprint (model, corpus, settings) and against the others' (ranges, batching), then its
shards are linked into the store under new numbers and the store's manifest is written last. A merge that
stops half-way leaves the parts whole; the next one starts again.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from probing.errors import StoreError
from probing.io import write_json
from probing.store.shards import MANIFEST, TOTALS, read_index, shard_path, shard_problem
from probing.store.stores import write_manifest

PARTS = "parts"  # a store's parts live under <store>/parts/<k>-of-<n>/
# what a part's batching was: parts batched otherwise give arrays that differ in their last bits
BATCHING = ("block_sentences", "batch_size", "max_batch_tokens", "max_batch_cells")


def block_ranges(n_sentences: int, block: int) -> list[tuple[int, int]]:
    """``[start, end)`` of every block of ``block`` consecutive sentences (the last one may be shorter)."""
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    return [(s, min(s + block, n_sentences)) for s in range(0, n_sentences, block)]


def part_span(n_sentences: int, block: int, part: int, parts: int) -> tuple[int, int]:
    """The sentences ``[start, end)`` of part ``part`` of ``parts``: whole blocks, contiguous, stable across
    runs (empty where there are fewer blocks than parts)."""
    if not 0 <= part < parts:
        raise ValueError(f"part {part} is not one of 0..{parts - 1}")
    blocks = block_ranges(n_sentences, block)
    first, last = part * len(blocks) // parts, (part + 1) * len(blocks) // parts
    if first == last:
        return (blocks[first][0], blocks[first][0]) if first < len(blocks) else (n_sentences, n_sentences)
    return blocks[first][0], blocks[last - 1][1]


def part_dir(store_dir: Path, part: int, parts: int) -> Path:
    return Path(store_dir) / PARTS / f"{part}-of-{parts}"


@dataclass(frozen=True)
class PartStatus:
    """Which parts of a store are complete (``done``) and which are not (``pending``)."""

    parts: int
    done: tuple[int, ...]
    pending: tuple[int, ...]

    @property
    def complete(self) -> bool:
        return not self.pending


def status(store_dir: Path, parts: int) -> PartStatus:
    done = tuple(k for k in range(parts) if (part_dir(store_dir, k, parts) / MANIFEST).is_file())
    return PartStatus(parts, done, tuple(k for k in range(parts) if k not in done))


def _differences(part: dict, expected: dict) -> list[str]:
    """The fingerprint fields in which a part's manifest differs from the store's inputs, by name, with both
    values."""
    inputs = part.get("inputs", {})
    names = {"n_sentences": "number of sentences"}
    out = []
    for k in sorted(set(inputs) | set(expected)):
        a, b = inputs.get(k), expected.get(k)
        if a == b:
            continue
        if k == "model" and isinstance(a, dict) and isinstance(b, dict):
            a, b = a.get("name_or_path"), b.get("name_or_path")
            out.append(f"model {a!r}, not {b!r}" if a != b else "model weights or settings")
        elif k == "corpus":
            out.append(f"corpus {part.get('corpus_name')} {part.get('split')} with other sentences "
                       f"(fingerprint {a}, not {b})")
        else:
            out.append(f"{names.get(k, k)} {a!r}, not {b!r}")
    return out


def _check_parts(store_dir: Path, parts: int, key: str, inputs: dict, n_sentences: int) -> list[dict]:
    """Every part's manifest, checked: complete, of this store's fingerprint, ranges that tile the corpus,
    one batching; a part that fails is named with what to do."""
    manifests = []
    for k in range(parts):
        d = part_dir(store_dir, k, parts)
        try:
            m = json.loads((d / MANIFEST).read_text())
        except (OSError, ValueError):
            raise StoreError(f"{d}: part {k} of {parts} is not complete (no readable {MANIFEST}); run it again "
                             f"with extract.partition={k}") from None
        if m.get("key") != key:
            why = "; ".join(_differences(m, inputs)) or f"key {m.get('key')} != {key}"
            raise StoreError(f"{d}: part {k} of {parts} belongs to another store ({why}); remove it and run "
                             f"extract.partition={k} again")
        p = m.get("part", {})
        span = part_span(n_sentences, int(p.get("block_sentences", 0)) or 1, k, parts)
        if (p.get("index"), p.get("of"), tuple(p.get("sentences", ()))) != (k, parts, span):
            raise StoreError(f"{d}: part {k} of {parts} holds sentences {p.get('sentences')}, not {list(span)} "
                             f"(extracted with extract.block_sentences={p.get('block_sentences')}?); remove it and "
                             f"run extract.partition={k} again")
        manifests.append(m)
    first = {b: manifests[0]["part"].get(b) for b in BATCHING}
    for k, m in enumerate(manifests):
        other = {b: m["part"].get(b) for b in BATCHING}
        if other != first:
            diff = ", ".join(f"extract.{b}={other[b]} (part 0: {first[b]})" for b in BATCHING if other[b] != first[b])
            raise StoreError(f"{part_dir(store_dir, k, parts)}: part {k} was batched otherwise than part 0 ({diff}): "
                             "its arrays would differ in the last bits; run every part with the same settings")
    return manifests


def merge(store_dir: Path, parts: int, key: str, inputs: dict, n_sentences: int, verify: bool = True) -> dict:
    """Merge the ``parts`` complete parts of ``store_dir`` into the store (call it holding the store's lock):
    check them (:func:`_check_parts`; every shard's size, and its checksum with ``verify``), link their shards in
    part order under new numbers, write the manifest, remove the parts. Returns the manifest."""
    store_dir = Path(store_dir)
    manifests = _check_parts(store_dir, parts, key, inputs, n_sentences)
    for p in store_dir.glob("shard-*"):  # what an interrupted merge left; the parts are still whole
        p.unlink()
    k_out = 0
    for k, m in enumerate(manifests):
        d = part_dir(store_dir, k, parts)
        for rec in sorted(m["shards"], key=lambda r: int(r["shard"])):
            src = int(rec["shard"])
            meta = read_index(shard_path(d, src, "json"))
            problem = shard_problem(d, meta, src, verify)
            if problem is None and (meta["bytes"], meta["xxh3_64"]) != (rec["bytes"], rec["xxh3_64"]):
                problem = f"{shard_path(d, src, 'json').name} does not match the part's manifest"
            if problem is not None:
                raise StoreError(f"{d}: {problem}; remove the part and run extract.partition={k} again")
            _link(shard_path(d, src, "bin"), shard_path(store_dir, k_out, "bin"))
            if "totals_xxh3_64" in meta:
                _link(shard_path(d, src, TOTALS), shard_path(store_dir, k_out, TOTALS))
            write_json(shard_path(store_dir, k_out, "json"), {**meta, "shard": k_out})
            k_out += 1
    fields = {k: v for k, v in manifests[0].items() if k not in ("format", "shards", "part")}
    fields.update({
        "skipped": [s for m in manifests for s in m.get("skipped", [])],
        "extract_seconds": sum(float(m.get("extract_seconds", 0.0)) for m in manifests),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "parts": {"of": parts, **{b: manifests[0]["part"].get(b) for b in BATCHING}},
    })
    manifest = write_manifest(store_dir, fields)
    shutil.rmtree(store_dir / PARTS, ignore_errors=True)
    return manifest


def _link(src: Path, dst: Path) -> None:
    """``dst`` as a hard link to ``src`` (no bytes copied), or a copy where the filesystem has no links."""
    dst.unlink(missing_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def stray_parts(store_dir: Path, parts: Optional[int]) -> Sequence[Path]:
    """Part directories of another partitioning than ``parts`` (left by an earlier run)."""
    root = Path(store_dir) / PARTS
    if not root.is_dir():
        return []
    return [p for p in sorted(root.iterdir()) if p.is_dir() and not p.name.endswith(f"-of-{parts}")]
