"""Word pieces -> words: pooling of piece-level attention maps and vectors (pure tensor code).

Positions are the model's special tokens plus the words, in order ([CLS] w1 ... wn [SEP]).
A row of a map is where a *query* position looks; rows sum to 1 before and after pooling.
"""

from __future__ import annotations

import os
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Optional, Sequence

import numpy as np
import torch
from numba import njit

from probing.buffers import Buffers
from probing.config import Pooling


def _targets(piece_position: torch.Tensor, n_positions: int, pooling: Pooling
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """Each piece's target position ``(B, T)`` and whether it counts: dropped pieces (padding; non-first
    pieces under ``first``) go to a spare position ``n_positions``, cut at the end."""
    keep = piece_position >= 0
    if pooling is Pooling.first:
        prev = torch.nn.functional.pad(piece_position, (1, 0), value=-2)[:, :-1]
        keep = keep & (piece_position != prev)
    return torch.where(keep, piece_position, torch.full_like(piece_position, n_positions)), keep


def pool_attention(attn: "torch.Tensor | Sequence[torch.Tensor]", piece_position: torch.Tensor, n_positions: int,
                   pooling: Pooling, stochastic: bool = True, buffers: Optional[Buffers] = None,
                   kernel: bool = True) -> torch.Tensor:
    """Piece-level ``attn (B, L, H, T, T)`` (or its L layers, ``(B, H, T, T)`` each, as a model returns them:
    never stacked) -> position-level ``(B, L, H, M, M)`` in float32. The layers are read once each, in order,
    and let go once pooled: a sequence that makes its layers as they are read
    (:class:`~probing.mixing.measures.LazyLayers`) has no more of them at a time than pooling has in flight.

    ``piece_position (B, T)`` gives the position of every piece, -1 for padding (its rows and columns are
    dropped). ``mean_sum`` (Clark et al. 2019): a position's column is the sum of its pieces' columns and its
    row the mean of its pieces' rows. ``first``: both come from the position's first piece, rows renormalised
    unless ``stochastic`` is False (maps whose rows are not distributions, such as the ``norm`` measure's).
    Segment sums cost O(T^2) per map, where pooling matrices would cost O(M T^2) (no faster even at 30
    pieces, slower above): on CPU a compiled kernel (:func:`_pool_layer`, layers in parallel threads), in half
    the CPU time of scatter-adds (``kernel`` False, and on other devices); both add each sum's terms to 0 in
    piece order, so they give the same bits. ``buffers``: the temporaries and the result live in its slots
    (the result is then valid until the next call with the same buffers).
    """
    pooling = Pooling(pooling)  # a plain string from a notebook works too; anything else fails here
    layers = attn.unbind(1) if isinstance(attn, torch.Tensor) else attn
    idx, keep = _targets(piece_position, n_positions, pooling)
    work = Buffers() if buffers is None else buffers
    b, m1 = idx.shape[0], n_positions + 1
    rows, compiled = torch.empty(0), False
    for k, a in enumerate(layers):
        a = a.to(torch.float32)
        if k == 0:
            rows = work.take("pool_rows", (b, len(layers), a.shape[1], m1, m1), device=a.device)
            compiled = kernel and a.device.type == "cpu"
            pool = _Compiled(idx, n_positions, pooling, rows) if compiled else _Scatter(idx, rows.zero_(), work)
        pool(k, a)
    pool.finish()
    out = rows[..., :n_positions, :n_positions]
    if pooling is Pooling.first:
        return out.div_(out.sum(-1, keepdim=True).clamp_(min=1e-12)) if stochastic else out
    if compiled:  # the kernel divided by the counts
        return out
    counts = torch.zeros(b, m1, dtype=torch.float32, device=idx.device)
    counts.scatter_add_(1, idx, keep.to(torch.float32))
    return out.div_(counts[:, None, None, :n_positions, None].clamp_(min=1.0))


class _Scatter:
    """Pools a layer into ``rows`` (zeroed) by scatter-adds: pieces' columns into their positions' (a layer
    at a time, in a sixth of the memory), then those rows into their positions' rows."""

    def __init__(self, idx: torch.Tensor, rows: torch.Tensor, work: Buffers):
        self.idx, self.rows, self.work = idx, rows, work

    def __call__(self, k: int, a: torch.Tensor) -> None:
        b, n_heads, t, _ = a.shape
        m1 = self.rows.shape[-1]
        cols = self.work.take("pool_cols", (b, n_heads, t, m1), device=a.device)
        cols.zero_().scatter_add_(-1, self.idx[:, None, None, :].expand(b, n_heads, t, t), a)
        self.rows[:, k].scatter_add_(-2, self.idx[:, None, :, None].expand(b, n_heads, t, m1), cols)

    def finish(self) -> None:
        pass


class _Compiled:
    """Pools layers into ``rows`` with :func:`_pool_layer`, one task per layer on :func:`_workers` (at most
    as many in flight as torch has threads, so that a measure made layer by layer holds no more layers than
    that): each sentence's pieces grouped by position (``order``, ``ptr``), and what each position's row is
    divided by (its pieces under ``mean_sum``, else 1)."""

    def __init__(self, idx: torch.Tensor, n_positions: int, pooling: Pooling, rows: torch.Tensor):
        counts = torch.zeros(idx.shape[0], n_positions + 1, dtype=torch.long)
        counts.scatter_add_(1, idx, torch.ones_like(idx))
        kept = counts[:, :n_positions]
        self.idx = idx.contiguous().numpy()
        self.order = torch.sort(idx, dim=1, stable=True).indices.numpy()  # by position; in order within one
        self.ptr = torch.nn.functional.pad(kept.cumsum(1), (1, 0)).numpy()
        divisor = kept.float().clamp(min=1.0) if pooling is Pooling.mean_sum else torch.ones(kept.shape)
        self.divisor = divisor.numpy()
        self.rows = rows.numpy()
        self.threads = torch.get_num_threads()
        self.pending: deque[Future] = deque()

    def __call__(self, k: int, a: torch.Tensor) -> None:
        args = (a.detach().contiguous().numpy(), self.idx, self.order, self.ptr, self.divisor, k, self.rows)
        if self.threads == 1:
            _pool_layer(*args)
            return
        while len(self.pending) >= self.threads:
            self.pending.popleft().result()
        self.pending.append(_workers(self.threads).submit(_pool_layer, *args))

    def finish(self) -> None:
        while self.pending:
            self.pending.popleft().result()


_WORKERS: dict[tuple[int, int], ThreadPoolExecutor] = {}


def _workers(n: int) -> ThreadPoolExecutor:
    """``n`` threads for :func:`_pool_layer` tasks, kept for the process (a forked child makes its own: the
    parent's threads are not in it). Plain threads that wait on a queue: an OpenMP pool beside torch's would
    spin on the cores torch's threads need (and they on its)."""
    key = (os.getpid(), n)
    if key not in _WORKERS:
        _WORKERS[key] = ThreadPoolExecutor(n, thread_name_prefix="pool-words")
    return _WORKERS[key]


def load_kernel() -> None:
    """Load :func:`_pool_layer` now (from numba's cache, a few tenths of a second of CPU once per process;
    compiled the first time, a few seconds) instead of in the first batch pooled on CPU."""
    pool_attention(torch.ones(1, 1, 1, 1, 1), torch.zeros(1, 1, dtype=torch.long), 1, Pooling.mean_sum)


@njit(nogil=True, cache=True)
def _pool_layer(a: np.ndarray, idx: np.ndarray, order: np.ndarray, ptr: np.ndarray, divisor: np.ndarray, k: int,
                rows: np.ndarray) -> None:
    """Layer ``k`` of ``rows`` (B, L, H, M+1, M+1; its ``[:M, :M]`` written, the rest left as it is) from
    piece maps ``a`` (B, H, T, T): ``rows[b, k, h, w, v] = (Σ_{i∈w} Σ_{j∈v} a[b, h, i, j]) / divisor[b, w]``,
    the column sums first, each sum added to 0 term by term in piece order, as scatter-adds into zeros add
    them. ``idx`` (B, T): each piece's position, M or more for a dropped piece; ``order`` (B, T): each
    sentence's pieces sorted by position; ``ptr`` (B, M+1): where each position's pieces start in it. One
    map at a time, its column sums in cache; the GIL is released, so layers pool in parallel threads."""
    n_batch, n_heads, t, _ = a.shape
    m = divisor.shape[1]
    cols = np.empty((t, m), np.float32)
    for b in range(n_batch):
        for h in range(n_heads):
            for q in range(ptr[b, m]):  # the kept query pieces' column sums
                i = order[b, q]
                src, acc = a[b, h, i], cols[i]
                acc[:] = 0.0
                for j in range(t):
                    w = idx[b, j]
                    if w < m:
                        acc[w] += src[j]
            out = rows[b, k, h]
            for w in range(m):  # a position's row: its pieces' rows summed, then divided
                dst = out[w]
                dst[:m] = 0.0
                for q in range(ptr[b, w], ptr[b, w + 1]):
                    src = cols[order[b, q]]
                    for v in range(m):
                        dst[v] += src[v]
                c = divisor[b, w]
                for v in range(m):
                    dst[v] /= c


def _membership(piece_position: torch.Tensor, n_positions: int, pooling: Pooling) -> torch.Tensor:
    """``(B, M, T)`` float32, 1 where piece t counts for position p (every piece under ``mean_sum``, the
    first under ``first``; padding never)."""
    idx, keep = _targets(piece_position, n_positions, pooling)
    slots = torch.arange(n_positions, device=piece_position.device)
    return ((idx[:, None, :] == slots[None, :, None]) & keep[:, None, :]).to(torch.float32)


def pooling_matrix(piece_position: torch.Tensor, n_positions: int, pooling: Pooling) -> torch.Tensor:
    """``(B, M, T)`` float32: row p holds the weights of position p's pieces (``1/n`` for each of its n pieces
    under ``mean_sum``; 1 for its first piece under ``first``), 0 for padding."""
    member = _membership(piece_position, n_positions, Pooling(pooling))
    return member / member.sum(-1, keepdim=True).clamp(min=1.0)


def pool_layers(layers: Sequence[torch.Tensor], piece_position: torch.Tensor, n_positions: int,
                pooling: Pooling, dtype: torch.dtype, heads: int = 1, buffers: Optional[Buffers] = None
                ) -> torch.Tensor:
    """Piece vectors, K tensors ``(B, T, W)`` (one per layer, as a model hands them out) -> position vectors
    ``(B, K, M, W)``, or ``(B, K, heads, M, W/heads)`` when ``heads`` > 1 (the heads' context vectors,
    concatenated in ``W``), in ``dtype``. ``mean_sum``: a position's vector is the mean of its pieces' vectors
    (the side of attention that is averaged, the attending word's); ``first``: its first piece's. Padding
    (position -1) is dropped, as in :func:`pool_attention`; special tokens keep their own positions. Each
    layer is pooled by one batched matrix product (:func:`pooling_matrix`) straight into the output, never
    stacked at piece level. ``buffers``: the result lives in its slot (valid until the next call)."""
    b, t = piece_position.shape
    width = layers[0].shape[-1]
    weights = pooling_matrix(piece_position, n_positions, pooling)
    work = Buffers() if buffers is None else buffers
    out = work.take("pool_vectors", (b, len(layers), heads, n_positions, width // heads), dtype, weights.device)
    for k, x in enumerate(layers):
        pooled = torch.bmm(weights, x.to(torch.float32))  # (B, M, W)
        out[:, k] = pooled.view(b, n_positions, heads, width // heads).transpose(1, 2)
    return out if heads > 1 else out[:, :, 0]


def piece_positions(word_ids: list, n_tokens: int) -> tuple[list[int], int, int]:
    """Map a tokenizer's ``word_ids()`` to positions: each special token its own, each word one.

    Returns (position of each piece, number of positions, number of special positions before word 0).
    """
    pos: list[int] = []
    current = -1
    last_word = None
    prefix = 0
    seen_word = False
    for t in range(n_tokens):
        w = word_ids[t]
        if w is None:
            current += 1
            last_word = None
            if not seen_word:
                prefix += 1
        elif w != last_word:
            current += 1
            last_word = w
            seen_word = True
        pos.append(current)
    return pos, current + 1, prefix


def pool_one(attn: torch.Tensor, word_ids: list, pooling: Pooling) -> torch.Tensor:
    """One unpadded sentence: ``(L, H, T, T)`` -> ``(L, H, M, M)``."""
    pos, m, _ = piece_positions(word_ids, attn.shape[-1])
    return pool_attention(attn[None], torch.tensor([pos]), m, pooling)[0]
