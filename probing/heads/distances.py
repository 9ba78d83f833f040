"""How alike are two heads? (Clark et al. 2019, section 6.)

The distance between heads g and h is the Jensen-Shannon distance (the square root of the JS divergence,
base 2, so in [0, 1]) between their attention distributions, averaged over every attending word of the
sentences used; each distribution spans the full sequence (special tokens kept; rows of a store that are
not distributions, ``norm`` and ``norm_layer``, are normalised first: :mod:`probing.heads.rows`). The
heads are then embedded in two dimensions with metric MDS on the precomputed distances (:func:`smacof`,
scikit-learn's algorithm without its import).

Cost: one ``m log m`` per pair of heads and attended position (``m = (p + q) / 2``, float32), the rest is per
head. Rows are grouped by sequence length (sentences of one length share one array, nothing is padded) and
laid out position-major, so the sums over positions are whole-slice adds, in float64.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from probing.heads.rows import distributions
from probing.progress import progress
from probing.stats.fixed import check, to_fixed, to_float
from probing.store import AttentionStore

_TINY = np.finfo(np.float32).tiny  # zeros become this: 0 log 0 = 0 up to 1e-36, far below float32's resolution


def _xlogx(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """``x * log(x)`` into ``out`` (x > 0; ``out`` is not ``x``)."""
    np.log(x, out=out)
    return np.multiply(out, x, out=out)


def js_distance_sums(rows: np.ndarray, fixed: bool = False) -> np.ndarray:
    """``(G, R, M)`` distributions (G heads, R attending rows over M positions; zero padding allowed) ->
    ``(G, G)`` sums over the rows of the JS distance (base 2) between every pair of heads: the entropy of
    the mixture minus the mean entropy of the two (a head's own entropy is computed once; the mixture of
    a head with itself is the head, bit for bit, so identical heads are at exactly 0). ``fixed``: each row's
    distance rounded to fixed point first (:mod:`probing.stats.fixed`) and int64 sums returned, the same
    however the rows are grouped."""
    g = rows.shape[0]
    p = np.ascontiguousarray(np.maximum(rows, _TINY, dtype=np.float32).transpose(0, 2, 1))  # (G, M, R)
    buf, logs = np.empty_like(p), np.empty_like(p)
    h = -_xlogx(p, logs).sum(axis=1, dtype=np.float64)  # (G, R) entropies, nats
    out = np.zeros((g, g), dtype=np.int64 if fixed else np.float64)
    for a in range(g):  # the other head's axis is vectorised; only the upper triangle is computed
        mix = np.add(p[a][None], p[a:], out=buf[:g - a])
        mix *= 0.5
        js = -_xlogx(mix, logs[:g - a]).sum(axis=1, dtype=np.float64) - 0.5 * (h[a] + h[a:])  # (G-a, R)
        dist = np.sqrt(np.clip(js / np.log(2), 0.0, 1.0))
        d = to_fixed(dist).sum(axis=-1) if fixed else dist.sum(axis=-1)
        out[a, a:] = d
        out[a:, a] = d
    np.fill_diagonal(out, 0)
    return out


class DistanceTotals:
    """The fixed-point sums of :func:`js_distance_sums` over attending rows and their count: the same totals
    whatever order, grouping or process added the rows (``state()`` / ``load`` to store and merge them).

    Rows wait in one group per sequence length (nothing is padded) until a group holds ``block_rows`` rows or
    all groups together hold ``4 * block_rows``, when the largest group is summed: sentences can come in any
    order (an extraction's batches) and the sums still run on large blocks."""

    def __init__(self, n_heads: int, block_rows: int = 1024):
        self.total = np.zeros((n_heads, n_heads), dtype=np.int64)
        self.rows = 0
        self.block_rows = block_rows
        self._groups: dict[int, list[np.ndarray]] = {}
        self._waiting: dict[int, int] = {}

    def add(self, maps: np.ndarray, prefix: int, n_words: int, stochastic: bool) -> None:
        """One sentence's ``(L, H, M, M)`` maps: its word rows join the rows of its sequence length."""
        g, m = maps.shape[0] * maps.shape[1], maps.shape[-1]
        self._groups.setdefault(m, []).append(
            distributions(maps[..., prefix:prefix + n_words, :], stochastic).reshape(g, n_words, m))
        self._waiting[m] = self._waiting.get(m, 0) + n_words
        self.rows += n_words
        if self._waiting[m] >= self.block_rows:
            self._sum(m)
        elif sum(self._waiting.values()) >= 4 * self.block_rows:
            self._sum(max(self._waiting, key=self._waiting.get))

    def _sum(self, m: int) -> None:
        self.total += js_distance_sums(np.concatenate(self._groups.pop(m), axis=1), fixed=True)
        del self._waiting[m]

    def flush(self) -> None:
        for m in sorted(self._groups):
            self._sum(m)

    def state(self) -> dict[str, np.ndarray]:
        self.flush()
        check(self.total, "head distances")
        return {"distance_sums": self.total, "distance_rows": np.array([self.rows], dtype=np.int64)}

    def load(self, state: dict[str, np.ndarray]) -> "DistanceTotals":
        self.total, self.rows = state["distance_sums"].astype(np.int64), int(state["distance_rows"][0])
        return self

    def mean(self) -> tuple[np.ndarray, int]:
        """The mean distance matrix and the number of rows averaged."""
        self.flush()
        return (to_float(self.total) / self.rows if self.rows else to_float(self.total)), self.rows


def head_distances(store: AttentionStore, indices: Sequence[int], block_rows: int = 1024) -> tuple[np.ndarray, int]:
    """Mean JS distance between all pairs of heads over the attending words of ``indices``:
    ``(L*H, L*H)`` (head ``layer * H + head``) and the number of rows averaged.

    Sentences are read by sequence length, so each block holds rows of one length (at most ``block_rows``
    rows, or one sentence): memory stays bounded and nothing is padded."""
    totals = DistanceTotals(store.num_layers * store.num_heads, block_rows)
    idx = np.asarray([i for i in indices if i in store], dtype=np.int64)
    idx = idx[np.argsort(store.m[idx], kind="stable")]
    for i in progress(idx, "head distances", total=len(idx)):
        i = int(i)
        totals.add(store.maps(i), int(store.prefix[i]), int(store.n_words[i]), store.stochastic)
    out = totals.mean()
    store.close()
    return out


def distance_table(dist: np.ndarray, num_heads: int) -> pd.DataFrame:
    """The matrix as tidy rows ``layer_a, head_a, layer_b, head_b, js_distance``."""
    g = dist.shape[0]
    a, b = np.meshgrid(np.arange(g), np.arange(g), indexing="ij")
    return pd.DataFrame({"layer_a": (a // num_heads).ravel(), "head_a": (a % num_heads).ravel(),
                         "layer_b": (b // num_heads).ravel(), "head_b": (b % num_heads).ravel(),
                         "js_distance": dist.ravel()})


def mds_embedding(dist: np.ndarray, num_heads: int, seed: int) -> pd.DataFrame:
    """2-D metric MDS of the heads from their distance matrix: ``layer, head, x, y``."""
    xy = smacof(dist, seed=seed)
    g = dist.shape[0]
    return pd.DataFrame({"layer": np.arange(g) // num_heads, "head": np.arange(g) % num_heads,
                         "x": xy[:, 0], "y": xy[:, 1]})


def smacof(dissimilarities: np.ndarray, n_components: int = 2, n_init: int = 4, max_iter: int = 300,
           eps: float = 1e-6, seed: int = 0) -> np.ndarray:
    """Metric MDS by SMACOF: ``(n, n)`` dissimilarities -> ``(n, n_components)`` coordinates.

    Scikit-learn's algorithm (``MDS(metric="precomputed", init="random", n_init=4, random_state=seed)``,
    version 1.9) operation for operation, so the coordinates are the same to the bit (a unit test compares
    them), without importing scikit-learn (seconds at start-up): ``n_init`` random starts drawn from one
    ``RandomState(seed)``, Guttman transforms until the stress gain per squared distance is below ``eps``,
    the start with the lowest stress kept."""
    dis = np.asarray(dissimilarities, dtype=np.float64)
    n = dis.shape[0]
    rng = np.random.RandomState(seed)
    diag = np.arange(n)
    best, best_stress = None, None
    for _ in range(n_init):
        x = rng.uniform(size=n * n_components).reshape((n, n_components))
        dist = _euclidean(x)
        old = None
        for _ in range(max_iter):
            dist[dist == 0] = 1e-5
            ratio = dis / dist
            b = -ratio
            b[diag, diag] += ratio.sum(axis=1)
            x = 1.0 / n * np.dot(b, x)
            dist = _euclidean(x)
            stress = ((dist.ravel() - dis.ravel()) ** 2).sum() / 2
            if old is not None and (old - stress) / ((dist.ravel() ** 2).sum() / 2) < eps:
                break
            old = stress
        if best_stress is None or stress < best_stress:
            best, best_stress = x.copy(), stress
    return best


def _euclidean(x: np.ndarray) -> np.ndarray:
    """Pairwise Euclidean distances of the rows of float64 ``x``, as scikit-learn's ``euclidean_distances(x)``
    computes them (``|a|^2 + |b|^2 - 2 a.b``, clipped at 0, zero diagonal)."""
    sq = np.einsum("ij,ij->i", x, x)[:, None]
    d = -2 * (x @ x.T)
    d += sq
    d += sq.T
    np.maximum(d, 0, out=d)
    np.fill_diagonal(d, 0)
    return np.sqrt(d, out=d)
