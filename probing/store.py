"""The attention store: word-level maps of a whole corpus on disk, memory-mapped on read.

Layout of a store directory::

    shard-00000.bin    raw maps (float16 by default), one (L, H, M, M) block per sentence, C order
    shard-00000.json   which sentences the shard holds, their offsets and position layout
    manifest.json      written last: the store is complete (and valid) exactly when it exists

Each shard's ``.bin`` is renamed into place before its ``.json``, and each file is written to a
temporary name first, so a crash leaves either a whole shard or nothing that is read. A rerun resumes
from the complete shards. ``M = prefix + n_words + suffix`` positions: the model's special tokens stay.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Sequence

import numpy as np

from probing.io import atomic_write_bytes, write_json

FORMAT_VERSION = 1
_DTYPES = {"float16": np.float16, "float32": np.float32}


@dataclass(frozen=True)
class SentenceEntry:
    """Where one sentence's maps live: shard, element offset, positions M, words n, special prefix."""

    shard: int
    offset: int
    m: int
    n_words: int
    prefix: int


class ShardWriter:
    """Accumulates sentences' maps and writes them as shards of about ``shard_mb`` megabytes."""

    def __init__(self, directory: Path, dtype: str, shard_mb: int, first_shard: int = 0):
        self.dir = directory
        self.dtype = _DTYPES[str(dtype)]
        self.limit = shard_mb * 2**20
        self.next_shard = first_shard
        self._parts: list[np.ndarray] = []
        self._rows: list[dict] = []
        self._offset = 0
        self._bytes = 0

    def add(self, index: int, maps: np.ndarray, n_words: int, prefix: int) -> None:
        """Queue one sentence's ``(L, H, M, M)`` maps."""
        arr = np.ascontiguousarray(maps, dtype=self.dtype)
        self._parts.append(arr.reshape(-1))
        self._rows.append({"index": index, "offset": self._offset, "m": int(maps.shape[-1]),
                           "n_words": n_words, "prefix": prefix})
        self._offset += arr.size
        self._bytes += arr.nbytes
        if self._bytes >= self.limit:
            self.flush()

    def flush(self) -> None:
        if not self._rows:
            return
        k = self.next_shard
        data = np.concatenate(self._parts)
        atomic_write_bytes(self.dir / f"shard-{k:05d}.bin", data.tobytes())
        write_json(self.dir / f"shard-{k:05d}.json", {"shard": k, "elements": int(data.size),
                                                             "sentences": self._rows})
        self.next_shard += 1
        self._parts, self._rows, self._offset, self._bytes = [], [], 0, 0


def complete_shards(directory: Path, dtype: str) -> tuple[dict[int, SentenceEntry], int]:
    """Entries of every whole shard in ``directory`` (a shard whose data is short is ignored),
    and the next free shard number."""
    entries: dict[int, SentenceEntry] = {}
    next_shard = 0
    itemsize = np.dtype(_DTYPES[str(dtype)]).itemsize
    for meta_path in sorted(directory.glob("shard-*.json")):
        try:
            meta = json.loads(meta_path.read_text())
        except (json.JSONDecodeError, OSError):
            continue
        k = meta["shard"]
        next_shard = max(next_shard, k + 1)
        bin_path = directory / f"shard-{k:05d}.bin"
        if not bin_path.is_file() or bin_path.stat().st_size != meta["elements"] * itemsize:
            continue
        for r in meta["sentences"]:
            entries[r["index"]] = SentenceEntry(k, r["offset"], r["m"], r["n_words"], r["prefix"])
    return entries, next_shard


class AttentionStore:
    """Read side: ``store.maps(i)`` is sentence i's ``(L, H, M, M)`` array, a view into a memory map.

    ``store.words(i, layer, head)`` drops the special positions: ``(..., n, n)`` over words only.
    Sentence indices are those of the corpus the store was built from; skipped sentences are absent.
    """

    def __init__(self, directory: str | Path):
        self.dir = Path(directory)
        manifest_path = self.dir / "manifest.json"
        if not manifest_path.is_file():
            raise FileNotFoundError(f"{self.dir}: not a complete attention store (no manifest.json)")
        self.manifest: dict = json.loads(manifest_path.read_text())
        if self.manifest.get("format") != FORMAT_VERSION:
            raise ValueError(f"{self.dir}: store format {self.manifest.get('format')} != {FORMAT_VERSION}")
        self.num_layers: int = self.manifest["num_layers"]
        self.num_heads: int = self.manifest["num_heads"]
        self.n_sentences: int = self.manifest["n_sentences"]
        self.dtype = _DTYPES[self.manifest["store_dtype"]]
        entries, _ = complete_shards(self.dir, self.manifest["store_dtype"])
        n = self.n_sentences
        self.shard = np.full(n, -1, dtype=np.int32)
        self.offset = np.zeros(n, dtype=np.int64)
        self.m = np.zeros(n, dtype=np.int32)
        self.n_words = np.zeros(n, dtype=np.int32)
        self.prefix = np.zeros(n, dtype=np.int32)
        for i, e in entries.items():
            self.shard[i], self.offset[i], self.m[i], self.n_words[i], self.prefix[i] = (
                e.shard, e.offset, e.m, e.n_words, e.prefix)
        self._maps: dict[int, np.memmap] = {}

    # ---- metadata ---------------------------------------------------------------------------------
    @property
    def key(self) -> str:
        return self.manifest["key"]

    @property
    def indices(self) -> np.ndarray:
        """Corpus indices of the sentences that have maps (all but the skipped ones), ascending."""
        return np.flatnonzero(self.shard >= 0)

    def __contains__(self, i: int) -> bool:
        return 0 <= i < self.n_sentences and self.shard[i] >= 0

    def __len__(self) -> int:
        return int((self.shard >= 0).sum())

    @property
    def skipped(self) -> list[dict]:
        return self.manifest.get("skipped", [])

    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.dir.glob("shard-*.bin"))

    # ---- data -------------------------------------------------------------------------------------
    def _shard(self, k: int) -> np.memmap:
        mm = self._maps.get(k)
        if mm is None:
            mm = np.memmap(self.dir / f"shard-{k:05d}.bin", dtype=self.dtype, mode="r")
            self._maps[k] = mm
        return mm

    def maps(self, i: int) -> np.ndarray:
        """Sentence i's maps over all positions, ``(L, H, M, M)``; read-only view."""
        if i not in self:
            raise KeyError(f"sentence {i} has no maps in {self.dir} (skipped or out of range)")
        m = int(self.m[i])
        size = self.num_layers * self.num_heads * m * m
        start = int(self.offset[i])
        return self._shard(int(self.shard[i]))[start:start + size].reshape(self.num_layers, self.num_heads, m, m)

    def words(self, i: int, layer: Optional[int] = None, head: Optional[int] = None) -> np.ndarray:
        """Sentence i's maps over words only (special rows/columns dropped): ``(L, H, n, n)``, or a slice."""
        a = self.maps(i)
        if layer is not None:
            a = a[layer]
            if head is not None:
                a = a[head]
        elif head is not None:
            a = a[:, head]
        p, n = int(self.prefix[i]), int(self.n_words[i])
        return a[..., p:p + n, p:p + n]

    def iter_maps(self, indices: Optional[Sequence[int]] = None) -> Iterator[tuple[int, np.ndarray]]:
        """(index, maps) for the given sentences (default: all that have maps), in shard order for
        sequential disk reads."""
        idx = self.indices if indices is None else np.asarray([i for i in indices if i in self])
        order = np.lexsort((self.offset[idx], self.shard[idx]))
        for i in idx[order]:
            yield int(i), self.maps(int(i))

    def close(self) -> None:
        self._maps.clear()
