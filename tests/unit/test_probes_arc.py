"""The Attn arc probe: softmax and loss on a hand-worked two-word sentence, gradient, planted signal; on a causal
model's store, candidates on the dependent's left only."""

from __future__ import annotations

import math

import numpy as np
import pytest
from probes_synth import probe_cfg, splits, tree_corpus, write_store
from scipy.optimize import check_grad
from sklearn.base import clone

from probing.config import FeatureSet, LinearFit
from probing.corpus import Corpus, Sentence
from probing.probes.arc.blocks import StoreArcData
from probing.probes.arc.probe import ArcData, ArcProbe, arc_loss, local_index, run_arc, word_index
from probing.probes.arc.solver import _block_loss_grad, n_params
from probing.probes.baselines import best_offset, majority_accuracy, offset_heads, right_branching_heads
from probing.probes.features import pair_features, root_features, select_heads
from probing.probes.pairs import candidates, corpus_words, dependents


def two_words() -> ArcData:
    """"a b": a's head is b, b is the root; one head with A[a,b]=0.5, A[b,a]=0.25, and attention to the
    special tokens 0.3 (from a) and 0.6 (from b); special tokens look at a and b with mean 0.1 and 0.2."""
    X = np.array([[0.5, 0.25],    # dependent a, candidate b: (A[a,b], A[b,a])
                  [0.25, 0.5]], dtype=np.float32)  # dependent b, candidate a: (A[b,a], A[a,b])
    R = np.array([[0.3, 0.1], [0.6, 0.2]], dtype=np.float32)  # (to specials, from specials)
    return ArcData(X, R, sizes=np.array([1, 1]), gold=np.array([0, -1]))


def fitted(theta) -> ArcProbe:
    p = ArcProbe()
    p.coef_, p.root_coef_, p.root_intercept_ = np.array(theta[:2]), np.array(theta[2:4]), theta[4]
    return p


def test_two_word_softmax_and_loss_by_hand():
    # w = (2, 1), root weights (1, 0), bias -1:
    #   a: score(b) = 2*.5 + 1*.25 = 1.25, score(ROOT) = .3 - 1 = -.7  -> p(b|a) = 1 / (1 + e^-1.95)
    #   b: score(a) = 2*.25 + 1*.5 = 1.0,  score(ROOT) = .6 - 1 = -.4  -> p(ROOT|b) = 1 / (1 + e^1.4)
    theta = np.array([2.0, 1.0, 1.0, 0.0, -1.0])
    data = two_words()
    log_root, log_word = fitted(theta).predict_log_proba(data)
    np.testing.assert_allclose(np.exp(log_word), [1 / (1 + math.exp(-1.95)), 1 / (1 + math.exp(-1.4))])
    np.testing.assert_allclose(np.exp(log_root), [1 / (1 + math.exp(1.95)), 1 / (1 + math.exp(1.4))])
    loss, grad = arc_loss(theta, data)
    expect = (math.log(1 + math.exp(-1.95)) + math.log(1 + math.exp(1.4))) / 2
    assert loss == pytest.approx(expect, rel=1e-6)  # (0.13302 + 1.62042) / 2
    assert loss == pytest.approx(0.87672, abs=1e-5)
    # b's head is predicted to be a (1.0 > -0.4): one of the two attachments is right
    assert list(fitted(theta).predict(data)) == [0, 0] and fitted(theta).score(data) == 0.5
    # the penalty adds alpha/2 * ||weights||^2 (the bias is not penalised)
    assert arc_loss(theta, data, alpha=0.1)[0] == pytest.approx(expect + 0.05 * 6.0)
    # gradient of the bias: sum over dependents of p(ROOT) - [gold is ROOT], averaged
    p_root = np.array([1 / (1 + math.exp(1.95)), 1 / (1 + math.exp(1.4))])
    assert grad[-1] == pytest.approx(((p_root[0] - 0) + (p_root[1] - 1)) / 2)


def test_gradient_matches_finite_differences():
    rng = np.random.default_rng(0)
    sizes = np.array([0, 3, 1, 4, 2])
    data = ArcData(rng.random((sizes.sum(), 3)).astype(np.float32), rng.random((5, 3)).astype(np.float32),
                   sizes, np.array([-1, 2, -1, 0, 1]))
    f = lambda t: arc_loss(t, data, 0.01)[0]  # noqa: E731
    g = lambda t: arc_loss(t, data, 0.01)[1]  # noqa: E731
    assert check_grad(f, g, rng.normal(size=7), epsilon=1e-4) < 1e-3


def test_fit_learns_the_planted_head_and_follows_the_estimator_contract():
    rng = np.random.default_rng(1)
    sizes = rng.integers(1, 6, 400)
    gold = np.array([rng.integers(-1, s) for s in sizes])
    X = rng.random((sizes.sum(), 2)).astype(np.float32) * 0.2
    starts = np.cumsum(sizes) - sizes
    X[starts[gold >= 0] + gold[gold >= 0], 0] += 0.8  # the gold word stands out in feature 0
    R = rng.random((400, 2)).astype(np.float32) * 0.2
    R[gold < 0, 1] += 0.8  # ROOT stands out in root feature 1
    data = ArcData(X, R, sizes, gold)
    probe = ArcProbe(C=10.0)
    assert not hasattr(probe, "coef_")
    assert clone(probe).get_params() == {"C": 10.0, "max_iter": 1000, "tol": 1e-4}
    assert probe.fit(data) is probe and probe.converged_
    assert probe.score(data) > 0.97 and probe.coef_[0] > 0 and probe.root_coef_[1] > 0


def test_run_arc_planted_signal_vs_random_attention(tmp_path):
    corpus = tree_corpus(250, seed=3)
    cfg = probe_cfg(kind="arc", linear=LinearFit(max_iter=300))
    planted = splits(corpus, write_store(corpus, tmp_path / "p", seed=4))
    r = run_arc(cfg, *planted, select_heads(2, 4, layer=0, head=0), 0)
    assert r.metrics["uas"] > 0.97 and r.metrics["selectivity"] > 0.3
    noise = splits(corpus, write_store(corpus, tmp_path / "r", seed=4, plant=False))
    r0 = run_arc(cfg, *noise, select_heads(2, 4, layer=0, head=0), 0)
    # random attention: no better than a guess among the ~5 candidates, near the best-offset baseline's league
    assert r0.metrics["uas"] < 0.45
    assert r0.metrics["right_branching_uas"] == r.metrics["right_branching_uas"]
    # same seed, same numbers
    again = run_arc(cfg, *planted, select_heads(2, 4, layer=0, head=0), 0)
    assert again.metrics == r.metrics


def test_baselines_by_hand():
    pos, n = np.array([0, 1, 2, 0, 1]), np.array([3, 3, 3, 2, 2])
    assert list(right_branching_heads(pos, n)) == [1, 2, -1, 1, -1]
    assert list(offset_heads(pos, n, -1)) == [-1, 0, 1, -1, 0]
    gold = np.array([-1, 0, 1, -1, 0])  # left-branching trees
    assert best_offset(pos, n, gold, 3) == -1
    assert majority_accuracy(["a", "a", "b"], ["a", "b", "b", "b"]) == 0.25


def mirrored(corpus: Corpus) -> Corpus:
    """Every other sentence read backwards (its heads on the right), so arcs point both ways."""
    out = []
    for k, s in enumerate(corpus):
        if k % 2:
            n = len(s)
            s = Sentence(s.id, s.words[::-1], tuple(-1 if h < 0 else n - 1 - h for h in s.heads[::-1]),
                         s.relations[::-1], s.upos[::-1])
        out.append(s)
    return Corpus(corpus.name, corpus.split, tuple(out))


@pytest.fixture(scope="module")
def causal_synth(tmp_path_factory):
    corpus = mirrored(tree_corpus(200, seed=7))
    store = write_store(corpus, tmp_path_factory.mktemp("causal"), seed=8, causal=True)
    return corpus, store


def test_causal_candidates_are_the_words_on_the_left(causal_synth):
    corpus, store = causal_synth
    deps = dependents(corpus_words(corpus, store.indices, False, ("PUNCT",)), exclude_punct=True)
    sel = select_heads(2, 4, None, None)
    data = StoreArcData(store, deps.sent, deps.pos, sel, FeatureSet.both, [-1, 1], block_rows=50)
    assert store.causal and data.causal and (data.sizes == deps.pos).all()
    cand = candidates(deps)
    left = cand.key < cand.query  # the candidates an encoder's store would have, cut to the left
    X, _ = pair_features(store, cand.sent[left], cand.query[left], cand.key[left], sel, FeatureSet.both, [-1, 1])
    R, _ = root_features(store, deps.sent, deps.pos, sel, FeatureSet.both)
    starts = np.cumsum(data.sizes) - data.sizes
    for b in data.blocks():
        rows = np.concatenate([np.arange(starts[r], starts[r] + data.sizes[r]) for r in b.rows])
        np.testing.assert_array_equal(b.X, X[rows])
        np.testing.assert_array_equal(b.R, R[b.rows])
    # the compiled loss and gradient see the same candidates as the blocks
    ok = deps.head < deps.pos
    golds = np.stack([np.where(ok, local_index(deps.pos, deps.head), -1), np.full(len(deps), -1)])
    thetas = np.random.default_rng(0).normal(size=(2, n_params(data)))
    loss, grad = data.loss_grad(thetas, golds)
    parts = [_block_loss_grad(b, thetas, golds, data.n_features) for b in data.blocks()]
    np.testing.assert_allclose(loss, sum(p[0] for p in parts), rtol=1e-6)
    want = sum(p[1] for p in parts)
    np.testing.assert_allclose(grad, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    # a fitted probe never predicts a head on the dependent's right
    pred = word_index(deps.pos, ArcProbe().fit(data, golds[0]).predict(data))
    assert (pred < deps.pos).all()


def test_run_arc_on_a_causal_store_reports_what_it_can_reach(causal_synth):
    corpus, store = causal_synth
    train, ev = splits(corpus, store)
    cfg = probe_cfg(kind="arc", linear=LinearFit(max_iter=300))
    m = run_arc(cfg, train, ev, select_heads(2, 4, layer=0, head=0), 0).metrics
    deps = dependents(ev.words(False, ("PUNCT",)), exclude_punct=True)
    share = float(np.mean(deps.head < deps.pos))
    assert m["candidates"] == "left" and 0.3 < share < 0.7 and m["reachable_share"] == pytest.approx(share)
    assert m["uas_reachable"] > 0.95  # layer 0 head 0 plants the arcs it can see
    assert m["uas"] == pytest.approx(m["uas_reachable"] * share)  # a head on the right is never predicted
    assert m["n_train"] < len(dependents(train.words(False, ("PUNCT",)), exclude_punct=True))
    assert 0 <= m["control_uas"] <= 1 and m["selectivity"] == pytest.approx(m["uas"] - m["control_uas"])
