"""Tests over a handful of training seeds: is a score's mean over seeds above 0?

A probe fitted with a few seeds (each its own training subsample and control draw) gives one value per seed;
the Student's t interval across them is the probe tables' interval. Its one-sided p-value is what a count of
"heads whose interval lies above 0" needs before it can be adjusted across the heads it counts.
"""

from __future__ import annotations

import numpy as np
from scipy import stats


def seed_t_p(values: np.ndarray) -> np.ndarray:
    """One-sided p-value of "the mean is above 0" from per-seed values along the last axis: Student's t with
    ``n - 1`` degrees of freedom, ``t = mean / (sd / sqrt(n))``. Where the seeds agree exactly (sd 0) the
    p-value is 0 for a positive mean and 1 otherwise; NaN with fewer than 2 seeds or a non-finite value."""
    v = np.asarray(values, dtype=np.float64)
    n = v.shape[-1]
    out = np.full(v.shape[:-1], np.nan)
    if n < 2:
        return out
    mean, sd = v.mean(-1), v.std(-1, ddof=1)
    ok = np.isfinite(v).all(-1)
    spread = ok & (sd > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = mean / (sd / np.sqrt(n))
    out[spread] = stats.t.sf(t[spread], n - 1)
    flat = ok & (sd == 0)
    out[flat] = np.where(mean[flat] > 0, 0.0, 1.0)
    return out
