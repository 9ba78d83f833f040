"""The arc probe's streamed features and its Newton solver, each against an independent computation:
blocks built by the compiled kernel against the numpy feature gatherers, the compiled loss and gradient
against the numpy block path, the Hessian against finite differences, the Newton optimum against scipy's
L-BFGS on the same objective, and the lockstep and warm-started fits against plain ones."""

from __future__ import annotations

import numpy as np
import pytest
from probes_synth import splits, tree_corpus, write_store
from scipy.optimize import minimize

from probing.config import FeatureSet
from probing.probes.arc import solver as arc_solver
from probing.probes.arc.blocks import ArcData, StoreArcData
from probing.probes.arc.probe import ArcProbe, arc_loss, fit_probes, local_index, word_index
from probing.probes.arc.solver import _block_loss_grad, evaluate, hessian_sample, n_params
from probing.probes.features import pair_features, root_features, select_heads
from probing.probes.pairs import candidates, corpus_words, dependents

PUNCT = ("PUNCT",)


@pytest.fixture(scope="module", params=[("float16", 0), ("float32", 1)], ids=["f16-many-shards", "f32-one"])
def synth(request, tmp_path_factory):
    dtype, shard_mb = request.param
    corpus = tree_corpus(60, seed=5)
    store = write_store(corpus, tmp_path_factory.mktemp("s"), seed=6, dtype=dtype, shard_mb=shard_mb)
    deps = dependents(corpus_words(corpus, store.indices, False, PUNCT), exclude_punct=True)
    return corpus, store, deps


def _assemble(data: StoreArcData) -> tuple[np.ndarray, np.ndarray]:
    """The blocks put back in the data's order of dependents."""
    starts = np.cumsum(data.sizes) - data.sizes
    X = np.full((int(data.sizes.sum()), data.n_features), np.nan, np.float32)
    R = np.full((data.n_dependents, data.n_root_features), np.nan, np.float32)
    for b in data.blocks():
        rows = np.concatenate([np.arange(starts[r], starts[r] + data.sizes[r]) for r in b.rows])
        X[rows], R[b.rows] = b.X, b.R
    return X, R


@pytest.mark.parametrize("feature_set,offsets", [(FeatureSet.both, []), (FeatureSet.forward, [-1, 2]),
                                                 (FeatureSet.backward, [1])])
def test_store_blocks_equal_the_numpy_features(synth, feature_set, offsets):
    _, store, deps = synth
    sel = select_heads(2, 4, None, None)
    data = StoreArcData(store, deps.sent, deps.pos, sel, feature_set, offsets, block_rows=50)
    cand = candidates(deps)
    X, _ = pair_features(store, cand.sent, cand.query, cand.key, sel, feature_set, offsets)
    R, _ = root_features(store, deps.sent, deps.pos, sel, feature_set)
    got_x, got_r = _assemble(data)
    np.testing.assert_array_equal(got_x, X)  # the same float16 -> float32 values, the same float32 sums
    np.testing.assert_array_equal(got_r, R)
    # the candidate order is the one the local indices assume
    np.testing.assert_array_equal(cand.local_index(deps.head), local_index(deps.pos, deps.head))
    np.testing.assert_array_equal(word_index(deps.pos, local_index(deps.pos, deps.head)), deps.head)


def test_compiled_loss_and_gradient_equal_the_numpy_blocks(synth):
    _, store, deps = synth
    sel = select_heads(2, 4, layer=0, head=None)
    data = StoreArcData(store, deps.sent, deps.pos, sel, FeatureSet.both, [-1, 1], block_rows=64)
    rng = np.random.default_rng(0)
    golds = np.stack([local_index(deps.pos, deps.head), np.where(rng.random(len(deps)) < 0.5, -1, 0)])
    golds[1, data.sizes == 0] = -1
    thetas = rng.normal(size=(2, n_params(data))) * 2
    loss, grad = data.loss_grad(thetas, golds)
    want_l, want_g = np.zeros(2), np.zeros(thetas.shape)
    for block in data.blocks():
        lb, gb = _block_loss_grad(block, thetas, golds, data.n_features)
        want_l, want_g = want_l + lb, want_g + gb
    np.testing.assert_allclose(loss, want_l, rtol=1e-6)
    np.testing.assert_allclose(grad, want_g, rtol=1e-4, atol=1e-4 * np.abs(want_g).max())


def _random_data(seed: int, n: int = 300) -> ArcData:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 7, n)
    gold = np.array([rng.integers(-1, s) if s else -1 for s in sizes])
    X = rng.random((sizes.sum(), 3)).astype(np.float32)
    X[np.cumsum(sizes)[gold >= 0] - sizes[gold >= 0] + gold[gold >= 0], 0] += 0.5
    return ArcData(X, rng.random((n, 2)).astype(np.float32), sizes, gold, block_rows=97)


def test_hessian_matches_finite_differences_of_the_gradient():
    data = _random_data(1)
    theta = np.random.default_rng(2).normal(size=n_params(data))
    hess, count = hessian_sample(data, theta[None, :], stride=1, phase=0)
    assert count == data.n_dependents
    eps = 1e-3
    fd = np.stack([(arc_loss(theta + eps * e, data)[1] - arc_loss(theta - eps * e, data)[1]) / (2 * eps)
                   for e in np.eye(len(theta))])
    np.testing.assert_allclose(hess[0] / count, fd, atol=2e-4)


def test_newton_reaches_the_lbfgs_optimum():
    data = _random_data(3)
    probe = ArcProbe(C=0.5, tol=1e-7).fit(data)
    alpha = 1.0 / (0.5 * data.n_dependents)
    ref = minimize(arc_loss, np.zeros(n_params(data)), args=(data, alpha), jac=True, method="L-BFGS-B",
                   options={"gtol": 1e-10, "ftol": 1e-15, "maxiter": 5000})
    assert probe.converged_ and probe.n_iter_ < 20
    assert probe.loss_ == pytest.approx(ref.fun, abs=5e-8)  # float32 features: the optimum to ~1e-8
    np.testing.assert_allclose(probe.theta_, ref.x, atol=1e-3)  # ROOT weights and bias trade off: a flat valley
    assert np.max(np.abs(evaluate(data, probe.theta_[None], data.gold[None], alpha)[0].grad)) <= 1e-7


def test_probes_fitted_together_equal_probes_fitted_alone(synth, monkeypatch):
    _, store, deps = synth
    sel = select_heads(2, 4, None, None)
    data = StoreArcData(store, deps.sent, deps.pos, sel, FeatureSet.both, [], block_rows=40)
    rng = np.random.default_rng(4)
    other = np.array([rng.integers(-1, s) if s else -1 for s in data.sizes])
    golds = [local_index(deps.pos, deps.head), other]
    together = fit_probes([ArcProbe(tol=1e-6), ArcProbe(tol=1e-6)], data, golds)
    alone = [ArcProbe(tol=1e-6).fit(data, g) for g in golds]
    for a, b in zip(together, alone):
        np.testing.assert_allclose(a.theta_, b.theta_, atol=1e-5)
    # a warm start on a sample of the sentences lands on the same optimum
    monkeypatch.setattr(arc_solver, "WARM_MIN_ROWS", 1)
    monkeypatch.setattr(arc_solver, "WARM_SHARE", 0.3)
    warm = ArcProbe(tol=1e-6).fit(data, golds[0])
    assert warm.converged_ and warm.loss_ == pytest.approx(alone[0].loss_, abs=5e-8)
    np.testing.assert_allclose(warm.theta_, alone[0].theta_, atol=1e-3)  # a flat optimum: tol 1e-6 on the gradient
    assert arc_solver.warm_start_rows(data) is not None


def test_store_predictions_are_the_in_memory_predictions(synth):
    corpus, store, _ = synth
    train, ev = splits(corpus, store)
    sel = select_heads(2, 4, layer=0, head=0)
    d_tr = dependents(train.words(False, PUNCT), True)
    d_ev = dependents(ev.words(False, PUNCT), True)
    tr = StoreArcData(store, d_tr.sent, d_tr.pos, sel, FeatureSet.both, [])
    te = StoreArcData(store, d_ev.sent, d_ev.pos, sel, FeatureSet.both, [], block_rows=30)
    probe = ArcProbe().fit(tr, local_index(d_tr.pos, d_tr.head))
    cand = candidates(d_ev)
    X, _ = pair_features(store, cand.sent, cand.query, cand.key, sel, FeatureSet.both, [])
    R, _ = root_features(store, d_ev.sent, d_ev.pos, sel, FeatureSet.both)
    np.testing.assert_array_equal(probe.predict(te), probe.predict(ArcData(X, R, te.sizes)))
    assert probe.score(te, local_index(d_ev.pos, d_ev.head)) > 0.9  # layer 0 head 0 plants the arcs


def test_every_newton_iteration_is_logged_with_its_loss(caplog):
    """A long arc-probe fit reports its progress: it is never silent for minutes."""
    data = _random_data(5)
    with caplog.at_level("INFO", logger="probing.probes.arc.solver"):
        fit_probes([ArcProbe(), ArcProbe()], data, [data.gold, np.full(data.n_dependents, -1)],
                   names=("task", "control"))
    lines = [r.getMessage() for r in caplog.records]
    for name in ("task", "control"):
        mine = [m for m in lines if m.startswith(f"arc probe ({name}): iteration")]
        assert mine and mine[0].startswith(f"arc probe ({name}): iteration 1, loss ")
        assert all("max gradient" in m and m.endswith(" s)") for m in mine)


class _CoarseLoss:
    """An :class:`ArcData` whose loss is only known to ``1e-5`` (float32 scores make a real one known to about
    ``1e-7``): the steps that end a fit change the loss by less than that."""

    def __init__(self, data: ArcData):
        self.data = data
        self.n_dependents, self.sizes = data.n_dependents, data.sizes
        self.n_features, self.n_root_features = data.n_features, data.n_root_features

    def blocks(self, stride: int = 1, phase: int = 0):
        return self.data.blocks(stride, phase)

    def loss_grad(self, thetas, golds):
        loss, grad = np.zeros(len(thetas)), np.zeros(thetas.shape)
        for block in self.data.blocks():
            lb, gb = _block_loss_grad(block, thetas, golds, self.n_features)
            loss, grad = loss + lb, grad + gb
        step = 1e-5 * self.n_dependents
        return np.round(loss / step) * step, grad


def test_newton_ends_on_the_gradient_where_the_loss_cannot_resolve_its_last_steps():
    data = _random_data(7)
    exact = ArcProbe(C=0.5, tol=1e-7).fit(data)
    coarse = ArcProbe(C=0.5, tol=1e-7).fit(_CoarseLoss(data), data.gold)
    assert exact.converged_ and coarse.converged_  # the loss alone stalls a step short of 1e-7
    np.testing.assert_allclose(coarse.theta_, exact.theta_, atol=1e-6)
