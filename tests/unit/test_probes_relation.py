"""Relation and edge probes recover a planted signal; on random attention they sit at the baselines."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from probes_synth import LABELS, probe_cfg, splits, tree_corpus, write_store

from probing.probes.data import subsample_sentences
from probing.probes.edge import edge_pairs, run_edge
from probing.probes.features import select_heads
from probing.probes.pairs import corpus_words
from probing.probes.relation import run_relation

PUNCT = ("PUNCT",)  # the config default (ProbeConfig.punct_upos)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    corpus = tree_corpus(300, seed=5)
    d = tmp_path_factory.mktemp("stores")
    return (corpus, splits(corpus, write_store(corpus, d / "planted", seed=6)),
            splits(corpus, write_store(corpus, d / "random", seed=6, plant=False)))


def test_relation_probe_recovers_planted_labels(data):
    _, planted, _ = data
    r = run_relation(probe_cfg(), *planted, select_heads(2, 4, layer=1, head=None), 0)
    m = r.metrics
    assert m["accuracy"] > 0.95 and m["macro_f1"] > 0.9
    assert m["majority_accuracy"] == pytest.approx(0.55, abs=0.08)
    assert m["selectivity"] == pytest.approx(m["accuracy"] - m["control_accuracy"])
    assert m["selectivity"] > 0.3  # control labels are types' random labels: attention cannot predict them
    f1 = r.tables["relation_f1"].set_index("relation")["f1"]
    assert set(f1.index) == set(LABELS) and (f1 > 0.85).all()
    assert r.tables["confusion"]["count"].sum() == m["n_eval"]


def test_relation_probe_on_random_attention_is_the_majority_baseline(data):
    _, _, noise = data
    m = run_relation(probe_cfg(), *noise, select_heads(2, 4, layer=1, head=None), 0).metrics
    assert abs(m["accuracy"] - m["majority_accuracy"]) < 0.06


def test_relation_probe_is_reproducible_and_subsamples(data):
    _, planted, _ = data
    cfg = replace(probe_cfg(), neighbour_offsets=[-1, 1])
    train, ev = planted
    few = subsample_sentences(train, 20, 0)
    assert len(few.indices) == 20 and few.name.endswith("[20 of 240 sentences]")
    a = run_relation(cfg, few, ev, select_heads(2, 4, layer=1, head=None), 0).metrics
    b = run_relation(cfg, subsample_sentences(train, 20, 0), ev, select_heads(2, 4, layer=1, head=None), 0).metrics
    assert a == b and a["n_features"] == 4 * 2 * 3
    # one arc per non-root, non-punctuation word of the 20 sentences (punctuation is excluded by default)
    assert a["n_train"] == sum(sum(h >= 0 and u != "PUNCT" for h, u in zip(s.heads, s.upos))
                               for s in (train.corpus[int(i)] for i in few.indices))


def test_edge_pairs_are_balanced_and_negatives_are_not_arcs(data):
    corpus, planted, _ = data
    words = corpus_words(corpus, planted[0].indices, False, PUNCT)
    sent, a, b, y, ta, tb = edge_pairs(words, True, 1, seed=0)
    assert (a < b).all() and 0.5 <= y.mean() < 0.56  # short sentences run out of negatives
    arcs = {(int(s), min(i, h), max(i, h)) for s in np.unique(sent)
            for i, h in enumerate(corpus[int(s)].heads) if h >= 0}
    for s, i, j, lab in zip(sent, a, b, y):
        assert ((int(s), int(i), int(j)) in arcs) == bool(lab)
    assert ta[0] == corpus[int(sent[0])].words[a[0]].lower()


def test_edge_probe_planted_vs_random(data):
    _, planted, noise = data
    m = run_edge(probe_cfg(kind="edge"), *planted, select_heads(2, 4, layer=0, head=0), 0).metrics
    assert m["roc_auc"] > 0.95 and m["accuracy"] > 0.9 and m["selectivity"] > 0.1
    # the control arcs follow word-type attachment rules the planted attention knows nothing of
    assert m["control_accuracy"] <= m["control_majority_accuracy"] + 0.05
    m0 = run_edge(probe_cfg(kind="edge"), *noise, select_heads(2, 4, layer=0, head=0), 0).metrics
    assert abs(m0["roc_auc"] - 0.5) < 0.1
