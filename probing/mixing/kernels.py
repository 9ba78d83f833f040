"""Compiled CPU kernels for the per-layer context-mixing measures (numba, ``cache=True``).

ALTI scores every (query i, key j) pair by ``||h_i - T_i(v_ij)||_1`` over the model width D, and no algebra
avoids the ``(B, T, T, D)`` vectors ``T_i(v_ij) = Σ_h α^h_ij f^h_j + [i = j] x_i`` behind it (an L1 norm
has no Gram form). In torch they are built by a matmul with K = H (a poor shape for BLAS), written to
memory, subtracted, and reduced: four passes over the largest tensor of the extraction. :func:`key_terms`
forms each vector in a scratch row and reduces it at once, and, in the same task per key, the Gram
matrices over heads that ``norm_layer`` and GlobEnc need, so the heads' transformed values are read from
memory once for all three measures; :func:`quad_forms` turns Gram matrices into squared norms of weighted
sums. Padding rows and keys are skipped.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

ROWS = 4  # queries mixed together per key (_alti_key's loops are written out for 4)
HEADS = 6  # heads per pass over the width (_alti_key's loops are written out for 6)


@njit(parallel=True, fastmath=True, cache=True)
def key_terms(probs: np.ndarray, f: np.ndarray, g1: np.ndarray, g2: np.ndarray, x1: np.ndarray, x2: np.ndarray,
              h: np.ndarray, lengths: np.ndarray, gram0: np.ndarray, gram2: np.ndarray, fx2: np.ndarray,
              alti: np.ndarray) -> None:
    """Everything ``norm_layer``, GlobEnc and ALTI need from the heads' transformed values ``f`` (H, B, T, D,
    head-major), in one pass over it: one task per key piece ``j < lengths[b]`` (others are left as they
    are; pass zeros). An output whose first axis has length 0 is not computed.

    - ``gram0`` (B, T, H, H): ``<f^h_j, f^k_j>`` (norm_layer);
    - ``gram2`` (B, T, H, H), ``fx2`` (B, H, T): ``<u^h_j, u^k_j>`` and ``<u^h_j, x2_j>`` for
      ``u = g2 ⊙ centred(f1)``, ``f1 = g1 ⊙ centred(f)`` (GlobEnc: LN1's and LN2's centring and gains);
    - ``alti`` (B, T, T): ``alti[b, i, j] = max(0, ||h_i||_1 - ||h_i - Σ_k α^k_ij f1^k_j - [i = j] x1_i||_1)``
      for ``i < lengths[b]`` (ALTI's L1 distances; ``x1``, ``h`` (B, T, D)).

    The key's (H, D) block is read from memory once, into a scratch copy that stays in cache while its
    Gram matrices and every query's ALTI vector are formed: the vectors ``Σ_k α^k_ij f1^k_j`` (B, T, T, D)
    never exist, and no centred copy of ``f`` is written out. Both centrings come from sums taken during
    the copy (the mean of ``f1`` is ``mean(g1 f) - mean(f) mean(g1)``), so ``f1`` and ``u`` are formed in one
    more pass.
    """
    n_heads, n_batch, n_pos, width = f.shape
    want0, want2, want_alti = gram0.shape[0] > 0, gram2.shape[0] > 0, alti.shape[0] > 0
    padded = (n_heads + HEADS - 1) // HEADS * HEADS
    h_l1 = np.abs(h).sum(axis=-1)
    target = h - x1 if want_alti else h  # the query's own key also carries the residual: h_i - x1_i
    g1_mean = g1.mean()
    for bj in prange(n_batch * n_pos):
        b = bj // n_pos
        j = bj - b * n_pos
        n = lengths[b]
        if j >= n:
            continue
        fj = np.empty((padded, width), np.float32)
        fj[n_heads:] = 0.0
        mean = np.empty(n_heads, np.float32)  # of f^k_j
        mean_g = np.empty(n_heads, np.float32)  # of g1 ⊙ f^k_j
        for k in range(n_heads):
            s = np.float32(0.0)
            sg = np.float32(0.0)
            for e in range(width):
                v = f[k, b, j, e]
                fj[k, e] = v
                s += v
                sg += g1[e] * v
            mean[k] = s / width
            mean_g[k] = sg / width
        if want0:
            _gram(fj, n_heads, gram0[b, j])
        if want2:  # f1 = g1 ⊙ (f - mean f) in place, u = g2 ⊙ (f1 - mean f1) beside it
            _globenc_key(fj, n_heads, width, mean, mean_g, g1, g1_mean, g2, x2, b, j, fx2, gram2)
        elif want_alti:
            for k in range(n_heads):
                m = mean[k]
                for e in range(width):
                    fj[k, e] = g1[e] * (fj[k, e] - m)
        if want_alti:
            _alti_key(probs, fj, target, h, h_l1, b, j, n, alti)


@njit(fastmath=True, cache=True, inline="always")
def _globenc_key(fj: np.ndarray, n_heads: int, width: int, mean: np.ndarray, mean_g: np.ndarray,
                 g1: np.ndarray, g1_mean: float, g2: np.ndarray, x2: np.ndarray, b: int, j: int,
                 fx2: np.ndarray, gram2: np.ndarray) -> None:
    """GlobEnc's terms of key ``j`` (inlined in :func:`key_terms`, whose means of ``f`` it reads):
    ``f1 = g1 ⊙ (f - mean f)`` in place in ``fj`` (ALTI reads it next), ``u = g2 ⊙ (f1 - mean f1)``
    beside it, then ``fx2[b, :, j]`` and ``gram2[b, j]`` from ``u``."""
    u = np.empty((n_heads, width), np.float32)
    for k in range(n_heads):
        m, m1 = mean[k], mean_g[k] - mean[k] * g1_mean
        s = np.float32(0.0)
        for e in range(width):
            c = g1[e] * (fj[k, e] - m)
            fj[k, e] = c
            w = g2[e] * (c - m1)
            u[k, e] = w
            s += w * x2[b, j, e]
        fx2[b, k, j] = s
    _gram(u, n_heads, gram2[b, j])


@njit(fastmath=True, cache=True)
def _gram(rows: np.ndarray, n: int, out: np.ndarray) -> None:
    """``out[h, k] = <rows[h], rows[k]>`` for the first ``n`` rows, in 4 x 4 tiles on and above the diagonal
    (eight loads per sixteen multiply-adds), mirrored; the rows past the last full tile one pair at a time."""
    width = rows.shape[1]
    full = n // 4 * 4
    for a in range(0, full, 4):
        for c in range(a, full, 4):
            s00 = s01 = s02 = s03 = s10 = s11 = s12 = s13 = np.float32(0.0)
            s20 = s21 = s22 = s23 = s30 = s31 = s32 = s33 = np.float32(0.0)
            for e in range(width):
                r0, r1, r2, r3 = rows[a, e], rows[a + 1, e], rows[a + 2, e], rows[a + 3, e]
                q0, q1, q2, q3 = rows[c, e], rows[c + 1, e], rows[c + 2, e], rows[c + 3, e]
                s00 += r0 * q0
                s01 += r0 * q1
                s02 += r0 * q2
                s03 += r0 * q3
                s10 += r1 * q0
                s11 += r1 * q1
                s12 += r1 * q2
                s13 += r1 * q3
                s20 += r2 * q0
                s21 += r2 * q1
                s22 += r2 * q2
                s23 += r2 * q3
                s30 += r3 * q0
                s31 += r3 * q1
                s32 += r3 * q2
                s33 += r3 * q3
            tile = ((s00, s01, s02, s03), (s10, s11, s12, s13), (s20, s21, s22, s23), (s30, s31, s32, s33))
            for p in range(4):
                for q in range(4):
                    out[a + p, c + q] = tile[p][q]
                    out[c + q, a + p] = tile[p][q]
    for p in range(n):
        for q in range(max(p, full), n):
            s = np.float32(0.0)
            for e in range(width):
                s += rows[p, e] * rows[q, e]
            out[p, q] = s
            out[q, p] = s


@njit(fastmath=True, cache=True)
def _alti_key(probs: np.ndarray, fj: np.ndarray, target_own: np.ndarray, h: np.ndarray, h_l1: np.ndarray,
              b: int, j: int, n: int, out: np.ndarray) -> None:
    """ALTI's scores of key ``j`` for queries ``i < n`` from its mapped values ``fj`` (heads padded to a
    multiple of ``HEADS`` with zero rows): ``||Σ_k α^k_ij fj^k - t_i||_1`` with ``t_i = h_i``, or
    ``target_own[i] = h_i - x1_i`` at ``i = j``. Four queries and six heads go together per pass over the
    width; the first pass starts from ``-t_i`` and the last one reduces, so the partial sums are stored
    only between passes (once, for twelve heads)."""
    n_heads, padded, width = probs.shape[1], fj.shape[0], fj.shape[1]
    u = np.empty((ROWS, width), np.float32)
    a = np.zeros((ROWS, padded), np.float32)
    last = padded - HEADS
    for i0 in range(0, n, ROWS):
        m = min(ROWS, n - i0)
        for r in range(ROWS):
            for k in range(n_heads):
                a[r, k] = probs[b, k, i0 + r, j] if r < m else np.float32(0.0)
        i1, i2, i3 = min(i0 + 1, n - 1), min(i0 + 2, n - 1), min(i0 + 3, n - 1)  # rows past n: discarded
        t0 = target_own[b, i0] if i0 == j else h[b, i0]
        t1 = target_own[b, i1] if i1 == j else h[b, i1]
        t2 = target_own[b, i2] if i2 == j else h[b, i2]
        t3 = target_own[b, i3] if i3 == j else h[b, i3]
        d0 = d1 = d2 = d3 = np.float32(0.0)
        for k in range(0, padded, HEADS):
            a00, a01, a02, a03, a04, a05 = a[0, k], a[0, k + 1], a[0, k + 2], a[0, k + 3], a[0, k + 4], a[0, k + 5]
            a10, a11, a12, a13, a14, a15 = a[1, k], a[1, k + 1], a[1, k + 2], a[1, k + 3], a[1, k + 4], a[1, k + 5]
            a20, a21, a22, a23, a24, a25 = a[2, k], a[2, k + 1], a[2, k + 2], a[2, k + 3], a[2, k + 4], a[2, k + 5]
            a30, a31, a32, a33, a34, a35 = a[3, k], a[3, k + 1], a[3, k + 2], a[3, k + 3], a[3, k + 4], a[3, k + 5]
            if k == 0 and k == last:
                for e in range(width):
                    f0, f1, f2, f3, f4, f5 = fj[k, e], fj[k + 1, e], fj[k + 2, e], fj[k + 3, e], fj[k + 4, e], fj[k + 5, e]
                    d0 += abs(a00 * f0 + a01 * f1 + a02 * f2 + a03 * f3 + a04 * f4 + a05 * f5 - t0[e])
                    d1 += abs(a10 * f0 + a11 * f1 + a12 * f2 + a13 * f3 + a14 * f4 + a15 * f5 - t1[e])
                    d2 += abs(a20 * f0 + a21 * f1 + a22 * f2 + a23 * f3 + a24 * f4 + a25 * f5 - t2[e])
                    d3 += abs(a30 * f0 + a31 * f1 + a32 * f2 + a33 * f3 + a34 * f4 + a35 * f5 - t3[e])
            elif k == 0:
                for e in range(width):
                    f0, f1, f2, f3, f4, f5 = fj[k, e], fj[k + 1, e], fj[k + 2, e], fj[k + 3, e], fj[k + 4, e], fj[k + 5, e]
                    u[0, e] = a00 * f0 + a01 * f1 + a02 * f2 + a03 * f3 + a04 * f4 + a05 * f5 - t0[e]
                    u[1, e] = a10 * f0 + a11 * f1 + a12 * f2 + a13 * f3 + a14 * f4 + a15 * f5 - t1[e]
                    u[2, e] = a20 * f0 + a21 * f1 + a22 * f2 + a23 * f3 + a24 * f4 + a25 * f5 - t2[e]
                    u[3, e] = a30 * f0 + a31 * f1 + a32 * f2 + a33 * f3 + a34 * f4 + a35 * f5 - t3[e]
            elif k == last:
                for e in range(width):
                    f0, f1, f2, f3, f4, f5 = fj[k, e], fj[k + 1, e], fj[k + 2, e], fj[k + 3, e], fj[k + 4, e], fj[k + 5, e]
                    d0 += abs(u[0, e] + a00 * f0 + a01 * f1 + a02 * f2 + a03 * f3 + a04 * f4 + a05 * f5)
                    d1 += abs(u[1, e] + a10 * f0 + a11 * f1 + a12 * f2 + a13 * f3 + a14 * f4 + a15 * f5)
                    d2 += abs(u[2, e] + a20 * f0 + a21 * f1 + a22 * f2 + a23 * f3 + a24 * f4 + a25 * f5)
                    d3 += abs(u[3, e] + a30 * f0 + a31 * f1 + a32 * f2 + a33 * f3 + a34 * f4 + a35 * f5)
            else:
                for e in range(width):
                    f0, f1, f2, f3, f4, f5 = fj[k, e], fj[k + 1, e], fj[k + 2, e], fj[k + 3, e], fj[k + 4, e], fj[k + 5, e]
                    u[0, e] += a00 * f0 + a01 * f1 + a02 * f2 + a03 * f3 + a04 * f4 + a05 * f5
                    u[1, e] += a10 * f0 + a11 * f1 + a12 * f2 + a13 * f3 + a14 * f4 + a15 * f5
                    u[2, e] += a20 * f0 + a21 * f1 + a22 * f2 + a23 * f3 + a24 * f4 + a25 * f5
                    u[3, e] += a30 * f0 + a31 * f1 + a32 * f2 + a33 * f3 + a34 * f4 + a35 * f5
        dist = (d0, d1, d2, d3)
        for r in range(m):
            out[b, i0 + r, j] = max(np.float32(0.0), h_l1[b, i0 + r] - dist[r])


@njit(parallel=True, fastmath=True, cache=True)
def quad_forms(probs: np.ndarray, grams: np.ndarray, lengths: np.ndarray, out: np.ndarray) -> None:
    """``out[g, b, i, j] = Σ_{h,k} α^h_ij grams[g, b, j, h, k] α^k_ij`` for ``i, j < lengths[b]``: the squared
    norm of ``Σ_h α^h_ij u^h_j`` from the Gram matrices of the u's, for several Grams at once (one pass over
    the weights). One query row per task: its H rows of weights are read in order."""
    n_grams, n_batch, n_heads, n_pos = grams.shape[0], probs.shape[0], probs.shape[1], probs.shape[2]
    for bi in prange(n_batch * n_pos):
        b = bi // n_pos
        i = bi - b * n_pos
        n = lengths[b]
        if i >= n:
            continue
        a = np.empty(n_heads, np.float32)
        for j in range(n):
            for h in range(n_heads):
                a[h] = probs[b, h, i, j]
            for g in range(n_grams):
                s = np.float32(0.0)
                for h in range(n_heads):
                    t = np.float32(0.0)
                    for k in range(n_heads):
                        t += grams[g, b, j, h, k] * a[k]
                    s += a[h] * t
                out[g, b, i, j] = s
