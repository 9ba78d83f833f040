"""Structural probes: a tree metric planted by a known linear map is recovered (UUAS 1.0, root accuracy 1.0);
random vectors give the random-tree UUAS; same seed -> same numbers; the loss normalisation by hand."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_structural_metrics import random_tree

from probing.probes.structural.probe import (
    DepthProbe,
    DistanceProbe,
    Regimen,
    Sentences,
    StructuralProbe,
    _batches,
    l1_loss,
    loss_and_grad,
    score,
)

N_MAX, NOISE = 12, 6


def tree_code(heads: np.ndarray) -> np.ndarray:
    """``z_i[k] = 1`` when word k (not the root) is on the path from i up to the root: then
    ``||z_i - z_j||^2`` is the tree distance and ``||z_i||^2`` the depth."""
    n = len(heads)
    z = np.zeros((n, N_MAX), dtype=np.float32)
    for i in range(n):
        k = i
        while heads[k] >= 0:
            z[i, k] = 1.0
            k = heads[k]
    return z


def planted(n_sent: int, seed: int, signal: bool) -> Sentences:
    """Sentences of 6..12 words whose vectors are a fixed random rotation of [tree code; noise] (or,
    without signal, of random bits and noise)."""
    rng = np.random.default_rng(seed)
    mix = np.linalg.qr(np.random.default_rng(99).normal(size=(N_MAX + NOISE, N_MAX + NOISE)))[0]
    vecs, heads = [], []
    for _ in range(n_sent):
        h = random_tree(rng, int(rng.integers(6, N_MAX + 1)))
        code = tree_code(h) if signal else rng.integers(0, 2, size=(len(h), N_MAX)).astype(np.float32)
        vecs.append((np.hstack([code, rng.normal(size=(len(h), NOISE))]) @ mix).astype(np.float32))
        heads.append(h)
    return Sentences.from_lists(vecs, heads)


# 30 batches an epoch here (Hewitt and Manning's PTB has 2000): a larger step than their 1e-3 converges
FAST = Regimen(seed=0, lr=1e-2)


def test_distance_probe_recovers_planted_tree_metric():
    train, dev, test = planted(600, 0, True), planted(100, 1, True), planted(100, 2, True)
    probe = StructuralProbe("distance", FAST).fit(train, dev)
    got = score("distance", probe.predict(test), test)
    assert got["uuas"] == 1.0
    assert got["dspr"] > 0.9  # gold distances tie, predicted ones do not: Spearman stays below 1


def test_depth_probe_recovers_planted_depths():
    train, dev, test = planted(600, 0, True), planted(100, 1, True), planted(100, 2, True)
    probe = StructuralProbe("depth", FAST).fit(train, dev)
    got = score("depth", probe.predict(test), test)
    assert got["root_accuracy"] == 1.0
    assert got["nspr"] > 0.9


def test_random_vectors_give_the_random_tree_uuas():
    train, dev, test = planted(300, 0, False), planted(60, 1, False), planted(400, 2, False)
    pred = StructuralProbe("distance", Regimen(seed=0, max_epochs=5)).fit(train, dev).predict(test)
    # vectors independent of the trees: every word pair is equally likely an MST edge, so each gold edge
    # is found with probability (n-1) / C(n, 2) = 2/n
    n = test.lengths
    expected = float(((n - 1) * 2.0 / n).sum() / (n - 1).sum())
    assert score("distance", pred, test)["uuas"] == pytest.approx(expected, abs=0.04)


def test_same_seed_same_numbers_other_seed_other_numbers():
    train, dev = planted(100, 0, True), planted(20, 1, True)

    def fit(seed: int) -> StructuralProbe:
        return StructuralProbe("distance", Regimen(seed=seed, max_epochs=3)).fit(train, dev)

    a, b, c = fit(0), fit(0), fit(1)
    for pa, pb in zip(a.predict(dev), b.predict(dev)):
        np.testing.assert_array_equal(pa, pb)
    assert a.dev_loss_ == b.dev_loss_ and a.dev_loss_ != c.dev_loss_


def test_rank_limits_the_map_and_bad_rank_is_refused():
    train, dev = planted(40, 0, True), planted(20, 1, True)
    probe = StructuralProbe("distance", Regimen(rank=3, max_epochs=1)).fit(train, dev)
    assert tuple(probe.probe_.proj.shape) == (N_MAX + NOISE, 3)
    with pytest.raises(ValueError, match="probe.rank must be at least 1, got 0"):
        StructuralProbe("distance", Regimen(rank=0)).fit(train, dev)


def test_l1_loss_normalised_by_squared_length_over_padded_batch():
    # a 2-word and a 3-word sentence in one padded batch; every predicted distance is 0
    data = Sentences.from_lists([np.zeros((2, 1)), np.zeros((3, 1))], [[-1, 0], [-1, 0, 1]])
    (batch,) = _batches(data, "distance", 20)
    zero = torch.zeros_like(batch.gold)
    # sums of gold distances: 2 (over 4 pairs) and 1+2+1+1+2+1 = 8 (over 9): (2/4 + 8/9) / 2
    assert float(l1_loss(zero, batch)) == pytest.approx((2 / 4 + 8 / 9) / 2)
    depth_batch = _batches(data, "depth", 20)[0]
    # depths 0,1 and 0,1,2: (1/2 + 3/3) / 2
    assert float(l1_loss(torch.zeros_like(depth_batch.gold), depth_batch)) == pytest.approx(0.75)


def test_distance_probe_forward_matches_explicit_differences():
    torch.manual_seed(0)
    probe = DistanceProbe(5, 3)
    with torch.no_grad():
        probe.proj.normal_()
    x = torch.randn(2, 4, 5)
    t = x @ probe.proj
    want = ((t[:, :, None, :] - t[:, None, :, :]) ** 2).sum(-1)
    torch.testing.assert_close(probe(x), want, atol=1e-4, rtol=1e-4)


def test_every_epoch_is_logged(caplog):
    train, dev = planted(40, 0, True), planted(20, 1, True)
    with caplog.at_level("INFO", logger="probing.probes.structural.probe"):
        StructuralProbe("depth", Regimen(max_epochs=2)).fit(train, dev)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and lines[1].startswith("depth probe epoch 1: train loss ")


@pytest.mark.parametrize("kind", ["distance", "depth"])
def test_hand_worked_gradient_equals_autograd(kind):
    # sentences of 1..7 words padded together, a map of rank 4, some predictions cut by the clamp (distance)
    rng = np.random.default_rng(3)
    heads = [random_tree(rng, n) for n in (1, 3, 7, 5)]
    data = Sentences.from_lists([rng.normal(size=(len(h), 6)).astype(np.float32) for h in heads], heads)
    (batch,) = _batches(data, kind, 20)
    probe = (DistanceProbe if kind == "distance" else DepthProbe)(6, 4)
    with torch.no_grad():
        probe.proj.copy_(torch.from_numpy(rng.normal(scale=0.5, size=(6, 4)).astype(np.float32)))
    want = l1_loss(probe(batch.x), batch)
    want.backward()
    loss, grad = loss_and_grad(probe.proj.detach(), batch, kind)
    assert float(loss) == pytest.approx(float(want.detach()), rel=1e-6)
    torch.testing.assert_close(grad, probe.proj.grad, rtol=1e-5, atol=1e-6)
    assert float(grad.abs().max()) > 1e-3  # a real gradient, not two zeros
