"""Many tests, one decision each: p-values from bootstrap resamples, adjusted across their family."""

from __future__ import annotations

import numpy as np
from scipy.stats import false_discovery_control

from probing.config import Multiplicity


def bootstrap_p(samples: np.ndarray) -> float:
    """One-sided p-value of "the statistic is above 0" from its bootstrap resamples: ``(1 + #{s <= 0}) /
    (1 + B)`` over the defined resamples (NaN where none is)."""
    s = np.asarray(samples, dtype=float)
    s = s[np.isfinite(s)]
    return float("nan") if not len(s) else float((1 + np.sum(s <= 0)) / (1 + len(s)))


def bootstrap_p_two_sided(samples: np.ndarray) -> float:
    """Two-sided p-value of "the statistic is not 0" from its bootstrap resamples: twice the smaller tail,
    ``2 min(1 + #{s <= 0}, 1 + #{s >= 0}) / (1 + B)``, capped at 1 (NaN where no resample is defined)."""
    s = np.asarray(samples, dtype=float)
    s = s[np.isfinite(s)]
    if not len(s):
        return float("nan")
    return float(min(1.0, 2 * min(1 + np.sum(s <= 0), 1 + np.sum(s >= 0)) / (1 + len(s))))


def resamples_needed(tests: int, alpha: float) -> int:
    """The fewest bootstrap resamples whose smallest p-value, ``1 / (1 + B)``, can pass the strictest threshold
    of ``tests`` adjusted tests at level ``alpha`` (``alpha / tests``, Bonferroni's and BH's first step)."""
    return max(int(np.ceil(tests / alpha - 1 - 1e-9)), 0)


def adjust(p: np.ndarray, method: Multiplicity) -> np.ndarray:
    """Adjusted p-values of one family of tests (NaN entries stay NaN and are not counted): Benjamini-Hochberg
    (``bh``, scipy's), Holm's step-down (``holm``), or none."""
    p = np.asarray(p, dtype=float)
    out = np.full_like(p, np.nan)
    ok = np.isfinite(p)
    if method is Multiplicity.none or not ok.any():
        out[ok] = p[ok]
        return out
    if method is Multiplicity.bh:
        out[ok] = false_discovery_control(p[ok], method="bh")
        return out
    q = p[ok]
    order = np.argsort(q, kind="stable")
    m = len(q)
    stepped = np.maximum.accumulate((m - np.arange(m)) * q[order])  # (m - i) p_(i), made monotone
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(stepped, 1.0)
    out[ok] = adjusted
    return out
