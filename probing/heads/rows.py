"""Maps as distributions over keys, for the analyses that assume them (entropy, attention shares, JS distances).

Rows of ``attention`` and of most context-mixing measures sum to 1; rows of ``norm`` and ``norm_layer`` are
norms (Kobayashi et al. 2020), so those analyses divide each row by its total first: a pattern is then the
share of the row's norm, and two heads are compared by where their norm goes, not by how much of it there is.
Head accuracy and trees read the maps as stored (a row's argmax does not depend on its scale).
"""

from __future__ import annotations

import numpy as np

from probing.heads.kernels import half_to_float
from probing.store import AttentionStore

ROWS_NORMALISED = "rows divided by their sum first (the measure's rows are not distributions)"


def as_float32(maps: np.ndarray) -> np.ndarray:
    """``maps`` in float32 (float16 by a compiled table lookup, the same values)."""
    if maps.dtype == np.float16:
        return half_to_float(maps)
    return np.asarray(maps, dtype=np.float32)


def distributions(maps: np.ndarray, stochastic: bool) -> np.ndarray:
    """``maps`` (``(..., M)`` rows) as float32 rows summing to 1: unchanged when ``stochastic``, else each row
    divided by its sum (an all-zero row stays zero)."""
    a = as_float32(maps)
    if stochastic:
        return a
    total = a.sum(axis=-1, keepdims=True, dtype=np.float64)
    return (a / np.maximum(total, np.finfo(np.float32).tiny)).astype(np.float32)


def rows_convention(store: AttentionStore) -> str:
    """What the distribution analyses did to ``store``'s rows, for ``metrics.json``."""
    return "as stored (rows sum to 1)" if store.stochastic else ROWS_NORMALISED
