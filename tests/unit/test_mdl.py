"""MDL online code: block cuts, the uniform first block, bits (not nats) by hand, each block's probe held out on
the transmitted prefix only, early stopping at the best held-out epoch, calibration on unlearnable labels."""

from __future__ import annotations

import numpy as np
import pytest

from probing.config import ProbeConfig
from probing.probes.mdl import (
    MdlSettings,
    block_ends,
    fit_softmax,
    mdl_metrics,
    online_code,
    validation_size,
)

FAST = MdlSettings(validation_fraction=0.1, lr=0.05, batch_size=256, max_epochs=40, patience=5)


def half_on_feature(k: int):
    """A fit that ignores its data: probability 1/2 to the class named by feature 0, the rest shared equally
    by the other ``k - 1`` classes."""

    def fit(Xtr, ytr, Xva, yva, kk, seed):
        assert kk == k

        def log_proba(X):
            p = np.full((len(X), k), 0.5 / (k - 1))
            p[np.arange(len(X)), X[:, 0].astype(int)] = 0.5
            return np.log(p)

        return log_proba, 1

    return fit


def test_block_ends_are_voita_and_titovs_cuts():
    assert block_ends(1000).tolist() == [1, 2, 4, 8, 16, 32, 62, 125, 250, 500, 1000]
    with pytest.raises(ValueError, match="MDL fractions must rise from above 0 to 1.0"):
        block_ends(10, (0.5, 0.2, 1.0))


def test_validation_size_by_hand():
    assert [validation_size(m, 0.1) for m in (0, 1, 2, 10, 27, 13500)] == [0, 0, 1, 1, 3, 1350]
    assert validation_size(10, 0.95) == 9  # one item is always left to train on


def test_codelength_is_in_bits_hand_worked():
    # n = 10, blocks end at 2, 5, 10: block 0 is 2 items at log2 4 = 2 bits; the 8 others get p = 1/2: 1 bit
    # each (ln 2 = 0.69 if nats were summed)
    y = np.array([0, 1, 2, 3, 0, 1, 2, 3, 0, 1])
    code = online_code(half_on_feature(4), y[:, None].astype(float), y, seed=3, validation_fraction=0.25,
                       fractions=(0.2, 0.5, 1.0))
    assert code.blocks["bits"].tolist() == pytest.approx([4.0, 3.0, 5.0], rel=1e-12)
    assert code.codelength_bits == pytest.approx(12.0, rel=1e-12)
    assert code.uniform_bits == 20.0 and code.compression == pytest.approx(20 / 12)
    # prefixes of 2 and 5 items: ceil(0.25 m) of them held out
    assert code.blocks["validation_items"].tolist() == [0, 1, 2]
    assert code.blocks["train_items"].tolist() == [0, 1, 3]


def test_new_types_are_counted_and_charged_per_block():
    # 4 types among 10 items: each is new once, whatever the order; block 0 charges 2 bits an item, the
    # half-on-feature probe 1 bit
    y = np.array([0, 1, 2, 3, 0, 1, 2, 3, 0, 1])
    types = np.array(list("aabbccddaa"))
    b = online_code(half_on_feature(4), y[:, None].astype(float), y, seed=3, validation_fraction=0.25,
                    fractions=(0.2, 0.5, 1.0), types=types).blocks
    assert b["new_type_items"].sum() == 4
    assert b["new_type_bits"].tolist() == pytest.approx((b["new_type_items"] * [2.0, 1.0, 1.0]).tolist())


def test_each_block_trains_and_stops_on_the_transmitted_prefix_only():
    n = 4000
    X = np.arange(n, dtype=float)[:, None]  # each item's feature is its name
    y = np.arange(n) % 3
    seen: list[tuple[set, set, set]] = []

    def spy(Xtr, ytr, Xva, yva, k, seed):
        record = (set(Xtr[:, 0].astype(int)), set(Xva[:, 0].astype(int)), set())
        seen.append(record)

        def log_proba(Xb):
            record[2].update(Xb[:, 0].astype(int))
            return np.full((len(Xb), k), -np.log(k))

        return log_proba, 1

    code = online_code(spy, X, y, seed=0, validation_fraction=0.2)
    assert code.codelength_bits == pytest.approx(n * np.log2(3))
    first = seen[0][0] | seen[0][1]  # block 0, sent uniformly
    assert len(first) == code.blocks["end"][0]
    sent = set(first)
    for tr, va, coded in seen:
        assert tr | va == sent and not tr & va  # trained and held out: the items already sent, split
        assert len(va) == validation_size(len(sent), 0.2) and not coded & sent
        sent |= coded
    assert sent == set(range(n))


def test_uniform_labels_cost_about_the_uniform_code():
    # labels unrelated to the features: under the configured regimen the held-out part keeps each block's
    # probe at or near the uniform code, so the online code stays within 1.5% of it
    rng = np.random.default_rng(5)
    n = 4000
    X, y = rng.normal(size=(n, 20)), rng.integers(0, 3, size=n)
    code = online_code(fit_softmax(MdlSettings.of(ProbeConfig())), X, y, seed=0, validation_fraction=0.1)
    assert 0.985 < code.compression <= 1.001
    assert (code.blocks["epochs"] == 0).sum() >= 5  # most small blocks keep the untrained, uniform probe


def test_constant_features_learn_the_label_frequencies_in_bits():
    # features carry nothing: the best probe is the prior (0.7, 0.2, 0.1), whose cross-entropy is
    # -0.7 log2 0.7 - 0.2 log2 0.2 - 0.1 log2 0.1 = 1.157 bits an item (0.802 nats)
    n = 10000
    y = np.repeat([0, 1, 2], [7000, 2000, 1000])
    code = online_code(fit_softmax(FAST), np.zeros((n, 2)), y, seed=1, validation_fraction=0.1)
    last = code.blocks.iloc[-1]
    h = -(0.7 * np.log2(0.7) + 0.2 * np.log2(0.2) + 0.1 * np.log2(0.1))
    assert last["bits"] / (last["end"] - last["start"]) == pytest.approx(h, abs=0.02)


def test_a_probe_worse_than_uniform_on_the_held_out_items_is_not_kept():
    # the held-out labels are the training rule reversed: every trained epoch is worse there than the
    # untrained probe, so training stops after patience (5) epochs and the uniform code is kept: ln(1/2)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(600, 1))
    Xtr, Xva = x[:500], x[500:]
    ytr, yva = (Xtr[:, 0] > 0).astype(int), (Xva[:, 0] <= 0).astype(int)
    log_proba, epoch = fit_softmax(FAST)(Xtr, ytr, Xva, yva, 2, 0)
    assert epoch == 0
    np.testing.assert_allclose(log_proba(Xva), np.log(0.5), rtol=1e-6)


def test_early_stopping_keeps_the_best_held_out_epoch():
    # 60 noisy training items of 21 features, one informative: the held-out loss is lowest at epoch 2 and
    # then rises; the weights kept are those a run stopped at epoch 2 ends with
    rng = np.random.default_rng(0)
    X = rng.normal(size=(260, 21))
    y = (X[:, 0] + rng.normal(size=260) > 0).astype(int)
    settings = MdlSettings(validation_fraction=0.1, lr=0.01, batch_size=16, max_epochs=40, patience=5)
    log_proba, epoch = fit_softmax(settings)(X[:60], y[:60], X[60:], y[60:], 2, 0)
    assert epoch == 2
    short = MdlSettings(validation_fraction=0.1, lr=0.01, batch_size=16, max_epochs=2, patience=5)
    again, same = fit_softmax(short)(X[:60], y[:60], X[60:], y[60:], 2, 0)
    assert same == 2
    np.testing.assert_allclose(log_proba(X[60:]), again(X[60:]), rtol=1e-6)


def test_codelength_falls_as_signal_is_planted():
    rng = np.random.default_rng(2)
    n, k = 3000, 3
    y = rng.integers(0, k, size=n)
    noise = rng.normal(size=(n, 5))
    codes = []
    for strength in (0.0, 1.0, 4.0):
        X = noise.copy()
        X[:, :k] += strength * np.eye(k)[y]
        codes.append(online_code(fit_softmax(FAST), X, y, seed=0, validation_fraction=0.1))
    bits = [c.codelength_bits for c in codes]
    assert bits[0] > bits[1] > bits[2]
    assert codes[2].compression > 3


def test_mdl_metrics_control_ratio():
    rng = np.random.default_rng(4)
    y = rng.integers(0, 3, size=2000)
    X = np.eye(3)[y] * 3 + rng.normal(size=(2000, 3))
    control = rng.integers(0, 3, size=2000)  # unrelated to X: harder to compress
    metrics, blocks = mdl_metrics(FAST, X, y, control, seed=0)
    assert metrics["codelength_ratio"] == pytest.approx(
        metrics["control_codelength_bits"] / metrics["codelength_bits"])
    assert metrics["codelength_ratio"] > 2
    assert set(blocks["labels"]) == {"task", "control"}
    assert blocks.groupby("labels")["bits"].sum()["task"] == pytest.approx(metrics["codelength_bits"])


def test_settings_come_from_the_probe_config_and_are_checked():
    s = MdlSettings.of(ProbeConfig(mdl_validation_fraction=0.2, mdl_patience=3))
    assert (s.validation_fraction, s.patience) == (0.2, 3)
    with pytest.raises(ValueError, match=r"probe.mdl_validation_fraction must lie in \(0, 1\), got 1.0"):
        MdlSettings.of(ProbeConfig(mdl_validation_fraction=1.0))
