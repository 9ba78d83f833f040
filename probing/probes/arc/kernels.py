"""Compiled kernels of the arc probe, reading the attention store's shards directly (numba, ``cache=True``).

The kernels work sentence by sentence: a sentence's maps (the selected heads) are first laid out as
``(cell, head)`` rows in float32, so a candidate's features are a few contiguous runs of one cell's heads.
A float16 store is read as its bit patterns through a 65,536-entry table (exact, and faster than numpy's
conversion). Sentences come as parallel arrays: element offset ``off`` in the shard, positions ``m``, words
``n``, special positions before the words ``p``, and their dependents ``dep_lo[s]..dep_hi[s]-1`` (word ``i[d]``,
its candidate heads the words ``j < lim[d]`` but itself: every word, ``n``, or a causal model's words on its left,
``i``).

* :func:`fill` writes the feature rows (a block of the design matrix, for the Hessian and predictions);
* :func:`cells` and :func:`softmax_coefs` are the inner loop of every pass over the training data: the cells of
  a group of sentences as a ``(cells, heads)`` matrix C, scored for every probe by one GEMM ``C @ W``; the
  softmax over each dependent's candidates turns the scores into gradient coefficients on the cells, and a
  second GEMM ``C.T @ G`` gives the gradient. No feature row is written: fwd and bwd features of all
  candidates read the same cells.

Feature columns: for each offset ``o`` (0 first), for each direction (fwd ``A[i, j+o]``, bwd ``A[j, i+o]``),
one per selected head; ROOT: fwd = total attention of i to the special positions, bwd = their mean attention
to i (summed in position order in float32, as :func:`probing.probes.features.root_features` does).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange, types
from numba.extending import overload

F16_TABLE = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)


def _value(flat, lut, at):  # pragma: no cover - replaced by the overload inside compiled code
    raise NotImplementedError


@overload(_value, inline="always")
def _value_overload(flat, lut, at):
    if flat.dtype == types.uint16:  # a float16 store, viewed as its bit patterns
        return lambda flat, lut, at: lut[flat[at]]
    return lambda flat, lut, at: np.float32(flat[at])


@njit(inline="always", cache=True)
def _load_cells(flat, lut, start, mm, planes, C, base):  # pragma: no cover - compiled
    """One sentence's maps of the selected heads into rows ``base ..`` of ``C``: cell ``(q, c)`` at row
    ``base + q * mm + c``, one float32 column per head (16-cell tiles: contiguous reads per head, rows that
    stay in L1)."""
    k_count = len(planes)
    for c0 in range(0, mm * mm, 16):
        c1 = min(c0 + 16, mm * mm)
        for k in range(k_count):
            at = start + planes[k] * mm * mm
            for cell in range(c0, c1):
                C[base + cell, k] = _value(flat, lut, at + cell)


@njit(inline="always", cache=True)
def _root_row(C, base, mm, pp, nn, ii, fwd, bwd, xr):  # pragma: no cover - compiled
    """ROOT features of word ``ii`` into ``xr``: its total attention to the special positions (fwd) and their
    mean attention to it (bwd), summed in position order in float32 as ``root_features`` does."""
    k_count = C.shape[1]
    for k in range(k_count):
        acc_f = np.float32(0.0)
        acc_b = np.float32(0.0)
        for c in range(mm):
            if pp <= c < pp + nn:
                continue
            acc_f += C[base + (pp + ii) * mm + c, k]
            acc_b += C[base + c * mm + pp + ii, k]
        if fwd:
            xr[k] = acc_f
        if bwd:
            xr[int(fwd) * k_count + k] = acc_b / np.float32(max(mm - nn, 1))


@njit(inline="always", cache=True)
def _cell_into(C, row, inside, x, col):  # pragma: no cover - compiled
    """Cell row ``row``'s heads into ``x[col:col + K]`` (zeros when the cell lies outside the words)."""
    k_count = C.shape[1]
    if inside:
        for k in range(k_count):
            x[col + k] = C[row, k]
    else:
        x[col:col + k_count] = 0.0


@njit(inline="always", cache=True)
def _word_row(C, mm, pp, nn, ii, j, offs, fwd, bwd, x):  # pragma: no cover - compiled
    """Features of candidate head ``j`` of dependent ``ii`` into ``x`` (one sentence's cells at row 0 of C)."""
    k_count = C.shape[1]
    col = 0
    for oi in range(len(offs)):
        o = offs[oi]
        if fwd:  # A[i, j+o]
            _cell_into(C, (pp + ii) * mm + pp + j + o, 0 <= j + o < nn, x, col)
            col += k_count
        if bwd:  # A[j, i+o]
            _cell_into(C, (pp + j) * mm + pp + ii + o, 0 <= ii + o < nn, x, col)
            col += k_count


@njit(parallel=True, cache=True)
def fill(flat, lut, off, m, n, p, dep_lo, dep_hi, i, lim, start, planes, offs, fwd, bwd, X, R
         ):  # pragma: no cover - compiled
    """Word-candidate rows of ``X`` (dependent d's from row ``start[d]``, its candidates in order) and ROOT
    rows ``R[d]``."""
    for s in prange(len(off)):
        mm, nn, pp = m[s], n[s], p[s]
        t = np.empty((mm * mm, len(planes)), np.float32)
        _load_cells(flat, lut, off[s], mm, planes, t, 0)
        for d in range(dep_lo[s], dep_hi[s]):
            ii = i[d]
            for j in range(lim[d]):
                if j != ii:
                    _word_row(t, mm, pp, nn, ii, j, offs, fwd, bwd, X[start[d] + j - (1 if j > ii else 0)])
            _root_row(t, 0, mm, pp, nn, ii, fwd, bwd, R[d])


@njit(parallel=True, cache=True)
def cells(flat, lut, off, m, n, p, dep_lo, dep_hi, i, planes, fwd, bwd, cstart, C, R):  # pragma: no cover
    """Every cell of each sentence as a row of ``C`` (cell ``(q, c)`` of sentence s at row
    ``cstart[s] + q * m[s] + c``, one column per selected head, float32) and each dependent's ROOT row ``R[d]``."""
    for s in prange(len(off)):
        _load_cells(flat, lut, off[s], m[s], planes, C, cstart[s])
        for d in range(dep_lo[s], dep_hi[s]):
            _root_row(C, cstart[s], m[s], p[s], n[s], i[d], fwd, bwd, R[d])


@njit(parallel=True, cache=True)
def softmax_coefs(S, rs, cstart, m, n, p, dep_lo, dep_hi, i, lim, gold, offs, fwd, bwd, loss, G, coef_r
                  ):  # pragma: no cover - compiled
    """From cell scores ``S`` (row = cell, column ``(o * ndirs + dir) * P + q``: head weights of probe q for
    offset o and direction dir, summed over heads) and ROOT scores ``rs`` ``(D, P)``: each sentence's summed
    cross-entropy ``loss[s, q]`` and the gradient coefficients, ``p - [gold]``, on the cells (``G``, same
    layout as S, zero elsewhere) and on ROOT (``coef_r`` ``(D, P)``).

    Candidate j of dependent i scores ``sum_o S[(i, j+o), fwd o] + S[(j, i+o), bwd o]`` (cells of the
    sentence's words, out-of-sentence offsets left out), as the features define it."""
    n_p = rs.shape[1]
    ndirs = int(fwd) + int(bwd)
    for s in prange(len(cstart)):
        mm, nn, pp, base = m[s], n[s], p[s], cstart[s]
        sc = np.empty(nn)
        for d in range(dep_lo[s], dep_hi[s]):
            ii, jj = i[d], lim[d]
            for q in range(n_p):
                for j in range(jj):
                    acc = 0.0
                    if j != ii:
                        for oi in range(len(offs)):
                            o = offs[oi]
                            col = oi * ndirs * n_p + q
                            if fwd:
                                if 0 <= j + o < nn:
                                    acc += S[base + (pp + ii) * mm + pp + j + o, col]
                                col += n_p
                            if bwd and 0 <= ii + o < nn:
                                acc += S[base + (pp + j) * mm + pp + ii + o, col]
                    sc[j] = acc
                top = rs[d, q]
                for j in range(jj):
                    if j != ii and sc[j] > top:
                        top = sc[j]
                z = np.exp(rs[d, q] - top)
                for j in range(jj):
                    if j != ii:
                        z += np.exp(sc[j] - top)
                log_z = np.log(z) + top
                g = gold[d, q]
                jg = -1 if g < 0 else g + (1 if g >= ii else 0)
                loss[s, q] += log_z - (rs[d, q] if g < 0 else sc[jg])
                coef_r[d, q] = np.exp(rs[d, q] - log_z) - (1.0 if g < 0 else 0.0)
                for j in range(jj):
                    if j == ii:
                        continue
                    coef = np.exp(sc[j] - log_z) - (1.0 if j == jg else 0.0)
                    for oi in range(len(offs)):
                        o = offs[oi]
                        col = oi * ndirs * n_p + q
                        if fwd:
                            if 0 <= j + o < nn:
                                G[base + (pp + ii) * mm + pp + j + o, col] += coef
                            col += n_p
                        if bwd and 0 <= ii + o < nn:
                            G[base + (pp + j) * mm + pp + ii + o, col] += coef
