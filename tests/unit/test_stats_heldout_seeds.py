"""The held-out choice (a seeded split into halves, the best column chosen on one) and the one-sided t-test
over seeds, against hand-worked values."""

from __future__ import annotations

import numpy as np
import pytest

from probing.config import Multiplicity
from probing.stats.heldout import best_column, halves
from probing.stats.multiplicity import adjust
from probing.stats.seeds import seed_t_p


def test_halves_partition_the_items_by_seed():
    a, b = halves(11, seed=3)
    assert len(a) == 5 and len(b) == 6
    assert sorted(np.concatenate([a, b]).tolist()) == list(range(11))
    assert list(a) == sorted(a) and list(b) == sorted(b)
    a2, b2 = halves(11, seed=3)
    assert a.tolist() == a2.tolist() and b.tolist() == b2.tolist()
    assert halves(11, seed=4)[0].tolist() != a.tolist()  # another seed, another split


def test_the_best_column_is_chosen_on_the_selection_half_only():
    # column 1 is best on rows 0-1 (the selection half), column 0 on rows 2-3 and on all four rows
    v = np.array([[0.5, 0.6], [0.5, 0.6], [0.9, 0.1], [0.9, 0.1]])
    assert best_column(v[:2]) == 1
    assert best_column(v) == 0
    assert best_column(v[2:]) == 0


def test_the_best_column_skips_undefined_entries_and_empty_columns():
    v = np.array([[np.nan, 0.2, 0.3], [np.nan, 0.8, np.nan], [np.nan, 0.2, np.nan]])
    assert best_column(v) == 1  # means: none, 0.4, 0.3
    assert best_column(np.array([[0.5, 0.5]])) == 0  # the first of equals
    with pytest.raises(ValueError, match="no column has a finite value"):
        best_column(np.full((2, 2), np.nan))


def test_seed_t_p_by_hand_with_two_degrees_of_freedom():
    # values 0, 1, 2: mean 1, sd 1, t = 1 / (1 / sqrt 3) = sqrt 3; with 2 df the t distribution has the
    # closed form P(T > t) = 1/2 - t / (2 sqrt(2 + t^2)) = 1/2 - sqrt 3 / (2 sqrt 5) = 0.11270
    p = seed_t_p(np.array([[0.0, 1.0, 2.0], [0.0, -1.0, -2.0]]))
    want = 0.5 - np.sqrt(3) / (2 * np.sqrt(5))
    np.testing.assert_allclose(p, [want, 1 - want])
    assert p[0] == pytest.approx(0.11270, abs=1e-5)


def test_seed_t_p_edge_cases():
    p = seed_t_p(np.array([[0.25, 0.25, 0.25], [0.0, 0.0, 0.0], [0.1, np.nan, 0.2]]))
    assert p[0] == 0.0 and p[1] == 1.0 and np.isnan(p[2])
    assert np.isnan(seed_t_p(np.array([[0.3]]))).all()  # one seed: no test


def test_a_head_that_passes_alone_fails_after_bh_across_heads():
    # values 1, 2, 3: mean 2, sd 1, t = 2 sqrt 3; P(T > t) = 1/2 - t / (2 sqrt(2 + t^2)) = 1/2 - sqrt 3 / sqrt 14
    # = 0.0371 < 0.05 alone; beside two heads at mean 0 (p 1/2) BH multiplies the smallest by 3: 0.111
    v = np.array([[1.0, 2.0, 3.0], [-1.0, 0.0, 1.0], [1.0, 0.0, -1.0]])
    p = seed_t_p(v)
    np.testing.assert_allclose(p, [0.5 - np.sqrt(3) / np.sqrt(14), 0.5, 0.5])
    q = adjust(p, Multiplicity.bh)
    assert q[0] == pytest.approx(3 * p[0]) and q[0] > 0.05 > p[0]
    assert int((q < 0.05).sum()) == 0 and int((p < 0.05).sum()) == 1
