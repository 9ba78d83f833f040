"""Normalised patching effects with bootstrap intervals over pairs, tests adjusted across heads, the top heads
chosen on one half of the pairs and scored on the other, and the agreement of attribution with activation patching.

A patch's normalised effect is ``(mean m_patched − mean m_clean) / (mean m_corrupt − mean m_clean)`` over pairs: 0
where the patch leaves the clean run's metric, 1 where it gives the corrupt run's. A ratio of means, resampled as
one: each bootstrap resample of pairs recomputes all three means (a matrix product with the resample counts).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import rankdata

from probing.config import Multiplicity
from probing.stats.bootstrap import percentile_interval, resample_counts
from probing.stats.multiplicity import adjust


@dataclass(frozen=True)
class Effects:
    """``point (...)`` normalised effects (the mean over readouts), their ``samples (B, ...)`` over resampled
    pairs (each resample's mean over readouts) and ``seed_sd (...)``, the standard deviation of the point effects
    over readouts (NaN with one)."""

    point: np.ndarray
    samples: np.ndarray
    seed_sd: np.ndarray


def normalised(patched: np.ndarray, clean: np.ndarray, corrupt: np.ndarray, counts: np.ndarray) -> Effects:
    """Effects of ``patched (..., S, N)`` per-pair metrics against ``clean``/``corrupt`` ``(S, N)`` (``S``
    readouts); ``counts (B, N)`` resample counts (B may be 0)."""
    n = clean.shape[-1]
    per_readout = (patched.mean(-1) - clean.mean(-1)) / (corrupt.mean(-1) - clean.mean(-1))  # (..., S)
    w = counts.astype(np.float64).T / n  # (N, B)
    c, k, p = clean @ w, corrupt @ w, patched @ w  # (S, B), (S, B), (..., S, B)
    with np.errstate(divide="ignore", invalid="ignore"):
        samples = np.moveaxis(((p - c) / (k - c)).mean(-2), -1, 0)  # (B, ...)
    sd = per_readout.std(-1, ddof=1) if per_readout.shape[-1] > 1 else np.full(per_readout.shape[:-1], np.nan)
    return Effects(per_readout.mean(-1), samples, sd)


def p_two_sided(samples: np.ndarray) -> np.ndarray:
    """Per column of ``samples (B, ...)``: the two-sided bootstrap p-value of "not 0", ``2 min(1 + #{s <= 0},
    1 + #{s >= 0}) / (1 + B)`` capped at 1 (NaN without resamples)."""
    ok = np.isfinite(samples)
    b = ok.sum(0)
    low, high = ((samples <= 0) & ok).sum(0), ((samples >= 0) & ok).sum(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.minimum(1.0, 2 * np.minimum(1 + low, 1 + high) / (1 + b))
    return np.where(b > 0, p, np.nan)


def summary(effects: Effects, ci: float, multiplicity: Multiplicity) -> dict:
    """``effect``, ``effect_ci_low``/``high``, ``p`` and ``p_adjusted`` (across every entry) as flat arrays."""
    point = effects.point.ravel()
    if not len(effects.samples):
        nan = np.full_like(point, np.nan)
        return {"effect": point, "effect_ci_low": nan, "effect_ci_high": nan, "p": nan, "p_adjusted": nan}
    samples = effects.samples.reshape(len(effects.samples), -1)
    lo, hi = percentile_interval(samples, ci)
    p = p_two_sided(samples)
    return {"effect": point, "effect_ci_low": lo, "effect_ci_high": hi, "p": p, "p_adjusted": adjust(p, multiplicity)}


def rank_correlation(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's rho between ``x`` and ``y`` along their last axis (rows of resamples at once)."""
    rx, ry = rankdata(x, axis=-1), rankdata(y, axis=-1)
    rx, ry = rx - rx.mean(-1, keepdims=True), ry - ry.mean(-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return (rx * ry).sum(-1) / np.sqrt((rx ** 2).sum(-1) * (ry ** 2).sum(-1))


def agreement(activation: np.ndarray, attribution: np.ndarray, clean: np.ndarray, corrupt: np.ndarray,
              n_resamples: int, ci: float, seed: int) -> dict:
    """Spearman's rho over heads between the activation and the attribution effects (``(L, H, S, N)`` per-pair
    metrics; attribution as clean + its estimate), with a bootstrap interval over pairs."""
    counts = resample_counts(clean.shape[-1], n_resamples, seed)
    flat = (-1,) + clean.shape
    act = normalised(activation.reshape(flat), clean, corrupt, counts)
    att = normalised(attribution.reshape(flat) + clean, clean, corrupt, counts)
    rho = float(rank_correlation(act.point, att.point))
    out = {"rho": rho, "ci_low": float("nan"), "ci_high": float("nan")}
    if n_resamples:
        lo, hi = percentile_interval(rank_correlation(act.samples, att.samples)[:, None], ci)
        out.update(ci_low=float(lo[0]), ci_high=float(hi[0]))
    return out
