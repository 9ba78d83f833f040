"""Trivial baselines beside the relation and arc probes, and the margin over the best with its interval over
eval sentences: hand-worked lookups and offsets, the weighted AUC against scikit-learn, the bootstrap terms."""

from __future__ import annotations

import numpy as np
import pytest
from probes_synth import probe_cfg, splits, tree_corpus, write_store
from sklearn.metrics import roc_auc_score

from probing.config import LinearFit
from probing.probes.arc.probe import ARC_BASELINES, run_arc
from probing.probes.baselines import LookupClassifier, chain_offset, clipped_offset
from probing.probes.data import ProbeResult
from probing.probes.features import select_heads
from probing.probes.margins import AucMargin, accuracy_margin_terms, margin_metrics, weighted_auc
from probing.probes.pairs import Words
from probing.probes.relation import RELATION_BASELINES, relation_baselines, run_relation
from probing.probes.structural.metrics import ratio_of_groups
from probing.stats.bootstrap import percentile_interval, resample_counts
from probing.tasks.probe import sentence_intervals


def arcs(pos, head, rel, upos) -> Words:
    """Arcs of one long sentence (only pos, head, relation and upos matter to the baselines)."""
    k = len(pos)
    obj = lambda xs: np.asarray(xs, dtype=object)  # noqa: E731
    return Words(np.zeros(k, int), np.asarray(pos), np.full(k, 20), np.asarray(head), obj(rel),
                 obj(["w"] * k), obj(["h"] * k), np.zeros(k, bool), obj(upos))


def test_relation_baselines_by_hand():
    # train offsets (head - pos): +1 det DET, +1 det DET, +1 amod ADJ, -1 obj NOUN twice, +2 nsubj, +3 nsubj
    # (clipped to +2 with window 2); majority: det, obj, nsubj tie at 2 -> det (sorted first)
    tr = arcs([0, 2, 4, 6, 8, 10, 12], [1, 3, 5, 5, 7, 12, 15],
              ["det", "det", "amod", "obj", "obj", "nsubj", "nsubj"],
              ["DET", "DET", "ADJ", "NOUN", "NOUN", "PRON", "PRON"])
    # eval: +1 DET det | +1 ADJ amod | -1 NOUN obj | +5 PRON nsubj (clipped: +2; (2, PRON) seen) |
    # -4 NOUN det (clipped -2: unseen offset -> majority det) | +1 NOUN nsubj ((1, NOUN) unseen -> offset: det)
    te = arcs([0, 2, 4, 6, 12, 14], [1, 3, 3, 11, 8, 15], ["det", "amod", "obj", "nsubj", "det", "nsubj"],
              ["DET", "ADJ", "NOUN", "PRON", "NOUN", "NOUN"])
    assert list(clipped_offset(te.pos, te.head, 2)) == [1, 1, -1, 2, -2, 1]
    base = relation_baselines(tr, te, tr.relation.astype(str), window=2)
    assert list(base["majority_accuracy"]) == [True, False, False, False, True, False]
    assert list(base["baseline_offset_accuracy"]) == [True, False, True, True, True, False]
    assert list(base["baseline_offset_pos_accuracy"]) == [True, True, True, True, True, False]
    assert set(base) == set(RELATION_BASELINES)


def test_lookup_classifier_backs_off_to_the_longest_seen_prefix_then_the_majority():
    X = np.array([[1, "A"], [1, "A"], [1, "B"], [2, "A"], [2, "C"], [2, "C"]], dtype=object)
    y = ["x", "x", "y", "z", "y", "y"]  # majority: y (3)
    clf = LookupClassifier().fit(X, y)
    assert clf.majority_ == "y"
    got = clf.predict(np.array([[1, "A"], [1, "B"], [1, "Q"], [2, "Q"], [3, "A"], [2, "A"]], dtype=object))
    # seen pairs; (1, Q) -> offset 1's label (x: 2 of 3); (2, Q) -> offset 2's (y: 2 of 3); 3 unseen -> majority
    assert list(got) == ["x", "y", "x", "y", "y", "z"]
    # a tie between labels goes to the first in sorted order
    assert list(LookupClassifier().fit([[0], [0]], ["b", "a"]).predict([[0]])) == ["a"]


def test_chain_offset_is_the_side_that_matches_more_heads():
    pos, n = np.array([0, 1, 2, 3]), np.array([4, 4, 4, 4])
    assert chain_offset(pos, n, np.array([1, 2, 3, -1])) == 1  # the last word is ROOT, as offset +1 says
    assert chain_offset(pos, n, np.array([-1, 0, 1, 2])) == -1
    assert chain_offset(pos, n, np.array([1, 0, 3, 2])) == -1  # 2 of 4 either way: the tie goes to -1


def test_weighted_auc_is_roc_auc_and_a_resample_is_the_repeated_items():
    rng = np.random.default_rng(0)
    score = rng.integers(0, 6, 200).astype(float)  # many ties
    label = (rng.random(200) < 0.4).astype(int)
    assert weighted_auc(score, label, np.ones((1, 200)))[0] == pytest.approx(roc_auc_score(label, score))
    counts = rng.integers(0, 3, 200)
    got = weighted_auc(score, label, counts[None, :].astype(float))[0]
    assert got == pytest.approx(roc_auc_score(np.repeat(label, counts), np.repeat(score, counts)))


def test_auc_margin_under_sentence_weights():
    rng = np.random.default_rng(1)
    item_sentence = np.repeat(np.arange(10), 6)
    label = np.tile([1, 0, 1, 0, 0, 1], 10)
    probe, base = label + rng.normal(0, 0.8, 60), rng.normal(0, 1, 60)
    m = AucMargin(10, item_sentence, label, probe, base)
    assert m.under(np.ones(10))[0] == pytest.approx(roc_auc_score(label, probe) - roc_auc_score(label, base))
    w = resample_counts(10, 5, seed=3).astype(float)
    want = [roc_auc_score(np.repeat(label, c), np.repeat(probe, c)) - roc_auc_score(np.repeat(label, c),
            np.repeat(base, c)) for c in w[:, item_sentence].astype(int)]
    assert m.under(w) == pytest.approx(want)


def test_margin_is_the_score_minus_the_best_baseline():
    m = {"accuracy": 0.9, "a": 0.5, "b": 0.7, "c": 0.7}
    assert margin_metrics(m, "accuracy", ("a", "b", "c")) == {"margin": pytest.approx(0.2), "margin_baseline": "b"}


def test_accuracy_margin_terms_by_hand():
    # sentence 0: (probe, baseline) correct (1, 0), (1, 1); sentence 1: (0, 1)
    t = accuracy_margin_terms(np.array([0, 0, 1]), np.array([1, 1, 0]), np.array([0, 1, 1]), 2)
    assert list(t.num) == [1.0, -1.0] and list(t.den) == [2.0, 1.0]
    assert ratio_of_groups(t) == pytest.approx(0.0)  # (2 - 2) / 3
    assert list(ratio_of_groups(t, np.array([[2.0, 0.0], [0.0, 3.0]]))) == pytest.approx([0.5, -1.0])


def test_sentence_intervals_average_the_seeds_of_both_kinds_of_terms():
    rng = np.random.default_rng(2)
    s, lab = np.repeat(np.arange(8), 4), np.tile([1, 0, 0, 1], 8)
    results = []
    for k in range(2):
        t = accuracy_margin_terms(s, rng.random(32) < 0.8, rng.random(32) < 0.5, 8)
        results.append(ProbeResult({}, {}, {"margin": t, "auc": AucMargin(8, s, lab, rng.random(32) + lab,
                                                                          rng.random(32))}))
    got = sentence_intervals(results, 50, 0.9, seed=4)
    w = resample_counts(8, 50, 4).astype(float)
    num = np.mean([r.terms["margin"].num for r in results], axis=0)
    lo, hi = percentile_interval(ratio_of_groups(results[0].terms["margin"]._replace(num=num), w), 0.9)
    assert got["margin"] == pytest.approx([lo, hi])
    lo, hi = percentile_interval((results[0].terms["auc"].under(w) + results[1].terms["auc"].under(w)) / 2, 0.9)
    assert got["auc"] == pytest.approx([lo, hi])


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    corpus = tree_corpus(80, seed=11)
    return splits(corpus, write_store(corpus, tmp_path_factory.mktemp("store"), seed=12))


def test_relation_probe_carries_its_baselines_and_margin(planted):
    r = run_relation(probe_cfg(control=False), *planted, select_heads(2, 4, layer=1, head=None), 0)
    m = r.metrics
    best = max(m[k] for k in RELATION_BASELINES)
    assert m["margin"] == pytest.approx(m["accuracy"] - best) and m[m["margin_baseline"]] == best
    # synthetic labels do not depend on the offset: the lookups cannot beat the majority by much
    assert m["baseline_offset_accuracy"] <= m["majority_accuracy"] + 0.15
    assert ratio_of_groups(r.terms["margin"]) == pytest.approx(m["margin"])
    assert ratio_of_groups(r.terms["accuracy"]) == pytest.approx(m["accuracy"])
    assert len(r.terms["margin"].num) == len(planted[1].indices)


def test_arc_probe_carries_the_chains_and_its_margin(planted):
    cfg = probe_cfg(kind="arc", control=False, linear=LinearFit(max_iter=200))
    r = run_arc(cfg, *planted, select_heads(2, 4, layer=0, head=0), 0)
    m = r.metrics
    # every head of a synthetic tree is an earlier word: the chains go left
    assert m["chains_offset"] == -1 and m["best_offset"] == -1
    assert m["chains_uas"] == m["best_offset_uas"]
    best = max(m[k] for k in ARC_BASELINES)
    assert m["margin"] == pytest.approx(m["uas"] - best) and m["margin"] > 0.3
    assert ratio_of_groups(r.terms["margin"]) == pytest.approx(m["margin"])
    assert ratio_of_groups(r.terms["uas"]) == pytest.approx(m["uas"])
