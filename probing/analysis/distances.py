"""How alike are two heads? (Clark et al. 2019, section 6.)

The distance between heads g and h is the Jensen-Shannon distance (the square root of the JS divergence,
base 2, so in [0, 1]) between their attention distributions, averaged over every attending word of the
sentences used; each distribution spans the full sequence (special tokens kept). The heads are then
embedded in two dimensions with metric MDS (scikit-learn) on the precomputed distances.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
from scipy.special import entr

from probing.progress import progress
from probing.store import AttentionStore


def js_distance_sums(rows: np.ndarray) -> np.ndarray:
    """``(G, R, M)`` distributions (G heads, R attending rows, zero-padded to M) -> ``(G, G)`` sums over the
    rows of the JS distance (base 2) between every pair of heads."""
    g = rows.shape[0]
    p = rows.astype(np.float32, copy=False)
    h_self = entr(p).sum(axis=-1)  # (G, R)
    out = np.zeros((g, g))
    for a in range(g):  # the other head's axis is vectorised; only the upper triangle is computed
        mix = 0.5 * (p[a][None] + p[a:])
        js = entr(mix).sum(axis=-1) - 0.5 * (h_self[a][None] + h_self[a:])
        d = np.sqrt(np.clip(js / np.log(2), 0.0, 1.0)).sum(axis=-1)
        out[a, a:] = d
        out[a:, a] = d
    np.fill_diagonal(out, 0.0)
    return out


def head_distances(store: AttentionStore, indices: Sequence[int], block_rows: int = 1024) -> tuple[np.ndarray, int]:
    """Mean JS distance between all pairs of heads over the attending words of ``indices``:
    ``(L*H, L*H)`` (head ``layer * H + head``) and the number of rows averaged."""
    g = store.num_layers * store.num_heads
    total = np.zeros((g, g))
    count = 0
    batch: list[np.ndarray] = []
    batch_rows = 0

    def flush() -> None:
        nonlocal batch, batch_rows
        if not batch:
            return
        m = max(b.shape[-1] for b in batch)
        rows = np.zeros((g, batch_rows, m), dtype=np.float32)
        at = 0
        for b in batch:
            rows[:, at:at + b.shape[1], :b.shape[-1]] = b
            at += b.shape[1]
        total[:] += js_distance_sums(rows)
        batch, batch_rows = [], 0

    for i, maps in progress(store.iter_maps(indices), "head distances", total=len(indices)):
        p, n = int(store.prefix[i]), int(store.n_words[i])
        batch.append(np.asarray(maps[..., p:p + n, :], dtype=np.float32).reshape(g, n, -1))
        batch_rows += n
        count += n
        if batch_rows >= block_rows:
            flush()
    flush()
    store.close()
    return (total / count if count else total), count


def distance_table(dist: np.ndarray, num_heads: int) -> pd.DataFrame:
    """The matrix as tidy rows ``layer_a, head_a, layer_b, head_b, js_distance``."""
    g = dist.shape[0]
    a, b = np.meshgrid(np.arange(g), np.arange(g), indexing="ij")
    return pd.DataFrame({"layer_a": (a // num_heads).ravel(), "head_a": (a % num_heads).ravel(),
                         "layer_b": (b // num_heads).ravel(), "head_b": (b % num_heads).ravel(),
                         "js_distance": dist.ravel()})


def mds_embedding(dist: np.ndarray, num_heads: int, seed: int) -> pd.DataFrame:
    """2-D metric MDS of the heads from their distance matrix: ``layer, head, x, y``."""
    from sklearn.manifold import MDS

    mds = MDS(n_components=2, metric="precomputed", init="random", n_init=4, random_state=seed)
    xy = mds.fit_transform(dist)
    g = dist.shape[0]
    return pd.DataFrame({"layer": np.arange(g) // num_heads, "head": np.arange(g) % num_heads,
                         "x": xy[:, 0], "y": xy[:, 1]})
