"""Sums that do not depend on the order they are added in: values in fixed point (int64, 2^-30 steps).

A float sum depends on the order of its terms in its last bits; the same statistics summed over a store built in
parts, over a pass that kept no maps, or over shards in another order would then differ. Each term (a
sentence's or a row's value) is rounded to a multiple of 2^-30 (about 1e-9) once, and integer sums are exact
in any order and any grouping; :func:`to_float` turns a total back."""

from __future__ import annotations

import numpy as np

SCALE = float(2 ** 30)
LIMIT = 2 ** 62  # a total this large is refused rather than wrapped


def to_fixed(x: np.ndarray) -> np.ndarray:
    """``x`` (float) rounded to int64 multiples of 2^-30."""
    return np.rint(np.asarray(x, dtype=np.float64) * SCALE).astype(np.int64)


def to_float(n: np.ndarray) -> np.ndarray:
    return np.asarray(n, dtype=np.float64) / SCALE


def check(total: np.ndarray, what: str) -> None:
    """Refuse a total near int64's range (an overflow would wrap silently)."""
    if total.size and int(np.abs(total).max()) >= LIMIT:
        raise OverflowError(f"{what}: a fixed-point total passed 2^62; split the corpus into smaller runs")
