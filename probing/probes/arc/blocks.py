"""The arc probe's design matrix in blocks: every (dependent, candidate head) pair's features, a block at a time.

A fit over all of EWT train sees 4.5M candidate heads x 144 features (2.6 GB as float32): far more than
it needs to hold at once. The solver only ever asks for passes over the data, so the features are made
block by block and dropped:

* :class:`ArcData` is a matrix in memory (tests, small data), given to the solver as one or more blocks;
* :class:`StoreArcData` builds each block straight from the attention store's memory maps with a compiled
  kernel (float16 read through a 65,536-entry table, exact), shard by shard, unmapping each shard after
  use so its pages leave the resident set. A pass over EWT train costs about a second; memory stays at one
  shard plus one block.

Both give the same numbers as :func:`probing.probes.features.pair_features` and ``root_features`` (columns in
the same order: for each offset, for each direction, one per selected head; ROOT: for each direction, one
per head).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Protocol, Sequence

import numpy as np
from threadpoolctl import threadpool_limits

from probing.config import FeatureSet
from probing.probes.arc import kernels as arc_kernels
from probing.probes.features import HeadSelection, feature_directions, feature_offsets
from probing.store import AttentionStore

BLOCK_ROWS = 1 << 16  # candidate rows per block: 64k x 144 float32 features = 38 MB, cache-friendly GEMMs
CELL_ROWS = 1 << 15  # cells per group of a compiled pass: 32k x 72 heads float32 = 9 MB


@dataclass(frozen=True)
class ArcBlock:
    """Features of some dependents: ``X`` ``(C, F)`` their word candidates grouped by dependent, ``R``
    ``(D, F_root)`` their ROOT features, ``sizes`` ``(D,)`` candidates per dependent, and ``rows`` ``(D,)``
    which dependents (indices into the data's order) they are. Buffers may be reused by the next block."""

    X: np.ndarray
    R: np.ndarray
    sizes: np.ndarray
    rows: np.ndarray

    @property
    def starts(self) -> np.ndarray:
        return np.cumsum(self.sizes) - self.sizes


class ArcBlocks(Protocol):
    """What the arc solver reads: ``n_dependents``, ``n_features`` (word-candidate columns),
    ``n_root_features``, ``sizes`` ``(D,)`` and ``blocks(stride, phase)``: the blocks ``b`` with
    ``b % stride == phase`` (all of them by default), one pass over every dependent. A source may also have
    ``loss_grad(thetas, golds)``, a faster pass that writes no rows (see :class:`StoreArcData`)."""

    n_dependents: int
    n_features: int
    n_root_features: int
    sizes: np.ndarray

    def blocks(self, stride: int = 1, phase: int = 0) -> Iterator[ArcBlock]: ...


@dataclass(frozen=True)
class ArcData:
    """Candidates of D dependents in memory: ``X`` ``(C, F)`` word-candidate features grouped by dependent,
    ``R`` ``(D, F_root)`` ROOT features, ``sizes`` ``(D,)`` word candidates per dependent, and ``gold``
    ``(D,)`` the gold head's index within the dependent's block (-1 = ROOT), or None when unknown."""

    X: np.ndarray
    R: np.ndarray
    sizes: np.ndarray
    gold: np.ndarray | None = None
    block_rows: int = BLOCK_ROWS

    @property
    def starts(self) -> np.ndarray:
        return np.cumsum(self.sizes) - self.sizes

    @property
    def n_dependents(self) -> int:
        return len(self.sizes)

    @property
    def n_features(self) -> int:
        return self.X.shape[1]

    @property
    def n_root_features(self) -> int:
        return self.R.shape[1]

    def __post_init__(self) -> None:
        if self.X.shape[0] != int(np.sum(self.sizes)):
            raise ValueError(f"X has {self.X.shape[0]} rows but sizes sum to {int(np.sum(self.sizes))}")
        if self.R.shape[0] != len(self.sizes):
            raise ValueError(f"R has {self.R.shape[0]} rows for {len(self.sizes)} dependents")
        if self.gold is not None and np.any(self.gold >= self.sizes):
            raise ValueError("a gold index is outside its dependent's candidates")

    def blocks(self, stride: int = 1, phase: int = 0) -> Iterator[ArcBlock]:
        starts = self.starts
        for lo, hi in _split(self.sizes, self.block_rows)[phase::stride]:
            a, b = int(starts[lo]), int(starts[hi - 1] + self.sizes[hi - 1])
            yield ArcBlock(self.X[a:b], self.R[lo:hi], self.sizes[lo:hi], np.arange(lo, hi))


def _split(sizes: np.ndarray, block_rows: int) -> list[tuple[int, int]]:
    """Consecutive runs ``[lo, hi)`` of items with at most ``block_rows`` rows in all (an item with more gets a
    run of its own)."""
    if len(sizes) == 0:
        return []
    ends = np.cumsum(sizes)
    out, lo = [], 0
    while lo < len(sizes):
        base = ends[lo] - sizes[lo]
        hi = max(lo + 1, int(np.searchsorted(ends, base + block_rows, side="right")))
        out.append((lo, hi))
        lo = hi
    return out


class StoreArcData:
    """Arc-probe features of dependents (sentence ``sent``, word ``pos``) built from ``store`` block by block.

    A dependent's candidate heads are the positions a head's attention can reach from it, in order: every other
    word of its sentence, or for a causal model's store (``causal``) the words on its left (ROOT beside them in
    both cases), so no candidate lies to its right.

    Dependents are visited in store order (shard, then offset) so each shard is read once per pass and
    unmapped after; ``ArcBlock.rows`` maps them back to the order given. Each shard's checksum is checked on
    its first read, as for every other read of the store.
    """

    def __init__(self, store: AttentionStore, sent: np.ndarray, pos: np.ndarray, sel: HeadSelection,
                 feature_set: FeatureSet, neighbour_offsets: Sequence[int], block_rows: int = BLOCK_ROWS):
        sent, pos = np.asarray(sent, dtype=np.int64), np.asarray(pos, dtype=np.int64)
        if len(sent) and (store.shard[sent] < 0).any():
            missing = sent[store.shard[sent] < 0][0]
            raise KeyError(f"sentence {missing} has no maps in {store.dir}")
        self.store, self.sent, self.pos = store, sent, pos
        self.sel, self.feature_set, self.neighbour_offsets = sel, feature_set, list(neighbour_offsets)
        self.dirs = feature_directions(feature_set)
        self.offs = np.array(feature_offsets(neighbour_offsets), dtype=np.int64)
        self.planes = (sel.layers * store.num_heads + sel.heads).astype(np.int64)
        self.causal = bool(getattr(store, "causal", False))
        # candidates: the words j < lim but the dependent itself
        self.lim = pos.copy() if self.causal else store.n_words[sent].astype(np.int64)
        self.sizes = self.lim - (self.lim > pos)
        self.n_dependents = len(sent)
        self.n_features = len(self.offs) * len(self.dirs) * len(sel)
        self.n_root_features = len(self.dirs) * len(sel)
        self.block_rows = block_rows
        # per shard, its dependents in store order, cut two ways: blocks of about block_rows candidate rows
        # (feature rows: Hessian samples, predictions) and groups of whole sentences of about CELL_ROWS cells
        # (the compiled loss and gradient pass)
        order = np.lexsort((pos, store.offset[sent], store.shard[sent]))
        self._blocks: list[tuple[int, list[np.ndarray]]] = []
        self._groups: list[tuple[int, list[np.ndarray]]] = []
        self._max_cells = 1
        for run in np.split(order, np.flatnonzero(np.diff(store.shard[sent[order]])) + 1) if len(order) else []:
            sh = int(store.shard[sent[run[0]]])
            self._blocks.append((sh, [run[lo:hi] for lo, hi in _split(self.sizes[run], block_rows)]))
            first = np.flatnonzero(np.r_[True, sent[run][1:] != sent[run][:-1]])  # each sentence's first
            bounds = np.r_[first, len(run)]
            cells = store.m[sent[run[first]]].astype(np.int64) ** 2
            groups = []
            for lo, hi in _split(cells, CELL_ROWS):
                groups.append(run[bounds[lo]:bounds[hi]])
                self._max_cells = max(self._max_cells, int(cells[lo:hi].sum()))
            self._groups.append((sh, groups))

    def subset(self, rows: np.ndarray) -> "StoreArcData":
        """The same features for the dependents ``rows`` only (ascending indices into this data's order)."""
        return StoreArcData(self.store, self.sent[rows], self.pos[rows], self.sel, self.feature_set,
                            self.neighbour_offsets, self.block_rows)

    def _runs(self, rows: np.ndarray) -> tuple[np.ndarray, ...]:
        """Kernel arguments of dependents ``rows`` (adjacent within a sentence): the sentences' offset, m,
        n, prefix and their dependents' ranges."""
        st, sent = self.store, self.sent[rows]
        first = np.flatnonzero(np.r_[True, sent[1:] != sent[:-1]])
        s = sent[first]
        return (st.offset[s], st.m[s].astype(np.int64), st.n_words[s].astype(np.int64),
                st.prefix[s].astype(np.int64), first, np.r_[first[1:], len(rows)].astype(np.int64))

    def _shards(self, plan: list[tuple[int, list[np.ndarray]]], stride: int = 1, phase: int = 0
                ) -> Iterator[tuple[np.ndarray, list[np.ndarray]]]:
        """Each shard's data (flat, float16 as uint16) with its parts of ``plan`` numbered ``b % stride ==
        phase`` (counted over the whole plan); the shard is unmapped after use, so its pages leave the
        resident set before the next shard's come in."""
        b = 0
        for sh, parts in plan:
            mine = [rows for k, rows in enumerate(parts, start=b) if k % stride == phase]
            b += len(parts)
            if not mine:
                continue
            mm = self.store._shard(sh)  # checks the shard's checksum on its first read
            yield (mm.view(np.uint16) if mm.dtype == np.float16 else mm), mine
            del mm
            self.store.close()

    def blocks(self, stride: int = 1, phase: int = 0) -> Iterator[ArcBlock]:
        xbuf = np.empty((max(self.block_rows, int(self.sizes.max(initial=0))), self.n_features), np.float32)
        fwd, bwd = "fwd" in self.dirs, "bwd" in self.dirs
        for flat, cuts in self._shards(self._blocks, stride, phase):
            for rows in cuts:
                sizes = self.sizes[rows]
                starts = np.cumsum(sizes) - sizes
                X = xbuf[:int(sizes.sum())]
                R = np.empty((len(rows), self.n_root_features), np.float32)
                arc_kernels.fill(flat, arc_kernels.F16_TABLE, *self._runs(rows), self.pos[rows], self.lim[rows],
                                 starts, self.planes, self.offs, fwd, bwd, X, R)
                yield ArcBlock(X, R, sizes, rows)

    def loss_grad(self, thetas: np.ndarray, golds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Summed cross-entropy ``(P,)`` and gradient ``(P, n_params)`` of probes ``thetas`` (gold heads
        ``golds`` ``(P, D)``, block-local) over every dependent, in one pass that writes no feature rows:
        per group of sentences, their cells ``C`` ``(cells, K)``, scores ``C @ W``, coefficients ``G`` from the
        softmax, gradient ``C.T @ G`` (:mod:`probing.probes.arc.kernels`)."""
        n_p, k, f = len(thetas), len(self.planes), self.n_features
        n_blocks = f // k  # (offset, direction) blocks of K weights
        # W[:, (b * P) + q] = probe q's weights of block b
        w = np.ascontiguousarray(thetas[:, :f].reshape(n_p, n_blocks, k).transpose(2, 1, 0)
                                 .reshape(k, n_blocks * n_p), dtype=np.float32)
        wr = np.ascontiguousarray(thetas[:, f:-1].T, dtype=np.float32)
        loss = np.zeros(n_p)
        gw = np.zeros((k, n_blocks * n_p))
        grad_r = np.zeros((n_p, self.n_root_features + 1))
        with threadpool_limits(1, user_api="blas"):  # BLAS threads spinning beside numba's slow both down
            self._pass(thetas, golds, w, wr, loss, gw, grad_r)
        grad_w = gw.reshape(k, n_blocks, n_p).transpose(2, 1, 0).reshape(n_p, f)
        return loss, np.concatenate([grad_w, grad_r], axis=1)

    def _pass(self, thetas: np.ndarray, golds: np.ndarray, w: np.ndarray, wr: np.ndarray, loss: np.ndarray,
              gw: np.ndarray, grad_r: np.ndarray) -> None:
        n_p, k = len(thetas), len(self.planes)
        fwd, bwd = "fwd" in self.dirs, "bwd" in self.dirs
        cbuf = np.empty((self._max_cells, k), np.float32)
        gbuf = np.empty((self._max_cells, w.shape[1]), np.float32)
        for flat, groups in self._shards(self._groups):
            for rows in groups:
                off, m, n, p, lo, hi = self._runs(rows)
                cstart = np.cumsum(m * m) - m * m
                total = int(cstart[-1] + m[-1] * m[-1])
                C, G = cbuf[:total], gbuf[:total]
                R = np.empty((len(rows), self.n_root_features), np.float32)
                arc_kernels.cells(flat, arc_kernels.F16_TABLE, off, m, n, p, lo, hi, self.pos[rows],
                                  self.planes, fwd, bwd, cstart, C, R)
                S = C @ w
                rs = (R @ wr).astype(np.float64) + thetas[:, -1]
                G[:] = 0.0
                loss_s = np.zeros((len(off), n_p))
                coef_r = np.empty((len(rows), n_p))
                arc_kernels.softmax_coefs(S, rs, cstart, m, n, p, lo, hi, self.pos[rows], self.lim[rows],
                                          np.ascontiguousarray(golds[:, rows].T), self.offs, fwd, bwd,
                                          loss_s, G, coef_r)
                loss += loss_s.sum(axis=0)
                gw += C.T @ G
                grad_r[:, :-1] += (R.T @ coef_r.astype(np.float32)).T
                grad_r[:, -1] += coef_r.sum(axis=0)
