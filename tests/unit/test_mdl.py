"""MDL online code: block cuts, the uniform probe's N log2 K, bits (not nats) by hand, planted signal."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.dummy import DummyClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from probing.probes.mdl import UNIFORM_MIX, block_ends, mdl_metrics, online_code


class HalfOnFeature(ClassifierMixin, BaseEstimator):
    """Gives probability 1/2 to the class named by feature 0 and shares the rest equally among all ``k``
    classes (seen in training or not)."""

    def __init__(self, k: int = 4):
        self.k = k

    def fit(self, X, y):
        self.classes_ = np.arange(self.k)
        return self

    def predict_proba(self, X):
        k = len(self.classes_)
        p = np.full((len(X), k), 0.5 / (k - 1))
        p[np.arange(len(X)), np.searchsorted(self.classes_, X[:, 0].astype(int))] = 0.5
        return p


def logreg():
    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=500))


def test_block_ends_are_voita_and_titovs_cuts():
    assert block_ends(1000).tolist() == [1, 2, 4, 8, 16, 32, 62, 125, 250, 500, 1000]
    with pytest.raises(ValueError, match="MDL fractions must rise from above 0 to 1.0"):
        block_ends(10, (0.5, 0.2, 1.0))


def test_uniform_probe_costs_exactly_n_log2_k():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 4, size=40000)  # the first block (40 items) holds all four classes
    code = online_code(lambda: DummyClassifier(strategy="uniform"), np.zeros((len(y), 1)), y, seed=0)
    assert code.uniform_bits == 80000.0
    assert code.codelength_bits == pytest.approx(80000.0, rel=1e-12)
    assert code.compression == pytest.approx(1.0, rel=1e-12)
    assert code.blocks["end"].tolist() == block_ends(40000).tolist()


def test_codelength_is_in_bits_hand_worked():
    n, k = 5000, 4
    y = np.random.default_rng(1).integers(0, k, size=n)
    code = online_code(HalfOnFeature, y[:, None].astype(float), y, seed=3)
    first = int(0.001 * n)  # 5 items, sent uniformly: 2 bits each
    per_item = -np.log2((1 - UNIFORM_MIX) * 0.5 + UNIFORM_MIX / k)  # ~1 bit, not 0.69 nats
    assert code.codelength_bits == pytest.approx(first * 2 + (n - first) * per_item, rel=1e-12)


def test_codelength_falls_as_signal_is_planted():
    rng = np.random.default_rng(2)
    n, k = 3000, 3
    y = rng.integers(0, k, size=n)
    noise = rng.normal(size=(n, 5))
    codes = []
    for strength in (0.0, 1.0, 4.0):
        X = noise.copy()
        X[:, :k] += strength * np.eye(k)[y]
        codes.append(online_code(logreg, X, y, seed=0))
    bits = [c.codelength_bits for c in codes]
    assert bits[0] > bits[1] > bits[2]
    assert 0.9 < codes[0].compression < 1.02  # no signal: about the uniform code
    assert codes[2].compression > 3


def test_single_class_prefix_and_unseen_classes_stay_finite():
    # block 1 is coded from a one-item prefix: add-one frequencies over K=3, (1+1)/4 or 1/4;
    # class 2 (3 items) is missing from the early prefixes: eps/K, not zero
    y = np.array([0] * 500 + [1] * 497 + [2] * 3)
    X = np.eye(3)[y] + np.random.default_rng(0).normal(scale=0.1, size=(len(y), 3))
    code = online_code(logreg, X, y, seed=0)
    assert np.isfinite(code.codelength_bits) and code.n_classes == 3
    assert code.blocks["bits"][1] in (pytest.approx(1.0), pytest.approx(2.0))
    assert code.blocks["end"].tolist() == [1, 2, 4, 8, 16, 32, 62, 125, 250, 500, 1000]


def test_mdl_metrics_control_ratio():
    rng = np.random.default_rng(4)
    y = rng.integers(0, 3, size=2000)
    X = np.eye(3)[y] * 3 + rng.normal(size=(2000, 3))
    control = rng.integers(0, 3, size=2000)  # unrelated to X: harder to compress
    metrics, blocks = mdl_metrics(logreg, X, y, control, seed=0)
    assert metrics["codelength_ratio"] == pytest.approx(
        metrics["control_codelength_bits"] / metrics["codelength_bits"])
    assert metrics["codelength_ratio"] > 2
    assert set(blocks["labels"]) == {"task", "control"}
    assert blocks.groupby("labels")["bits"].sum()["task"] == pytest.approx(metrics["codelength_bits"])
