"""The compiled per-sentence kernels of the heads analysis against their numpy definitions."""

from __future__ import annotations

import numpy as np
import pytest

from probing.config import Direction, PatternRows
from probing.heads.kernels import half_to_float, pattern_sums, picks
from probing.heads.patterns import METRICS, sentence_patterns
from probing.heads.scoring import as_ordered, pointers


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_picks_equal_the_numpy_argmax_with_ties_and_zero_rows(dtype):
    rng = np.random.default_rng(0)
    n = 7
    maps = rng.random((2, 3, n, n)).astype(dtype)
    maps[0, 0, 2] = 0  # an all-zero row: the leftmost word
    maps[0, 1, :, 4] = maps[0, 1, :, 1]  # ties: the leftmost word
    maps[1, 2] = np.round(maps[1, 2] * 4) / 4  # many ties
    maps[0, 1, 0] = [0.3, 0.5, 0.1, 0.1, 0.5, 0.1, 0.1]  # word 0 ties between words 1 and 4
    ref = pointers(maps.copy()[None], np.array([n]), list(Direction))  # (n, 2, LH)
    got = picks(as_ordered(maps.copy()).reshape(6, n, n))
    assert got.dtype == np.int16 and np.array_equal(got, ref.transpose(1, 2, 0))
    assert got[0, 0, 2] == 0 and got[0, 1, 0] == 1


@pytest.mark.parametrize("rows", [PatternRows.words, PatternRows.all])
def test_pattern_sums_equal_the_numpy_definition(rows):
    rng = np.random.default_rng(1)
    m, prefix, n = 9, 1, 7
    a = rng.random((2, 3, m, m)).astype(np.float32)
    a[..., 3] = 0  # zeros in the entropy
    a /= a.sum(-1, keepdims=True)
    punct = np.array([False, True, False, False, False, True, False])
    ref, _ = sentence_patterns(a, prefix, n, punct, rows)
    got = pattern_sums(a.reshape(6, m, m), prefix, n, punct, rows is PatternRows.all).reshape(8, 2, 3)
    np.testing.assert_allclose(got, ref[: len(METRICS) - 1], rtol=1e-6, atol=1e-6)


def test_half_to_float_is_exact():
    x = np.random.default_rng(2).standard_normal((3, 5, 5)).astype(np.float16)
    x.flat[:4] = [np.inf, -0.0, 6e-8, 65504]
    assert np.array_equal(half_to_float(x), x.astype(np.float32))
