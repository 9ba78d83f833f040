"""Patching statistics on hand-worked numbers: the normalised effect as a ratio of means and its resamples, the
two-sided bootstrap p-value, the top heads chosen on one half of the pairs and scored on the other, the rank
agreement of attribution with activation patching, and the atlas's quadrants."""

from __future__ import annotations

import numpy as np
import pandas as pd

from probing.config import Multiplicity, PatchingConfig
from probing.patching.atlas import atlas_table, offset_baseline
from probing.patching.effects import PairMetrics
from probing.patching.statistics import normalised, p_two_sided, rank_correlation
from probing.stats.heldout import halves
from probing.tasks.patching import _top_heads

CLEAN = np.array([[1.0, 2.0, 3.0, 2.0]])
CORRUPT = np.array([[-1.0, 0.0, -2.0, -1.0]])


def test_the_effect_is_a_ratio_of_means_and_each_resample_recomputes_all_three():
    patched = np.array([[1.0, 1.0, 0.0, 2.0]])  # (S=1, N=4)
    counts = np.array([[2, 0, 1, 1], [1, 1, 1, 1]])  # pairs 0, 0, 2, 3; then every pair once
    e = normalised(patched, CLEAN, CORRUPT, counts)
    assert np.isclose(e.point, (1 - 2) / (-1 - 2))  # 1/3
    # resample 0: clean 1.75, corrupt -1.25, patched 1.0 -> (1 - 1.75) / (-1.25 - 1.75) = 0.25
    np.testing.assert_allclose(e.samples, [0.25, 1 / 3])
    assert np.isnan(e.seed_sd)


def test_readouts_are_averaged_and_their_spread_reported():
    clean, corrupt = np.vstack([CLEAN, 2 * CLEAN]), np.vstack([CORRUPT, 2 * CORRUPT])
    patched = np.array([[1.0, 1.0, 0.0, 2.0], [2.0, 2.0, 2.0, 2.0]])  # the second readout: effect (2 - 4) / (-2 - 4)
    e = normalised(patched, clean, corrupt, np.zeros((0, 4)))
    assert np.isclose(e.point, (1 / 3 + 1 / 3) / 2) and np.isclose(e.seed_sd, 0)
    patched[1] = [4.0, 4.0, 4.0, 4.0]  # effect 0
    e = normalised(patched, clean, corrupt, np.zeros((0, 4)))
    assert np.isclose(e.point, 1 / 6) and np.isclose(e.seed_sd, np.std([1 / 3, 0], ddof=1))


def test_the_two_sided_p_value_counts_the_smaller_tail():
    s = np.array([[0.1, 5.0], [0.2, 5.0], [-0.1, -1.0], [0.3, 5.0]])
    np.testing.assert_allclose(p_two_sided(s), [2 * 2 / 5, 2 * 2 / 5])
    assert p_two_sided(np.array([[1.0], [2.0], [3.0]]))[0] == 2 * 1 / 4


def test_rank_correlation_is_spearmans_rho():
    from scipy.stats import spearmanr

    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(3, 20)), rng.normal(size=(3, 20))
    for i in range(3):
        assert np.isclose(rank_correlation(x[i], y[i]), spearmanr(x[i], y[i]).statistic)


def test_the_top_head_is_chosen_on_one_half_and_scored_on_the_other():
    n = 40
    choose, score = halves(n, seed=0)
    assert len(choose) == 20 and not set(choose) & set(score)
    clean, corrupt = np.zeros((1, n)), -np.ones((1, n))
    heads = np.zeros((1, 2, 1, n))
    heads[0, 0, 0, choose] = -1.0  # head 0: the whole effect, but only on the choosing half
    heads[0, 1, 0, :] = -0.5  # head 1: half the effect everywhere
    m = PairMetrics(np.arange(n), clean, corrupt, {"all": heads}, {}, {})
    top, _, _ = _top_heads(m, PatchingConfig(top_k=1, bootstrap=0), seed=0, keys={})
    row = top.iloc[0]
    assert (row["layer"], row["head"], row["chosen_effect"], row["effect"]) == (0, 0, 1.0, 0.0)


def test_atlas_quadrants_and_the_offset_baseline():
    class P:  # noqa: D401 - the fields offset_baseline reads
        def __init__(self, cue, target):
            self.roles, self.target = {"cue": cue}, target

    pairs = [P(1, 3), P(1, 3), P(0, 3), P(1, 3)]
    offset, hit = offset_baseline(pairs, np.array([0, 1]), np.array([2, 3]))
    assert offset == -2 and hit.tolist() == [True, True, False, True]
    points = np.zeros((1, 2, 4), dtype=bool)
    points[0, 0] = True  # head 0 always points at the cue
    effects = pd.DataFrame({"effect": [0.4, 0.5], "effect_ci_low": [0.3, 0.4], "effect_ci_high": [0.5, 0.6],
                            "p_adjusted": [0.01, 0.01]})
    counts = np.ones((39, 2), dtype=int)  # 39 resamples, each drawing both scored pairs once
    samples = np.array([[0.4, 0.5]] * 39)
    table, corr = atlas_table(points, hit, effects, samples, np.array([2, 3]), counts, 0.9, 0.05, 0.45,
                              Multiplicity.none)
    assert table["attention_accuracy"].tolist() == [1.0, 0.0] and table["offset_baseline"].iloc[0] == 0.5
    # head 0 beats the baseline (1 against 0.5 in every resample) but its 0.4 never exceeds 0.45: p = 40 / 40;
    # head 1 exceeds it in all 39: p = 1 / 40
    np.testing.assert_allclose(table["p_matters"], [1.0, 1 / 40])
    assert table["quadrant"].tolist() == ["points, does not matter", "matters without pointing"]
    assert corr["rho"] == -1.0
