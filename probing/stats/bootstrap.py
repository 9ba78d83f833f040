"""Bootstrap over sentences without recomputing anything.

A resample of S sentences drawn with replacement is a row of counts ``w`` (how often each sentence was
drawn, summing to S). Any total over the resample is then ``w @ per_sentence_totals``: the scores are
computed once per sentence and every resample is a matrix product.
"""

from __future__ import annotations

import numpy as np

_DRAW_CELLS = 2**20  # sentence draws made at once: 8 MB of int64, and as much for their counts


def resample_counts(n_sentences: int, n_resamples: int, seed: int, block: int = 64,
                    sentence_major: bool = False) -> np.ndarray:
    """``(n_resamples, n_sentences)`` uint8 multinomial counts: row r says how many times resample r drew
    each sentence (rows sum to ``n_sentences``). Drawn ``block`` resamples at a time, fewer where the corpus is
    large, so that the int64 temporaries stay within ``_DRAW_CELLS`` draws however many sentences (the generator
    gives the same stream however it is cut, so the counts do not depend on the blocks).
    ``sentence_major``: the same counts as ``(n_sentences, n_resamples)``, filled in place (no second copy for
    the transpose, which for a million-word corpus is tens of megabytes).
    """
    shape = (n_sentences, n_resamples) if sentence_major else (n_resamples, n_sentences)
    out = np.zeros(shape, dtype=np.uint8)
    if n_resamples == 0 or n_sentences == 0:
        return out
    rng = np.random.default_rng(seed)
    block = max(1, min(block, _DRAW_CELLS // n_sentences))
    for start in range(0, n_resamples, block):
        k = min(block, n_resamples - start)
        # S uniform draws with replacement per resample, counted per sentence: a multinomial, several
        # times faster than rng.multinomial over S categories
        draw = rng.integers(0, n_sentences, size=(k, n_sentences))
        draw += np.arange(k)[:, None] * n_sentences
        counts = np.bincount(draw.ravel(), minlength=k * n_sentences).reshape(k, n_sentences)
        del draw
        if counts.max() > 255:  # practically impossible (about Poisson(1) counts); be exact anyway
            raise OverflowError("a sentence was drawn more than 255 times in one resample")
        if sentence_major:
            out[:, start:start + k] = counts.T
        else:
            out[start:start + k] = counts
    return out


def percentile_interval(samples: np.ndarray, ci: float, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The central ``ci`` percentile interval of bootstrap ``samples`` along ``axis`` (NaNs ignored:
    a resample without any arc of a rare relation has no accuracy).

    The numbers of ``np.nanpercentile`` (linear interpolation), vectorised: one sort of every column at once
    (NaNs sort last), then numpy's own interpolation formula, instead of a partition per column."""
    if not 0.0 < ci < 1.0:
        raise ValueError(f"ci must be in (0, 1), got {ci}")
    samples = np.asarray(samples)
    shape = samples.shape[:axis] + samples.shape[axis + 1:]
    if samples.shape[axis] == 0:
        return np.full(shape, np.nan), np.full(shape, np.nan)
    x = np.sort(np.moveaxis(samples, axis, 0).reshape(samples.shape[axis], -1), axis=0)  # (B, columns)
    n = (~np.isnan(x)).sum(axis=0)
    lo, hi = (_sorted_quantile(x, n, 100 * (1 - ci) / 2 / 100), _sorted_quantile(x, n, 100 * (1 + ci) / 2 / 100))
    return lo.reshape(shape), hi.reshape(shape)


def _sorted_quantile(x: np.ndarray, n: np.ndarray, q: float) -> np.ndarray:
    """Quantile ``q`` of each column of ``x`` (sorted, its ``n`` valid values first) as numpy's ``linear``
    method computes it (``_get_indexes``, ``_get_gamma``, ``_lerp``), so the result is bit-identical."""
    virtual = (n - 1) * np.float64(q)
    previous = np.floor(virtual)
    above = virtual >= n - 1  # numpy takes its last (valid) value there, through index -1
    last = np.maximum(n - 1, 0)
    prev_i = np.where(above, last, previous).astype(np.intp)
    next_i = np.where(above, last, previous + 1).astype(np.intp)
    gamma = virtual - np.where(above, -1.0, previous)
    cols = np.arange(x.shape[1])
    a, b = x[prev_i, cols], x[next_i, cols]
    diff = b - a
    out = np.where(gamma >= 0.5, b - diff * (1 - gamma), a + diff * gamma)
    out[n == 0] = np.nan  # no valid resample: no interval
    return out
