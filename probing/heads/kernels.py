"""Compiled per-sentence kernels of the heads analysis (numba, ``cache=True``): every head's picks and the
attention-pattern sums of one sentence's maps, in a fixed order of operations, so the numbers are the same bits
whether they are made during extraction (``extract.keep_maps=false``) or from a stored map. Each is checked
against its numpy definition (:func:`probing.heads.scoring.pointers`, :func:`probing.heads.patterns.sentence_patterns`)
by the tests.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True)
def picks(ordered: np.ndarray) -> np.ndarray:
    """``(G, n, n)`` word-level maps (any ordered dtype: float, or float16 bits read as int16) -> ``(2, G, n)``
    int16: for every head and word, the argmax of the word's row (``dep_to_head``) and of its column
    (``head_to_dep``), the diagonal read as 0 and ties going to the leftmost word."""
    g_n, n = ordered.shape[0], ordered.shape[1]
    out = np.zeros((2, g_n, n), dtype=np.int16)
    zero = ordered.dtype.type(0)
    for g in range(g_n):
        a = ordered[g]
        for i in range(n):
            best, arg = a[i, 0] if i != 0 else zero, 0
            for j in range(1, n):
                v = a[i, j] if j != i else zero
                if v > best:
                    best, arg = v, j
            out[0, g, i] = arg
        for j in range(n):
            best, arg = a[0, j] if j != 0 else zero, 0
            for i in range(1, n):
                v = a[i, j] if i != j else zero
                if v > best:
                    best, arg = v, i
            out[1, g, j] = arg
    return out


@njit(cache=True)
def pattern_sums(a: np.ndarray, prefix: int, n_words: int, punct: np.ndarray, all_rows: bool) -> np.ndarray:
    """``(G, M, M)`` float32 row distributions -> ``(8, G)`` float64 sums over the attending rows (every row, or
    the words') of the attention to the positions before the words, after them, to position 0, to punctuation
    words, to the next and the previous position, to itself, and the rows' entropy (nats): the first eight of
    :data:`probing.schema.PATTERN_METRICS`."""
    g_n, m = a.shape[0], a.shape[1]
    r0, r1 = (0, m) if all_rows else (prefix, prefix + n_words)
    out = np.zeros((8, g_n))
    for g in range(g_n):
        for i in range(r0, r1):
            row = a[g, i]
            cls = sep = pu = ent = 0.0
            for j in range(m):
                x = np.float64(row[j])
                if j < prefix:
                    cls += x
                elif j >= prefix + n_words:
                    sep += x
                elif punct[j - prefix]:
                    pu += x
                if x > 0.0:
                    ent -= x * math.log(x)
            out[0, g] += cls
            out[1, g] += sep
            out[2, g] += row[0]
            out[3, g] += pu
            if i + 1 < m:
                out[4, g] += row[i + 1]
            if i >= 1:
                out[5, g] += row[i - 1]
            out[6, g] += row[i]
            out[7, g] += ent
    return out


_HALF = np.arange(2 ** 16, dtype=np.uint16).view(np.float16).astype(np.float32)  # every float16 as a float32


@njit(cache=True)
def _widen(bits: np.ndarray, table: np.ndarray, out: np.ndarray) -> None:
    for k in range(bits.size):
        out[k] = table[bits[k]]


def half_to_float(maps: np.ndarray) -> np.ndarray:
    """A float16 array as float32 (exact: every float16 is a float32), by table lookup: several times faster
    than numpy's conversion, and without the thread pool a torch call would wake for a small array."""
    bits = np.ascontiguousarray(maps).view(np.uint16).ravel()
    out = np.empty(bits.size, dtype=np.float32)
    _widen(bits, _HALF, out)
    return out.reshape(maps.shape)
