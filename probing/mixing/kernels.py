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

ROWS = 4  # queries mixed together per key (_alti_key; its unrolled loop assumes 4)


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
    never exist, and no centred copy of ``f`` is written out. Four queries and four heads go together per
    pass over the width (16 multiply-adds per load of four value rows), heads padded to a multiple of four.
    """
    n_heads, n_batch, n_pos, width = f.shape
    want0, want2, want_alti = gram0.shape[0] > 0, gram2.shape[0] > 0, alti.shape[0] > 0
    padded = (n_heads + 3) // 4 * 4
    h_l1 = np.abs(h).sum(axis=-1)
    for bj in prange(n_batch * n_pos):
        b = bj // n_pos
        j = bj - b * n_pos
        n = lengths[b]
        if j >= n:
            continue
        fj = np.zeros((padded, width), np.float32)
        for k in range(n_heads):
            for e in range(width):
                fj[k, e] = f[k, b, j, e]
        if want0:
            _gram(fj, n_heads, gram0[b, j])
        if not (want2 or want_alti):
            continue
        for k in range(n_heads):  # f1 = g1 ⊙ centred f, in place
            m = np.float32(0.0)
            for e in range(width):
                m += fj[k, e]
            m /= width
            for e in range(width):
                fj[k, e] = g1[e] * (fj[k, e] - m)
        if want2:
            u = np.empty((n_heads, width), np.float32)
            for k in range(n_heads):
                m = np.float32(0.0)
                for e in range(width):
                    m += fj[k, e]
                m /= width
                s = np.float32(0.0)
                for e in range(width):
                    u[k, e] = g2[e] * (fj[k, e] - m)
                    s += u[k, e] * x2[b, j, e]
                fx2[b, k, j] = s
            _gram(u, n_heads, gram2[b, j])
        if want_alti:
            _alti_key(probs, fj, x1, h, h_l1, b, j, n, alti)


@njit(fastmath=True, cache=True)
def _gram(rows: np.ndarray, n: int, out: np.ndarray) -> None:
    """``out[h, k] = <rows[h], rows[k]>`` for the first ``n`` rows (symmetric: each pair once), four
    columns per pass over a row (five loads per four multiply-adds, not two per one)."""
    width = rows.shape[1]
    for a in range(n):
        c = a
        while c + 4 <= n:
            s0 = s1 = s2 = s3 = np.float32(0.0)
            for e in range(width):
                r = rows[a, e]
                s0 += r * rows[c, e]
                s1 += r * rows[c + 1, e]
                s2 += r * rows[c + 2, e]
                s3 += r * rows[c + 3, e]
            out[a, c], out[a, c + 1], out[a, c + 2], out[a, c + 3] = s0, s1, s2, s3
            out[c, a], out[c + 1, a], out[c + 2, a], out[c + 3, a] = s0, s1, s2, s3
            c += 4
        while c < n:
            s = np.float32(0.0)
            for e in range(width):
                s += rows[a, e] * rows[c, e]
            out[a, c] = s
            out[c, a] = s
            c += 1


@njit(fastmath=True, cache=True)
def _alti_key(probs: np.ndarray, fj: np.ndarray, x1: np.ndarray, h: np.ndarray, h_l1: np.ndarray,
              b: int, j: int, n: int, out: np.ndarray) -> None:
    """ALTI's scores of key ``j`` for queries ``i < n`` from its mapped values ``fj`` (heads padded to a
    multiple of four with zero rows)."""
    n_heads, padded, width = probs.shape[1], fj.shape[0], fj.shape[1]
    u = np.empty((ROWS, width), np.float32)
    a = np.zeros((ROWS, padded), np.float32)
    for i0 in range(0, n, ROWS):
        m = min(ROWS, n - i0)
        for r in range(ROWS):
            for k in range(n_heads):
                a[r, k] = probs[b, k, i0 + r, j] if r < m else np.float32(0.0)
            for e in range(width):
                u[r, e] = -h[b, i0 + r, e] if r < m else np.float32(0.0)
            if i0 + r == j:
                for e in range(width):
                    u[r, e] += x1[b, j, e]
        for k in range(0, padded, 4):
            a00, a01, a02, a03 = a[0, k], a[0, k + 1], a[0, k + 2], a[0, k + 3]
            a10, a11, a12, a13 = a[1, k], a[1, k + 1], a[1, k + 2], a[1, k + 3]
            a20, a21, a22, a23 = a[2, k], a[2, k + 1], a[2, k + 2], a[2, k + 3]
            a30, a31, a32, a33 = a[3, k], a[3, k + 1], a[3, k + 2], a[3, k + 3]
            for e in range(width):
                f0, f1, f2, f3 = fj[k, e], fj[k + 1, e], fj[k + 2, e], fj[k + 3, e]
                u[0, e] += a00 * f0 + a01 * f1 + a02 * f2 + a03 * f3
                u[1, e] += a10 * f0 + a11 * f1 + a12 * f2 + a13 * f3
                u[2, e] += a20 * f0 + a21 * f1 + a22 * f2 + a23 * f3
                u[3, e] += a30 * f0 + a31 * f1 + a32 * f2 + a33 * f3
        for r in range(m):
            dist = np.float32(0.0)
            for e in range(width):
                dist += abs(u[r, e])
            out[b, i0 + r, j] = max(np.float32(0.0), h_l1[b, i0 + r] - dist)


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
