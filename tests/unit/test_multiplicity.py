"""Multiplicity control: Benjamini-Hochberg and Holm against hand-worked adjustments (and scipy's BH), the
bootstrap p-value by hand, and the heads task deciding "beats the baseline" on adjusted p-values."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import false_discovery_control

from probing.config import Multiplicity
from probing.stats.multiplicity import adjust, bootstrap_p

P = np.array([0.01, 0.04, 0.03, 0.2])


def test_benjamini_hochberg_by_hand_and_against_scipy():
    # sorted 0.01, 0.03, 0.04, 0.2 times m/rank = 0.04, 0.06, 0.0533, 0.2; then the running minimum from the top
    np.testing.assert_allclose(adjust(P, Multiplicity.bh), [0.04, 0.16 / 3, 0.16 / 3, 0.2])
    np.testing.assert_allclose(adjust(P, Multiplicity.bh), false_discovery_control(P, method="bh"))


def test_holm_by_hand():
    # sorted 0.01, 0.03, 0.04, 0.2 times (m - i) = 0.04, 0.09, 0.08, 0.2; running maximum: 0.04, 0.09, 0.09, 0.2
    np.testing.assert_allclose(adjust(P, Multiplicity.holm), [0.04, 0.09, 0.09, 0.2])
    assert adjust(np.array([0.5, 0.6]), Multiplicity.holm).max() == 1.0  # capped at 1


def test_nan_is_left_out_of_the_family_and_none_adjusts_nothing():
    got = adjust(np.array([0.01, np.nan, 0.04]), Multiplicity.holm)
    assert np.isnan(got[1]) and list(got[[0, 2]]) == pytest.approx([0.02, 0.04])
    np.testing.assert_array_equal(adjust(P, Multiplicity.none), P)


def test_bootstrap_p_value_by_hand():
    assert bootstrap_p(np.array([0.2, 0.1, -0.05, 0.0, np.nan])) == (1 + 2) / (1 + 4)
    assert np.isnan(bootstrap_p(np.array([np.nan])))


def test_the_two_sided_bootstrap_p_value_doubles_the_smaller_tail():
    from probing.stats.multiplicity import bootstrap_p_two_sided

    # 1 of 4 resamples at or below 0, 3 at or above: 2 * min(2, 4) / 5
    assert bootstrap_p_two_sided(np.array([-1.0, 1.0, 2.0, 3.0])) == pytest.approx(0.8)
    assert bootstrap_p_two_sided(np.ones(9)) == pytest.approx(0.2)  # the smallest it can be: 2 / (1 + B)
    assert bootstrap_p_two_sided(np.zeros(3)) == 1.0  # capped
    assert np.isnan(bootstrap_p_two_sided(np.array([np.nan])))


def test_resamples_needed_make_the_smallest_p_pass_the_strictest_threshold():
    from probing.stats.multiplicity import resamples_needed

    # 72 tests at 0.05: 1 / (1 + B) <= 0.05 / 72 needs B >= 1439; 500 resamples fall short
    assert resamples_needed(72, 0.05) == 1439 and 1 / (1 + 1439) <= 0.05 / 72 < 1 / (1 + 1438)
    assert resamples_needed(1, 0.025) == 39
