"""Stores: word-level arrays of a whole corpus on disk, memory-mapped on read.

One code path holds every per-sentence array whose shape is fixed apart from its position axes
(:class:`ArrayLayout`): attention maps and measures ``(L, H, M, M)`` (:class:`AttentionStore`), and
representations (:class:`VectorStore`): hidden states ``(L+1, M, D)`` and head context vectors ``(L, H, M, d)``.

Layout of a store directory::

    shard-00000.bin    raw arrays (float16 by default), one block per sentence (e.g. (L, H, M, M)), C order
    shard-00000.json   which sentences the shard holds, their offsets and position layout, and the
                       .bin's byte size and xxh3-64 checksum
    manifest.json      written last: the store is complete exactly when it exists; it records every
                       shard's size, checksum and sentence count

Shards are written by :class:`~probing.store.shards.ShardWriter`: each ``.bin`` is renamed into place before its
``.json``, and each file is written to a temporary name first, so a crash leaves either a whole shard or
nothing that is read. A rerun resumes
from the complete shards. ``M = prefix + n_words + suffix`` positions: the model's special tokens stay.

Integrity: opening a store checks every shard's size and index against the manifest (cheap); the first
read of a shard checks its checksum and that its values are finite (``verify()`` checks all at once). A
mismatch raises :class:`~probing.errors.StoreError` naming the shards, never numbers.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Sequence

import numpy as np

from probing.config import Measure
from probing.errors import StoreError
from probing.io import write_json
from probing.store.shards import (
    DTYPES,
    MANIFEST,
    TOTALS,
    checksum,
    complete_shards,
    finite,
    read_index,
    read_totals,
    shard_path,
    shard_problem,
)

log = logging.getLogger(__name__)

FORMAT_VERSION = 2  # 2: shards carry their byte size and checksum


@dataclass(frozen=True)
class ArrayLayout:
    """The shape of one sentence's array: ``lead + (M,) * positions + tail`` for ``M`` positions.

    Maps: ``lead=(L, H), positions=2``; hidden states: ``lead=(L+1,), positions=1, tail=(D,)``; head context
    vectors: ``lead=(L, H), positions=1, tail=(d,)``."""

    lead: tuple[int, ...]
    positions: int
    tail: tuple[int, ...] = ()

    def shape(self, m: int) -> tuple[int, ...]:
        return (*self.lead, *(m,) * self.positions, *self.tail)

    def size(self, m: int) -> int:
        return int(np.prod(self.shape(m), dtype=np.int64))

    def to_json(self) -> dict:
        return {"lead": list(self.lead), "positions": self.positions, "tail": list(self.tail)}

    @classmethod
    def from_manifest(cls, manifest: dict) -> "ArrayLayout":
        """The manifest's ``array`` entry; a store written before there were vectors holds maps."""
        a = manifest.get("array")
        if a is None:
            return cls((int(manifest["num_layers"]), int(manifest["num_heads"])), 2)
        return cls(tuple(int(x) for x in a["lead"]), int(a["positions"]), tuple(int(x) for x in a["tail"]))


def _select(a: np.ndarray, layer: Optional[int], head: Optional[int]) -> np.ndarray:
    """One layer (axis 0), one head (axis 1), both, or neither of a sentence's array."""
    if layer is not None:
        return a[layer] if head is None else a[layer, head]
    return a if head is None else a[:, head]


def write_manifest(directory: Path, fields: dict) -> dict:
    """``manifest.json``, written last (the store is complete exactly when it exists): ``fields`` plus the
    format and a record (size, checksum, sentences) of every whole shard in the directory."""
    manifest = {"format": FORMAT_VERSION, **fields, "shards": complete_shards(directory, verify=False).records}
    write_json(Path(directory) / MANIFEST, manifest, indent=1)
    return manifest


class ArrayStore:
    """Read side of any store: ``store.array(i)`` is sentence i's array (shape ``layout.shape(M)``), a view
    into a memory map. Sentence indices are those of the corpus the store was built from; skipped sentences
    are absent. ``prefix[i]`` special positions come before the words, ``n_words[i]`` words follow."""

    kind = "store"  # named in errors
    what = "arrays"  # what a sentence's array is called in errors

    def __init__(self, directory: str | Path):
        self.dir = Path(directory)
        manifest_path = self.dir / MANIFEST
        if not manifest_path.is_file():
            raise FileNotFoundError(f"{self.dir}: not a complete {self.kind} (no {MANIFEST})")
        try:
            self.manifest: dict = json.loads(manifest_path.read_text())
            fmt = self.manifest.get("format")
        except (OSError, ValueError, AttributeError) as e:
            raise StoreError(f"{manifest_path}: unreadable ({type(e).__name__}); the store is rebuilt when "
                             "extraction runs again, or delete its directory") from None
        if fmt != FORMAT_VERSION:
            raise StoreError(f"{self.dir}: store format {fmt} != {FORMAT_VERSION} (written by another version of "
                             "probing); delete the directory to rebuild it")
        try:
            self.num_layers: int = self.manifest["num_layers"]
            self.num_heads: int = self.manifest["num_heads"]  # 1 for a per-layer measure (probing.mixing)
            # what the maps hold (probing.config.Measure's value); stores from before measures hold attention
            self.measure: str = str(self.manifest.get("measure", "attention"))
            # a causal model's maps: a word attends to itself and its left only (stores from before: encoders)
            self.causal: bool = bool(self.manifest.get("causal", False))
            # grouped-query attention: query heads share this many key/value heads (stores from before: none)
            self.kv_heads: Optional[int] = self.manifest.get("kv_heads")
            self.n_sentences: int = self.manifest["n_sentences"]
            self.dtype = DTYPES[self.manifest["store_dtype"]]
            records = {int(r["shard"]): r for r in self.manifest["shards"]}
            self.layout = ArrayLayout.from_manifest(self.manifest)
        except (KeyError, TypeError, ValueError) as e:
            raise StoreError(f"{manifest_path}: not a {self.kind} manifest (no valid {e}); delete the "
                             "store directory to rebuild it") from None
        n = self.n_sentences
        self.shard = np.full(n, -1, dtype=np.int32)
        self.offset = np.zeros(n, dtype=np.int64)
        self.m = np.zeros(n, dtype=np.int32)
        self.n_words = np.zeros(n, dtype=np.int32)
        self.prefix = np.zeros(n, dtype=np.int32)
        problems: dict[int, str] = {}
        for k, rec in records.items():
            meta = read_index(shard_path(self.dir, k, "json"))
            problem = shard_problem(self.dir, meta, k, verify=False)
            if problem is None and (meta["bytes"], meta["xxh3_64"], len(meta["sentences"])) != (
                    rec["bytes"], rec["xxh3_64"], rec["sentences"]):
                problem = f"{shard_path(self.dir, k, 'json').name} does not match the manifest"
            if problem is not None:
                problems[k] = problem
                continue
            for r in meta["sentences"]:
                i = r["index"]
                self.shard[i], self.offset[i], self.m[i], self.n_words[i], self.prefix[i] = (
                    k, r["offset"], r["m"], r["n_words"], r["prefix"])
        if problems:
            raise StoreError(f"{self.dir}: damaged {self.kind}: " + "; ".join(problems.values()),
                             damaged=tuple(sorted(problems)))
        self._records = records
        self._maps: dict[int, np.memmap] = {}
        self._verified: set[int] = set()

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
        return sum(int(r["bytes"]) for r in self._records.values())

    # ---- data -------------------------------------------------------------------------------------
    def _check_contents(self, k: int) -> Optional[str]:
        """Why shard ``k``'s bytes cannot be used (checksum, finiteness), or None."""
        path = shard_path(self.dir, k, "bin")
        if checksum(path) != self._records[k]["xxh3_64"]:
            return f"{path.name} does not match its checksum (its bytes changed after it was written)"
        if not finite(np.memmap(path, dtype=self.dtype, mode="r")):
            return f"{path.name} holds values that are not finite"
        return None

    def verify(self) -> list[int]:
        """Check every shard's checksum and values now; returns the damaged shard numbers (and logs why)."""
        damaged = []
        for k in sorted(self._records):
            if k in self._verified:
                continue
            problem = self._check_contents(k)
            if problem is None:
                self._verified.add(k)
            else:
                log.warning("%s: %s", self.dir, problem)
                damaged.append(k)
        return damaged

    def _verify_once(self, k: int) -> None:
        """Checksum and values of shard ``k`` on its first read: a damaged shard never yields numbers."""
        if k not in self._verified:
            problem = self._check_contents(k)
            if problem is not None:
                raise StoreError(f"{self.dir}: {problem}. Re-extract it with the same model and data and "
                                 "extract.verify=true (e.g. probing task=extract extract.verify=true ...)",
                                 damaged=(k,))
            self._verified.add(k)

    def _shard(self, k: int) -> np.memmap:
        mm = self._maps.get(k)
        if mm is None:
            self._verify_once(k)
            mm = np.memmap(shard_path(self.dir, k, "bin"), dtype=self.dtype, mode="r")
            self._maps[k] = mm
        return mm

    def array(self, i: int) -> np.ndarray:
        """Sentence i's array over all positions, ``layout.shape(M)``; read-only view in the stored dtype."""
        if i not in self:
            raise KeyError(f"sentence {i} has no {self.what} in {self.dir} (skipped or out of range)")
        m = int(self.m[i])
        start = int(self.offset[i])
        return self._shard(int(self.shard[i]))[start:start + self.layout.size(m)].reshape(self.layout.shape(m))

    def close(self) -> None:
        self._maps.clear()


class AttentionStore(ArrayStore):
    """Maps: ``store.maps(i)`` is sentence i's ``(L, H, M, M)`` array, a view into a memory map.

    ``store.words(i, layer, head)`` drops the special positions: ``(..., n, n)`` over words only.
    """

    kind = "attention store"
    what = "maps"

    def __init__(self, directory: str | Path):
        super().__init__(directory)
        if self.layout.positions != 2 or self.layout.tail:
            raise StoreError(f"{self.dir}: not an attention store (it holds {self.manifest.get('representation')} "
                             "vectors: open it with VectorStore)")

    @property
    def stochastic(self) -> bool:
        """Whether every row sums to 1 (``norm`` and ``norm_layer`` rows are norms, not distributions)."""
        return Measure(self.measure).stochastic

    def maps(self, i: int) -> np.ndarray:
        """Sentence i's maps over all positions, ``(L, H, M, M)``; read-only view."""
        return self.array(i)

    def words(self, i: int, layer: Optional[int] = None, head: Optional[int] = None) -> np.ndarray:
        """Sentence i's maps over words only (special rows/columns dropped): ``(L, H, n, n)``, or a slice."""
        a = _select(self.maps(i), layer, head)
        p, n = int(self.prefix[i]), int(self.n_words[i])
        return a[..., p:p + n, p:p + n]

    def iter_maps(self, indices: Optional[Sequence[int]] = None) -> Iterator[tuple[int, np.ndarray]]:
        """(index, maps) for the given sentences (default: all that have maps), in shard order for
        sequential disk reads."""
        idx = self.indices if indices is None else np.asarray([i for i in indices if i in self])
        order = np.lexsort((self.offset[idx], self.shard[idx]))
        for i in idx[order]:
            yield int(i), self.maps(int(i))


class VectorStore(ArrayStore):
    """Representations, one vector per position: ``hidden`` ``(L+1, M, D)`` (layer 0 the embedding output,
    layer k the output of layer k) or ``heads`` ``(L, H, M, d)`` (head h's context vector
    ``z^h_i = Σ_j α^h_ij v^h_j``, the input of the attention output projection). ``num_layers`` counts the
    stored layers (``L+1`` for ``hidden``); ``num_heads`` is 1 for ``hidden``; ``dim`` is D or d.
    """

    kind = "representation store"
    what = "vectors"

    def __init__(self, directory: str | Path):
        super().__init__(directory)
        self.representation: str = str(self.manifest.get("representation", ""))
        self.measure = self.representation  # what the store holds, as run_meta.json and the console name it
        self.dim: int = self.layout.tail[0] if len(self.layout.tail) == 1 else -1
        if self.layout.positions != 1 or self.dim < 0:
            raise StoreError(f"{self.dir}: not a representation store (its arrays are {self.layout}); "
                             "delete the directory to rebuild it")
        self.per_head: bool = len(self.layout.lead) == 2

    def vectors(self, i: int) -> np.ndarray:
        """Sentence i's vectors over all positions (special tokens kept), ``(L+1, M, D)`` or
        ``(L, H, M, d)``; read-only view in the stored dtype."""
        return self.array(i)

    def words(self, i: int, layer: Optional[int] = None, head: Optional[int] = None,
              dtype: Optional[type] = np.float32) -> np.ndarray:
        """Sentence i's word vectors (special positions dropped): ``(L+1, n, D)`` / ``(L, H, n, d)``, or
        one layer's ``(n, D)`` / ``(H, n, d)``, or one head's ``(n, d)``. A float32 copy by default;
        ``dtype=None`` gives the read-only view in the stored dtype."""
        a = self.array(i)
        if head is not None and not self.per_head:
            raise ValueError(f"{self.dir}: {self.representation} has no heads; leave head unset")
        a = _select(a, layer, head)
        p, n = int(self.prefix[i]), int(self.n_words[i])
        a = a[..., p:p + n, :]
        return a if dtype is None else a.astype(dtype)


class StatisticsStore(ArrayStore):
    """What an analysis keeps of a measure's maps instead of the maps (``extract.keep_maps=false``): one record
    per sentence, ``pointers(i)`` (the layout's ``lead`` by the sentence's words: for the heads analysis every
    head's pick for every word, ``(2, L*H, n)`` int16), and additive totals per shard, summed by ``totals()``.
    ``num_layers`` and ``num_heads`` are those of the maps; ``statistics`` is what was kept and how."""

    kind = "statistics store"
    what = "statistics"

    def __init__(self, directory: str | Path):
        super().__init__(directory)
        self.statistics: dict = dict(self.manifest.get("statistics") or {})
        self._files: dict = {}  # shard -> its open file (closed by close(), or with the store)
        if not self.statistics or self.layout.positions != 1:
            raise StoreError(f"{self.dir}: not a statistics store (no statistics in its manifest); delete the "
                             "directory to rebuild it")

    stochastic = AttentionStore.stochastic  # kept from the same measure's maps

    def pointers(self, i: int) -> np.ndarray:
        """Sentence i's record, read from its shard (not mapped: an analysis reads the records of a whole
        store in length order, and mapped pages would stay resident until :meth:`close`)."""
        if i not in self:
            raise KeyError(f"sentence {i} has no {self.what} in {self.dir} (skipped or out of range)")
        k, m = int(self.shard[i]), int(self.m[i])
        f = self._files.get(k)
        if f is None:
            self._verify_once(k)
            f = self._files[k] = open(shard_path(self.dir, k, "bin"), "rb", buffering=0)
        itemsize = np.dtype(self.dtype).itemsize
        size = self.layout.size(m)
        data = os.pread(f.fileno(), size * itemsize, int(self.offset[i]) * itemsize)
        return np.frombuffer(data, dtype=self.dtype).reshape(self.layout.shape(m))

    def close(self) -> None:
        super().close()
        for f in self._files.values():
            f.close()
        self._files.clear()

    def totals(self) -> dict[str, np.ndarray]:
        """The shards' totals added up (integers: the same in any order)."""
        out: dict[str, np.ndarray] = {}
        for k in sorted(self._records):
            meta = read_index(shard_path(self.dir, k, "json"))
            for name, value in read_totals(shard_path(self.dir, k, TOTALS), meta["totals_xxh3_64"]).items():
                out[name] = out[name] + value if name in out else value.astype(np.int64)
        return out
