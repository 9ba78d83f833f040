"""Choose the best of several candidates on one half of the sentences and report it on the other.

A row chosen as best and scored on the same sentences is biased upward by the choice (the winner of K noisy
means is, on average, above its true mean). One seeded split into a selection half and a report half keeps
the report half's figures free of that bias: there the chosen row is a single comparison fixed in advance.
"""

from __future__ import annotations

import numpy as np


def halves(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A seeded random split of items ``0..n-1``: the selection half (``n // 2`` items) and the report half
    (the other ``n - n // 2``), each in increasing order."""
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[: n // 2]), np.sort(perm[n // 2:])


def best_column(values: np.ndarray) -> int:
    """The column of ``values`` ``(S, K)`` with the highest mean over its finite entries (the first of equals;
    a column with none is never chosen)."""
    v = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(v)
    counts = ok.sum(0)
    if not counts.any():
        raise ValueError("no column has a finite value to choose by")
    means = np.where(counts > 0, np.where(ok, v, 0.0).sum(0) / np.maximum(counts, 1), -np.inf)
    return int(np.argmax(means))
