"""The shard files of a store directory (the layout is in :mod:`probing.store`): writing them
(:class:`ShardWriter`), and finding, checking and discarding them when a store is built, resumed or read.

A shard is a ``.bin`` of raw arrays and a ``.json`` index (its sentences, their offsets, the ``.bin``'s byte
size and xxh3-64 checksum); the ``.bin`` is renamed into place before its index, each through a temporary
file, so a shard is whole exactly when its index exists and matches it.
"""

from __future__ import annotations

import io
import json
import logging
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import xxhash

from probing.errors import StoreError
from probing.io import AtomicFile, atomic_write_bytes, write_json

log = logging.getLogger(__name__)

DTYPES = {"float16": np.float16, "float32": np.float32, "int16": np.int16}  # store_dtype -> numpy
MANIFEST = "manifest.json"  # written last: a store is complete exactly when it exists
_READ_BLOCK = 16 * 2**20


def shard_path(directory: Path, k: int, suffix: str) -> Path:
    return Path(directory) / f"shard-{k:05d}.{suffix}"


TOTALS = "totals.npz"  # a shard's additive totals (int64 arrays), beside its .bin where the store keeps them


def write_totals(path: Path, totals: dict[str, np.ndarray]) -> str:
    """``totals`` as an ``.npz`` written atomically; returns its xxh3-64."""
    buf = io.BytesIO()
    np.savez(buf, **totals)
    data = buf.getvalue()
    atomic_write_bytes(path, data)
    return xxhash.xxh3_64_hexdigest(data)


def read_totals(path: Path, digest: str) -> dict[str, np.ndarray]:
    """A shard's totals, checked against the checksum its index records."""
    data = Path(path).read_bytes()
    if xxhash.xxh3_64_hexdigest(data) != digest:
        raise StoreError(f"{path}: does not match its checksum (its bytes changed after it was written)")
    with np.load(io.BytesIO(data)) as z:
        return {k: z[k] for k in z.files}


def checksum(path: Path) -> str:
    """xxh3-64 of a file's bytes (hex), read in blocks: a few GB/s, so checking a shard costs about as much
    as reading it once."""
    h = xxhash.xxh3_64()
    with open(path, "rb") as f:
        while block := f.read(_READ_BLOCK):
            h.update(block)
    return h.hexdigest()


@dataclass(frozen=True)
class SentenceEntry:
    """Where one sentence's maps live: shard, element offset, positions M, words n, special prefix."""

    shard: int
    offset: int
    m: int
    n_words: int
    prefix: int


def finite(arr: np.ndarray) -> bool:
    """No inf or NaN in ``arr``; float16 by its bits (sign dropped, at least 0x7C00, all exponent bits set:
    not finite), which numpy tests ten times faster than ``isfinite`` on float16, an emulated type."""
    if arr.dtype == np.float16:
        return bool(arr.size == 0 or (arr.view(np.uint16) & 0x7FFF).max() < 0x7C00)
    return bool(np.isfinite(arr).all())


class ShardWriter:
    """Writes sentences' arrays as shards of about ``shard_mb`` megabytes, each with its byte size and
    checksum in its index (``shard-K.json``).

    Each sentence's bytes go to the shard's temporary ``.bin`` (and into its checksum) as the sentence is
    added, so no shard is held in memory and the sentences' arrays are freed as soon as they are written;
    making the file durable, renaming it and writing its index run in a background thread."""

    def __init__(self, directory: Path, dtype: str, shard_mb: int, first_shard: int = 0,
                 what: str = "attention maps", totals: Optional[Any] = None):
        self.dir = directory
        self.what = what  # named in the error for values that are not finite
        # where a shard's additive totals come from (``take()``: those of the sentences added since the last
        # shard; ``drop()``: forget them), written beside the shard; None: the store keeps none
        self.totals = totals
        self.dtype = DTYPES[str(dtype)]
        self.limit = shard_mb * 2**20
        self.next_shard = first_shard
        self._new_shard()
        self._pool: Optional[ThreadPoolExecutor] = None
        self._pending: Optional[Future] = None

    def add(self, index: int, maps: np.ndarray, n_words: int, prefix: int, m: Optional[int] = None) -> None:
        """Write one sentence's array (``(L, H, M, M)`` maps; ``m``, its number of positions M, defaults to
        the last axis, a map's) into the shard being filled; arrays that are not finite are refused."""
        arr = np.ascontiguousarray(maps, dtype=self.dtype)
        if not finite(arr):
            raise StoreError(f"sentence {index}: its {self.what} are not finite in {arr.dtype} (a float16 "
                             "overflow? try extract.store_dtype=float32 or model.dtype=float32); nothing stored")
        if self._file is None:
            self._file = AtomicFile(shard_path(self.dir, self.next_shard, "bin"))
        self._file.write(arr)
        self._digest.update(arr)
        self._rows.append({"index": index, "offset": self._offset, "m": int(maps.shape[-1] if m is None else m),
                           "n_words": n_words, "prefix": prefix})
        self._offset += arr.size
        self._bytes += arr.nbytes
        if self._bytes >= self.limit:
            self.flush(wait=False)

    def flush(self, wait: bool = True) -> None:
        """Finish the shard being filled: made durable (fsync), renamed into place and indexed in a
        background thread, so that overlaps the next batches' compute and other writers' flushes; at most
        one shard per writer is in flight. ``wait``: return only when every shard handed off is on disk (its
        error, if any, raised here)."""
        if self._rows:
            totals = self.totals.take() if self.totals is not None else None
            shard = (self.next_shard, self._file, self._digest.hexdigest(), self._rows, self._offset, self._bytes,
                     totals)
            self.next_shard += 1
            self._new_shard()
            self._wait()
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="shard-writer")
            self._pending = self._pool.submit(self._finish, *shard)
        if wait:
            self.drain()

    def drain(self) -> None:
        """Wait for the shard in flight and discard the one being filled (its sentences are not stored):
        what is on disk is settled, e.g. before a failed extraction is retried."""
        try:
            self._wait()
        finally:
            if self._file is not None:
                self._file.discard()
                self._new_shard()
            if self.totals is not None:
                self.totals.drop()  # the totals of the sentences discarded with the shard
            if self._pool is not None:
                self._pool.shutdown()
                self._pool = None

    def _new_shard(self) -> None:
        """Start the next shard empty (its file opens with its first sentence)."""
        self._file: Optional[AtomicFile] = None
        self._digest = xxhash.xxh3_64()
        self._rows: list[dict] = []
        self._offset = 0
        self._bytes = 0

    def _wait(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.result()

    def _finish(self, k: int, file: AtomicFile, digest: str, rows: list[dict], elements: int, nbytes: int,
                totals: Optional[dict[str, np.ndarray]]) -> None:
        # the .bin (and its totals) go first: a shard is complete exactly when its .json exists and matches them
        file.commit()
        extra = {}
        if totals is not None:
            extra["totals_xxh3_64"] = write_totals(shard_path(self.dir, k, TOTALS), totals)
        write_json(shard_path(self.dir, k, "json"), {
            "shard": k, "elements": elements, "bytes": nbytes, "xxh3_64": digest, "sentences": rows, **extra})


def read_index(path: Path) -> Optional[dict]:
    """A shard's index, or None when it is missing, unreadable or not an index."""
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    need = {"shard", "bytes", "xxh3_64", "sentences"}
    return meta if isinstance(meta, dict) and need <= set(meta) else None


def shard_problem(directory: Path, meta: Optional[dict], k: int, verify: bool) -> Optional[str]:
    """Why shard ``k`` (index ``meta``) cannot be read, or None when it is whole. Sizes always; the
    checksum when ``verify``."""
    if meta is None:
        return f"{shard_path(directory, k, 'json').name} is missing or unreadable"
    bin_path = shard_path(directory, k, "bin")
    if not bin_path.is_file():
        return f"{bin_path.name} is missing"
    size = bin_path.stat().st_size
    if size != meta["bytes"]:
        return f"{bin_path.name} has {size} bytes, its index says {meta['bytes']}"
    if verify and checksum(bin_path) != meta["xxh3_64"]:
        return f"{bin_path.name} does not match its checksum (its bytes changed after it was written)"
    if "totals_xxh3_64" in meta and not shard_path(directory, k, TOTALS).is_file():
        return f"{shard_path(directory, k, TOTALS).name} is missing"
    return None


@dataclass(frozen=True)
class ShardScan:
    """The shards found in a store directory: the sentences of the whole ones, their records for the
    manifest, the shards that are not whole (``bad``: damaged, or a ``.bin`` whose index never landed) and
    the next free shard number."""

    entries: dict[int, SentenceEntry]
    records: list[dict]
    bad: list[int]
    next_shard: int


def complete_shards(directory: Path, verify: bool) -> ShardScan:
    """Scan ``directory``'s shards: sizes always, checksums when ``verify`` (see :func:`shard_problem`)."""
    directory = Path(directory)
    entries: dict[int, SentenceEntry] = {}
    records: list[dict] = []
    numbers = {int(p.stem.split("-")[1]) for p in directory.glob("shard-*.bin")}
    numbers |= {int(p.stem.split("-")[1]) for p in directory.glob("shard-*.json")}
    bad = []
    for k in sorted(numbers):
        meta = read_index(shard_path(directory, k, "json"))
        problem = shard_problem(directory, meta, k, verify)
        if problem is not None:
            log.warning("%s: %s", directory, problem)
            bad.append(k)
            continue
        records.append({"shard": k, "bytes": meta["bytes"], "xxh3_64": meta["xxh3_64"],
                        "sentences": len(meta["sentences"])})
        for r in meta["sentences"]:
            entries[r["index"]] = SentenceEntry(k, r["offset"], r["m"], r["n_words"], r["prefix"])
    return ShardScan(entries, records, bad, max(numbers, default=-1) + 1)


def discard_shards(directory: Path, shards: Sequence[int]) -> None:
    """Remove shards (both files) and the manifest, so extraction re-extracts their sentences."""
    for k in shards:
        for suffix in ("bin", "json", TOTALS):
            shard_path(directory, k, suffix).unlink(missing_ok=True)
    (Path(directory) / MANIFEST).unlink(missing_ok=True)
