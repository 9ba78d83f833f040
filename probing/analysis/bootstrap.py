"""Bootstrap over sentences without recomputing anything.

A resample of S sentences drawn with replacement is a row of counts ``w`` (how often each sentence was
drawn, summing to S). Any total over the resample is then ``w @ per_sentence_totals``: the scores are
computed once per sentence and every resample is a matrix product.
"""

from __future__ import annotations

import warnings

import numpy as np


def resample_counts(n_sentences: int, n_resamples: int, seed: int, block: int = 64) -> np.ndarray:
    """``(n_resamples, n_sentences)`` uint8 multinomial counts: row r says how many times resample r drew
    each sentence (rows sum to ``n_sentences``). Drawn in blocks to keep the int64 temporaries small.
    """
    out = np.zeros((n_resamples, n_sentences), dtype=np.uint8)
    if n_resamples == 0 or n_sentences == 0:
        return out
    rng = np.random.default_rng(seed)
    for start in range(0, n_resamples, block):
        k = min(block, n_resamples - start)
        # S uniform draws with replacement per resample, counted per sentence: a multinomial, several
        # times faster than rng.multinomial over S categories
        draw = rng.integers(0, n_sentences, size=(k, n_sentences)) + np.arange(k)[:, None] * n_sentences
        counts = np.bincount(draw.ravel(), minlength=k * n_sentences).reshape(k, n_sentences)
        if counts.max() > 255:  # practically impossible (about Poisson(1) counts); be exact anyway
            raise OverflowError("a sentence was drawn more than 255 times in one resample")
        out[start:start + k] = counts
    return out


def percentile_interval(samples: np.ndarray, ci: float, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The central ``ci`` percentile interval of bootstrap ``samples`` along ``axis`` (NaNs ignored:
    a resample without any arc of a rare relation has no accuracy)."""
    if not 0.0 < ci < 1.0:
        raise ValueError(f"ci must be in (0, 1), got {ci}")
    lo, hi = 100 * (1 - ci) / 2, 100 * (1 + ci) / 2
    if samples.shape[axis] == 0:
        shape = samples.shape[:axis] + samples.shape[axis + 1:]
        return np.full(shape, np.nan), np.full(shape, np.nan)
    with warnings.catch_warnings():  # an all-NaN slice (no arcs at all) gives NaN, not a warning
        warnings.simplefilter("ignore", RuntimeWarning)
        q = np.nanpercentile(samples, [lo, hi], axis=axis)
    return q[0], q[1]
