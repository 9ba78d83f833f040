"""Pair features read from a store: every value against direct indexing of the maps."""

from __future__ import annotations

import numpy as np
import pytest
from probes_synth import tree_corpus, write_store

from probing.config import FeatureSet
from probing.probes.features import gather, pair_features, root_features, select_heads
from probing.probes.pairs import candidates, corpus_words, dependents, gold_arcs

PUNCT = ("PUNCT",)  # the config default (ProbeConfig.punct_upos)


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    corpus = tree_corpus(12, seed=1)
    return corpus, write_store(corpus, tmp_path_factory.mktemp("store"), seed=2, plant=False)


def test_select_heads():
    sel = select_heads(2, 4, layer=1, head=None)
    assert sel.labels == ["L1H0", "L1H1", "L1H2", "L1H3"]
    assert select_heads(2, 4, layer=None, head=2).labels == ["L0H2", "L1H2"]
    assert len(select_heads(2, 4, None, None)) == 8 and select_heads(2, 4, 0, 3).labels == ["L0H3"]
    with pytest.raises(ValueError, match="probe.layer=2 is out of range"):
        select_heads(2, 4, layer=2, head=None)
    with pytest.raises(ValueError, match="probe.head=-1"):
        select_heads(2, 4, layer=None, head=-1)


def test_gather_matches_maps(synth):
    corpus, store = synth
    rng = np.random.default_rng(0)
    sent = rng.integers(0, len(corpus), 200)
    m = store.m[sent]
    q, k = rng.integers(0, m), rng.integers(0, m)
    sel = select_heads(2, 4, None, None)
    got = gather(store, sent, q, k, sel)
    want = np.stack([store.maps(s)[:, :, a, b].reshape(-1) for s, a, b in zip(sent, q, k)])
    np.testing.assert_array_equal(got, want)
    # positions outside the sentence read as 0
    out = gather(store, sent[:3], np.array([-1, 0, m[2]]), np.array([0, m[1], 0]), sel)
    assert (out == 0).all()


def test_pair_features_with_offsets(synth):
    corpus, store = synth
    arcs = gold_arcs(corpus_words(corpus, store.indices, False, PUNCT), exclude_punct=False)
    sel = select_heads(2, 4, layer=0, head=1)
    X, names = pair_features(store, arcs.sent, arcs.pos, arcs.head, sel, FeatureSet.both, [-1])
    assert names == ["L0H1:fwd", "L0H1:bwd", "L0H1:fwd-1", "L0H1:bwd-1"]
    for r in range(len(arcs)):
        w = store.words(int(arcs.sent[r]), 0, 1)
        i, j = int(arcs.pos[r]), int(arcs.head[r])
        expect = [w[i, j], w[j, i], w[i, j - 1] if j >= 1 else 0.0, w[j, i - 1] if i >= 1 else 0.0]
        np.testing.assert_array_equal(X[r], np.asarray(expect, dtype=np.float32))
    Xf, nf = pair_features(store, arcs.sent, arcs.pos, arcs.head, sel, FeatureSet.forward, [])
    assert nf == ["L0H1:fwd"] and np.array_equal(Xf[:, 0], X[:, 0])


def test_root_features_sum_and_mean_of_specials(synth):
    corpus, store = synth
    deps = dependents(corpus_words(corpus, store.indices[:4], False, PUNCT), exclude_punct=False)
    sel = select_heads(2, 4, layer=1, head=None)
    R, names = root_features(store, deps.sent, deps.pos, sel, FeatureSet.both)
    assert names[0] == "L1H0:fwd:root" and names[4] == "L1H0:bwd:root"
    for r in range(len(deps)):
        a = store.maps(int(deps.sent[r]))[1].astype(np.float64)
        p = 1 + int(deps.pos[r])
        np.testing.assert_allclose(R[r, :4], a[:, p, 0] + a[:, p, -1], rtol=1e-6)
        np.testing.assert_allclose(R[r, 4:], (a[:, 0, p] + a[:, -1, p]) / 2, rtol=1e-6)


def test_candidates_and_local_index(synth):
    corpus, store = synth
    deps = dependents(corpus_words(corpus, [0], False, PUNCT), exclude_punct=False)
    n = len(corpus[0])
    cand = candidates(deps)
    assert list(cand.sizes) == [n - 1] * n
    assert list(cand.key[: n - 1]) == list(range(1, n))  # word 0's candidates: every other word
    assert list(cand.key[n - 1: 2 * (n - 1)]) == [0] + list(range(2, n))
    local = cand.local_index(deps.head)
    heads_back = np.where(local >= 0, cand.key[cand.starts + np.maximum(local, 0)], -1)
    assert list(heads_back) == list(corpus[0].heads)
