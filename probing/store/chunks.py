"""Read an attention store in bounded chunks of similar-length sentences, padded for numpy.

Each chunk is at most ``max_sentences`` sentences and at most ``max_mb`` megabytes of padded maps, so the
memory an analysis needs does not grow with the corpus. Sentences are taken shortest first (padding is then
small), and the store's memory maps are released after every chunk so that the pages already read leave the
process's resident set.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Optional, Sequence

import numpy as np

from probing.store import AttentionStore


@dataclass(frozen=True)
class Chunk:
    """A group of sentences read together.

    ``rows``: positions of the sentences in the analysis order (0..S-1), ``(B,)``;
    ``indices``: their corpus indices ``(B,)``; ``n``: words per sentence ``(B,)``;
    ``words``: float16 maps over words only, zero-padded to ``(B, L, H, N, N)`` with ``N = n.max()``
    (row = query word, column = key word; the padding is zero so it never wins a leftmost argmax).
    """

    rows: np.ndarray
    indices: np.ndarray
    n: np.ndarray
    words: np.ndarray


def plan_chunks(n_words: np.ndarray, bytes_per_cell: int, max_sentences: int, max_mb: float
                ) -> list[np.ndarray]:
    """Split positions ``0..len(n_words)-1`` into chunks, shortest sentences first.

    A chunk holds at most ``max_sentences`` sentences and ``B * N * N * bytes_per_cell <= max_mb`` MiB
    (N the longest sentence of the chunk); a single sentence over the budget is a chunk of its own.
    """
    if max_sentences < 1:
        raise ValueError(f"max_sentences must be >= 1, got {max_sentences}")
    order = np.argsort(n_words, kind="stable")
    budget = max_mb * 2**20
    chunks: list[np.ndarray] = []
    start = 0
    for k in range(1, len(order) + 1):
        # shortest first, so the chunk's longest sentence is the last one taken
        size = k - start
        if k == len(order):
            chunks.append(order[start:k])
            break
        nxt = int(n_words[order[k]])
        if size >= max_sentences or (size + 1) * nxt * nxt * bytes_per_cell > budget:
            chunks.append(order[start:k])
            start = k
    return [c for c in chunks if len(c)]


def iter_chunks(store: AttentionStore, indices: Sequence[int], max_sentences: int, max_mb: float,
                release: bool = True) -> Iterator[Chunk]:
    """Padded word-level maps of ``indices`` (corpus indices present in the store), chunk by chunk.

    ``rows`` refer to positions in ``indices``. With ``release`` the store's memory maps are dropped after
    each chunk (peak memory stays flat as the corpus grows).
    """
    idx = np.asarray(indices, dtype=np.int64)
    n_words = store.n_words[idx].astype(np.int64)
    cell = store.num_layers * store.num_heads * 2  # float16 bytes per (query, key) cell
    for rows in plan_chunks(n_words, cell, max_sentences, max_mb):
        n = n_words[rows]
        big_n = int(n.max()) if len(n) else 0
        buf = np.zeros((len(rows), store.num_layers, store.num_heads, big_n, big_n), dtype=np.float16)
        for b, i in enumerate(idx[rows]):
            k = int(n[b])
            buf[b, :, :, :k, :k] = store.words(int(i))
        yield Chunk(rows=rows, indices=idx[rows], n=n, words=buf)
        if release:
            store.close()


def sentence_order(store: AttentionStore, indices: Optional[Sequence[int]] = None) -> np.ndarray:
    """Corpus indices to analyse: the given ones (checked against the store) or all that have maps."""
    if indices is None:
        return store.indices
    idx = np.asarray(list(indices), dtype=np.int64)
    missing = [int(i) for i in idx if int(i) not in store]
    if missing:
        raise KeyError(f"sentences without maps in {store.dir}: {missing[:10]}")
    return idx
