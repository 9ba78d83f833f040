"""Importance claims a test can support: pruning curves with intervals over sentences, the random orders' mean
resampled jointly, the all-heads-ablated floor and the share of the room down to it (hand-made per-sentence
sums whose every number is worked by hand); the costliest head per relation chosen on one half of the sentences
and scored on the other (a planted case where the halves disagree); p-values of harm adjusted across heads; and
the readout refitted under the pruned gates on a tiny random BERT."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from mixing_oracle import randomise
from test_mixing import BUILDERS

from probing.config import ImportanceConfig, Multiplicity, ReadoutKind
from probing.corpus import Corpus, Sentence
from probing.errors import ProbingError
from probing.importance.inputs import Batch
from probing.importance.probes import fit_relation
from probing.importance.scores import Sums, evaluate, evaluate_refitted
from probing.importance.tables import (
    adjust_drops,
    halves,
    harm_p,
    heldout_rows,
    pruning_rows,
    scoring_weights,
)
from probing.tasks.importance import RANDOM, RANDOM_MEAN, _bend, _check_refit


def _curve_sums() -> Sums:
    """Two sentences of 2 arcs each, one group; three orders (gradient, random 0, random 1) at 0, 1 and 2 of 2
    heads removed. Hits (s0, s1): unablated (2, 2) in every order; all removed (0, 1); one removed: gradient
    (2, 1), random 0 (1, 2), random 1 (0, 2)."""
    one = {"gradient": (2, 1), "random0": (1, 2), "random1": (0, 2)}
    hits = np.array([[(2, 2), one[k], (0, 1)] for k in one], dtype=float).reshape(9, 2, 1)
    n = np.full((2, 1), 2.0)
    return Sums(np.array([0, 1]), n, np.full((2, 1), 2.0), np.zeros((2, 1)), hits, np.zeros_like(hits))


def test_pruning_curves_intervals_floor_and_the_jointly_resampled_random_mean():
    names = [("gradient", None), (RANDOM, 0), (RANDOM, 1)]
    # resample a draws s0 twice, resample b s1 twice; ci 0.5: the 25th and 75th percentiles of the two
    t = pruning_rows(names, [0, 1, 2], _curve_sums(), ["all"], [0], np.array([[2.0, 0.0], [0.0, 2.0]]), 0.5,
                     RANDOM, RANDOM_MEAN)
    assert list(t.order.unique()) == ["gradient", RANDOM, RANDOM_MEAN]
    # one head removed, gradient: 3/4; resample a 2/2, b 1/2 -> interval 0.5 + [0.25, 0.75] x 0.5
    row = t[(t.order == "gradient") & (t.heads_removed == 1)].iloc[0]
    assert (row.score, row.ci_low, row.ci_high) == pytest.approx((0.75, 0.625, 0.875))
    # the random mean: (3/4 + 1/2) / 2 = 0.625; per resample the mean of the two orders on the same sentences:
    # a (1/2 + 0/2) / 2 = 0.25, b (2/2 + 2/2) / 2 = 1.0 -> interval 0.25 + [0.25, 0.75] x 0.75
    m = t[(t.order == RANDOM_MEAN) & (t.heads_removed == 1)].iloc[0]
    assert pd.isna(m.seed)
    assert (m.score, m.ci_low, m.ci_high) == pytest.approx((0.625, 0.4375, 0.8125))
    # the floor, 1/4 (resamples 0/2 and 1/2), beside every point; the share of the room 1 - 1/4 lost
    assert set(t.floor) == {0.25} and set(t.unablated) == {1.0}
    end = t[(t.order == "gradient") & (t.heads_removed == 2)].iloc[0]
    assert (end.score, end.ci_low, end.ci_high, end.share_to_floor) == pytest.approx((0.25, 0.125, 0.375, 1.0))
    assert row.share_to_floor == pytest.approx(0.25 / 0.75)
    assert m.share_to_floor == pytest.approx(0.375 / 0.75)
    assert t[t.heads_removed == 0].share_to_floor.eq(0).all()
    assert list(t[t.order == RANDOM].seed) == [0, 0, 0, 1, 1, 1]
    assert t.fraction_removed.tolist()[:3] == [0.0, 0.5, 1.0]


def test_prunable_fractions_and_the_room_to_the_floor():
    # unablated 0.80, floor 0.73: a 5-point margin is 5/7 of the room. Gradient stays within 5 points to 0.5;
    # the random mean curve to 0.25; single random orders 0.5 and 0.0
    rows = []
    for order, seed, scores in (("gradient", None, [0.80, 0.79, 0.76, 0.73]), (RANDOM, 0, [0.80, 0.78, 0.76, 0.73]),
                                (RANDOM, 1, [0.80, 0.70, 0.72, 0.73]), (RANDOM_MEAN, None, [0.80, 0.76, 0.74, 0.73])):
        rows += [{"order": order, "seed": seed, "fraction_removed": f, "relation": "all", "score": v}
                 for f, v in zip([0.0, 0.25, 0.5, 1.0], scores)]
    got = _bend(pd.DataFrame(rows))
    assert got["prunable_fraction_gradient"] == 0.5
    assert got["prunable_fraction_random"] == 0.25  # from the random_mean rows, not re-averaged
    assert (got["prunable_fraction_random_min"], got["prunable_fraction_random_max"]) == (0.0, 0.5)
    assert got["prunable_fraction_random_each"] == [0.5, 0.0]
    assert got["pruning_floor"] == pytest.approx(0.73) and got["pruning_room"] == pytest.approx(0.07)
    assert got["pruning_margin_share_of_room"] == pytest.approx(5 / 7)


def test_heldout_choice_picks_the_head_of_the_choosing_half():
    sentences = np.array([3, 0, 2, 1])  # corpus indices in batch order
    choose, score = halves(sentences, seed=4)
    assert choose.sum() == 2 and not (choose & score).any()
    # the split is of corpus indices: the same sentences choose in any column order
    flip = halves(sentences[::-1], seed=4)[0]
    assert set(sentences[choose]) == set(sentences[::-1][flip])
    # 10 arcs per sentence, all right unablated; head 0 costs 0.1 on the choosing half and 0.8 on the scoring
    # half (0.45 on all four: the in-sample choice), head 1 costs 0.3 and 0.1 (0.2 on all)
    n = np.full((4, 1), 10.0)
    hits = np.stack([np.where(choose, 9.0, 2.0), np.where(choose, 7.0, 9.0)])[..., None]  # (2, S, 1)
    sums = Sums(sentences, n, np.full((4, 1), 10.0), np.zeros((4, 1)), hits, np.zeros_like(hits))
    w = scoring_weights(score, sentences, 50, seed=1)
    assert (w[:, choose] == 0).all() and (w.sum(1) == 2).all()
    t = heldout_rows(sums, ["all"], [0], 2, (choose, score), w, 0.95, {"all": (2, 1)})
    r = t.iloc[0]
    assert (r.layer, r["head"]) == (0, 1)  # chosen on the choosing half, not the all-sentence winner head 0
    assert r.chosen_drop == pytest.approx(0.3)
    assert (r.score, r.ci_low, r.ci_high) == pytest.approx((0.1, 0.1, 0.1))  # 0.1 in every scoring sentence
    assert (r.n, r.heads_tested, r.heads_passing) == (20, 2, 1)


def test_harm_p_values_adjusted_across_the_heads_of_a_relation():
    samples = np.array([[0.1, np.nan], [-0.2, np.nan], [0.3, np.nan], [0.0, np.nan]])
    np.testing.assert_allclose(harm_p(samples), [(1 + 2) / 5, np.nan])  # #{s <= 0} = 2 of 4 defined
    t = pd.DataFrame({"method": ["ablation"] * 3 + ["gradient"], "relation": ["all"] * 4,
                      "metric": ["accuracy_drop"] * 3 + ["gradient"], "p": [0.01, 0.04, 0.03, np.nan]})
    # BH over the three heads: sorted 0.01, 0.03, 0.04 -> 0.03, 0.04, 0.04
    np.testing.assert_allclose(adjust_drops(t, Multiplicity.bh), [0.03, 0.04, 0.04, np.nan])


def test_refit_is_refused_for_a_readout_that_is_not_fitted():
    with pytest.raises(ProbingError) as err:
        _check_refit(ReadoutKind.embedding, ImportanceConfig(readout="embedding", pruning_refit=True))
    assert str(err.value) == ("importance.pruning_refit=true: importance.readout=embedding is not fitted, so "
                              "there is nothing to refit; use importance.readout=relation or attachment")


CORPUS = Corpus("toy", "train", (
    Sentence("a", ("the", "cat", "ate", "fish"), (1, 2, -1, 2), ("det", "nsubj", "root", "obj")),
    Sentence("b", ("dogs", "bark"), (1, -1), ("nsubj", "root")),
))
POS = torch.tensor([[0, 1, 2, 3, 4, 5], [0, 1, 2, 3, -1, -1]])  # [CLS] words [SEP], one piece a word


def test_refit_fits_the_readout_again_on_the_pruned_model():
    torch.manual_seed(0)
    model = randomise(BUILDERS["bert"](), seed=7)
    ids = torch.randint(5, 40, (2, 6), generator=torch.Generator().manual_seed(8))
    mask = (POS >= 0).long()
    batch = Batch({"input_ids": ids * mask, "attention_mask": mask}, POS, np.array([0, 1]), np.array([1, 1]),
                  np.array([4, 2]), 6)
    fitted, seen = [], []

    def fit():
        with torch.inference_mode():  # what the fit sees: the model as gated around this call
            seen.append(model(**batch.inputs).last_hidden_state.clone())
        fitted.append(fit_relation(model, CORPUS, [batch], CORPUS, "mean_sum", 1.0, 200, 0))
        return fitted[-1]

    frozen = fit()
    settings = torch.ones(3, 2, 4)
    settings[1, 0] = 0  # layer 0 ablated (zero ablation)
    sums = evaluate_refitted(model, [batch], fit, settings, None, replicas=2)
    assert len(fitted) == 1 + 2  # the frozen fit, then one per distinct setting (the repeated all-ones once)
    plain = evaluate(model, [batch], frozen, settings, None, replicas=2)
    np.testing.assert_allclose(sums.hits[[0, 2]], plain.hits[[0, 2]])  # unablated: the same readout refitted
    np.testing.assert_allclose(sums.clean_hits, plain.clean_hits)
    refit = next(r for r, h in zip(fitted[1:], seen[1:]) if not torch.allclose(h, seen[0]))
    assert not torch.allclose(refit.weight, frozen.weight)  # fitted on the pruned model's vectors
    own = evaluate(model, [batch], refit, settings[1:2], None, replicas=1)
    np.testing.assert_allclose(sums.hits[1], own.hits[0])


def test_no_ablation_settings_give_no_drop_rows():
    """method=gradient ablates nothing: the drop table is empty, with resamples or without."""
    from probing.importance.tables import drop_rows

    empty = np.zeros((0, 2, 1))
    sums = Sums(np.array([0, 1]), np.full((2, 1), 2.0), np.full((2, 1), 2.0), np.zeros((2, 1)), empty, empty)
    table, drop, samples = drop_rows(sums, ["all"], [0], [], "accuracy", np.ones((3, 2)), 0.95)
    assert table.empty and drop.shape == (0, 1) and samples.shape == (0, 0, 1)


def test_heads_passing_needs_enough_resamples_to_pass_the_adjusted_threshold():
    from probing.tasks.importance import _heads_power

    # the first BH step across 72 heads at 0.05 needs p <= 0.05 / 72: 1 / (1 + B) gets there from B = 1439
    assert _heads_power(500, 72, 0.05) == {"resamples": 500, "tests": 72, "resamples_needed": 1439, "enough": False}
    assert _heads_power(1439, 72, 0.05)["enough"] and 1 / 1440 <= 0.05 / 72 < 1 / 1439
