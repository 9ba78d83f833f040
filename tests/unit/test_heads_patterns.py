"""Attention patterns and head distances on hand-made maps."""

import numpy as np
import pytest
from heads_store import build_store, synthetic_corpus
from scipy.spatial.distance import jensenshannon

from probing.config import PatternRows
from probing.heads.distances import distance_table, head_distances, js_distance_sums, mds_embedding, smacof
from probing.heads.patterns import METRICS, attention_patterns, layer_means, sentence_patterns


def test_patterns_hand_worked():
    # positions: [CLS] w0 w1 [SEP]; one layer, one head; w1 is punctuation
    a = np.zeros((1, 1, 4, 4))
    a[0, 0, 0] = [1, 0, 0, 0]
    a[0, 0, 1] = [0.5, 0.1, 0.4, 0.0]  # w0
    a[0, 0, 2] = [0.2, 0.3, 0.0, 0.5]  # w1
    a[0, 0, 3] = [0, 0, 0, 1]
    sums, counts = sentence_patterns(a, prefix=1, n_words=2, punct=np.array([False, True]), pattern_rows=PatternRows.words)
    mean = dict(zip(METRICS, sums[:, 0, 0] / counts))
    assert mean["cls"] == pytest.approx((0.5 + 0.2) / 2)
    assert mean["sep"] == pytest.approx((0.0 + 0.5) / 2)
    assert mean["sink"] == mean["cls"]  # the first position is [CLS]
    assert mean["punct"] == pytest.approx((0.4 + 0.0) / 2)
    assert mean["next"] == pytest.approx((0.4 + 0.5) / 2)  # w1's next position is [SEP]
    assert mean["prev"] == pytest.approx((0.5 + 0.3) / 2)  # w0's previous position is [CLS]
    assert mean["self"] == pytest.approx((0.1 + 0.0) / 2)
    h0 = -(0.5 * np.log(0.5) + 0.1 * np.log(0.1) + 0.4 * np.log(0.4))
    h1 = -(0.2 * np.log(0.2) + 0.3 * np.log(0.3) + 0.5 * np.log(0.5))
    assert mean["entropy"] == pytest.approx((h0 + h1) / 2)
    assert mean["uniform_entropy"] == pytest.approx(np.log(4))
    sums_all, counts_all = sentence_patterns(a, 1, 2, np.array([False, True]), PatternRows.all)
    assert counts_all[0] == 4 and sums_all[0, 0, 0] == pytest.approx(1 + 0.5 + 0.2)
    with pytest.raises(ValueError):
        sentence_patterns(a, 1, 2, np.array([False, True]), "some")


def test_sink_without_special_tokens_is_the_first_word():
    # a causal model whose tokenizer adds no BOS: positions w0 w1 w2, w2 punctuation
    a = np.zeros((1, 1, 3, 3))
    a[0, 0, 0] = [1, 0, 0]
    a[0, 0, 1] = [0.7, 0.3, 0]
    a[0, 0, 2] = [0.6, 0.1, 0.3]
    sums, counts = sentence_patterns(a, 0, 3, np.array([False, False, True]), PatternRows.words)
    mean = dict(zip(METRICS, sums[:, 0, 0] / counts))
    assert mean["sink"] == pytest.approx((1 + 0.7 + 0.6) / 3)
    assert mean["cls"] == 0 and mean["sep"] == 0 and mean["punct"] == pytest.approx(0.3 / 3)


def test_pattern_table_and_layer_means(tmp_path):
    corpus = synthetic_corpus(6, seed=0)
    store = build_store(tmp_path / "s", corpus)
    p = attention_patterns(store, corpus, store.indices, ["PUNCT"], PatternRows.words)
    assert len(p) == 6 and p["rows"].iloc[0] == sum(len(s) for s in corpus)
    prev = p[(p.layer == 1) & (p["head"] == 0)].iloc[0]  # the planted previous-position head
    assert prev["prev"] > 0.7
    lm = layer_means(p)
    assert lm.loc[lm.layer == 0, "cls"].iloc[0] == pytest.approx(p[p.layer == 0]["cls"].mean())


def test_js_distance_matches_scipy_and_identical_heads_are_at_zero():
    rng = np.random.default_rng(0)
    x = rng.random((4, 3, 6))
    x /= x.sum(-1, keepdims=True)
    x[3] = x[0]  # head 3 is a copy of head 0
    d = js_distance_sums(x)
    ref = np.array([[sum(jensenshannon(x[a, r], x[b, r], base=2) for r in range(3)) for b in range(4)]
                    for a in range(4)])
    assert np.allclose(d, ref, atol=1e-5)
    assert d[0, 3] == pytest.approx(0.0, abs=1e-6) and np.allclose(d, d.T)


def test_head_distances_and_mds_over_a_store(tmp_path):
    corpus = synthetic_corpus(5, seed=0)
    store = build_store(tmp_path / "s", corpus)
    dist, rows = head_distances(store, store.indices, block_rows=7)
    assert dist.shape == (6, 6) and rows == sum(len(s) for s in corpus)
    whole, _ = head_distances(store, store.indices, block_rows=10_000)
    assert np.allclose(dist, whole)  # batching rows does not change the mean
    assert (dist[~np.eye(6, dtype=bool)] > 0).all()
    t = distance_table(dist, 3)
    assert len(t) == 36 and t.loc[(t.layer_a == 0) & (t.head_a == 1) & (t.layer_b == 1) & (t.head_b == 2),
                                  "js_distance"].iloc[0] == pytest.approx(dist[1, 5])
    xy = mds_embedding(dist, 3, seed=0)
    assert list(xy.columns) == ["layer", "head", "x", "y"] and len(xy) == 6


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_smacof_gives_scikit_learns_metric_mds_coordinates(seed):
    from sklearn.manifold import MDS

    x = np.random.default_rng(seed).random((25, 4))
    d = np.sqrt(((x[:, None] - x[None]) ** 2).sum(-1))
    ref = MDS(n_components=2, metric="precomputed", init="random", n_init=4, random_state=seed).fit_transform(d)
    assert np.allclose(smacof(d, seed=seed), ref, rtol=0, atol=1e-12)  # bit for bit on one BLAS
