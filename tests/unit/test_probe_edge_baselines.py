"""The edge probe's distance baseline and its negatives matched for distance (``probe.negatives``)."""

from __future__ import annotations

import numpy as np
import pytest
from omegaconf import OmegaConf
from probes_synth import probe_cfg, splits, tree_corpus, write_store
from test_heads_task import Recorder

from probing.compose import compose_run
from probing.config import (
    DataConfig,
    DataKind,
    ExtractConfig,
    LinearFit,
    ModelConfig,
    Negatives,
    ProbeConfig,
    ProbeKind,
)
from probing.errors import ProbingError
from probing.probes.edge import distance_matched, distance_tv, edge_pairs, run_edge
from probing.probes.features import select_heads
from probing.probes.pairs import corpus_words, gold_arcs
from probing.results import read_table
from probing.tasks import probe as probe_task
from probing.tasks.base import RunOutput

PUNCT = ("PUNCT",)


@pytest.fixture(scope="module")
def corpus():
    return tree_corpus(120, seed=21)


@pytest.fixture(scope="module")
def planted(corpus, tmp_path_factory):
    return splits(corpus, write_store(corpus, tmp_path_factory.mktemp("store"), seed=22))


def test_distance_matched_draws_as_many_per_distance_as_the_gold_arcs():
    pool = np.array([1, 1, 1, 2, 2, 3, 5, 5, 5, 5])
    gold = np.array([1, 2, 2, 2, 5, 4])  # distance 2: three wanted, two in the pool; 4: none in the pool
    pick = distance_matched(pool, gold, 1, np.random.default_rng(0))
    assert np.all(np.diff(pick) >= 0)
    assert np.bincount(pool[pick], minlength=6).tolist() == [0, 1, 3, 0, 0, 1]
    # both distance-2 candidates are drawn before either repeats; distance 1 and 5 draw distinct candidates
    assert set(pick[pool[pick] == 2]) == {3, 4} and len(set(pick[pool[pick] != 2])) == 2
    pick2 = distance_matched(pool, gold, 2, np.random.default_rng(0))
    assert np.bincount(pool[pick2], minlength=6).tolist() == [0, 2, 6, 0, 0, 2]
    assert len(set(pick2[pool[pick2] == 5])) == 2


def test_distance_matched_negatives_have_the_gold_arcs_distance_histogram(corpus):
    words = corpus_words(corpus, range(len(corpus)), False, PUNCT)
    for per in (1, 2):
        s, a, b, y, _, _ = edge_pairs(words, True, per, 0, Negatives.distance_matched)
        d = b - a
        pos, neg = np.bincount(d[y == 1], minlength=d.max() + 1), np.bincount(d[y == 0], minlength=d.max() + 1)
        assert neg.tolist() == (per * pos).tolist()
        assert distance_tv(d, y) == 0.0
        # negatives are distinct non-arcs of their sentence, punctuation excluded
        arcs = gold_arcs(words, False)
        gold = set(zip(arcs.sent, np.minimum(arcs.pos, arcs.head), np.maximum(arcs.pos, arcs.head)))
        negs = list(zip(s[y == 0], a[y == 0], b[y == 0]))
        assert not gold & set(negs)
        assert not words.punct[np.searchsorted(words.sent, s[y == 0]) + b[y == 0]].any()
    # uniform negatives are farther apart than arcs: the distances differ
    _, a, b, y, _, _ = edge_pairs(words, True, 1, 0, Negatives.uniform)
    assert distance_tv(b - a, y) > 0.2


def test_distance_tv_by_hand():
    # positives at distances 1, 1, 2; negatives at 1, 3: TV = (|2/3 - 1/2| + |1/3 - 0| + |0 - 1/2|) / 2 = 1/2
    assert distance_tv(np.array([1, 1, 2, 1, 3]), np.array([1, 1, 1, 0, 0])) == pytest.approx(0.5)


def test_edge_probe_distance_baseline_and_margin(planted):
    sel = select_heads(2, 4, layer=0, head=0)
    m = run_edge(probe_cfg(kind="edge", control=False), *planted, sel, 0).metrics
    assert m["baseline_distance_roc_auc"] > 0.6  # arcs are shorter than uniform non-arcs
    assert m["margin"] == pytest.approx(m["roc_auc"] - m["baseline_distance_roc_auc"])
    assert m["margin_baseline"] == "baseline_distance_roc_auc"
    r = run_edge(probe_cfg(kind="edge", control=False, negatives=Negatives.distance_matched), *planted, sel, 0)
    mm = r.metrics
    # equal distance histograms: any score of distance alone ranks arcs at exactly chance
    assert mm["negative_distance_tv"] == 0.0 and mm["baseline_distance_roc_auc"] == pytest.approx(0.5)
    assert m["negative_repeat_share"] == 0.0 < mm["negative_repeat_share"] < 0.15
    assert mm["margin"] == pytest.approx(mm["roc_auc"] - 0.5) and mm["roc_auc"] > 0.9
    assert r.terms["margin"].under(np.ones(len(planted[1].indices)))[0] == pytest.approx(mm["margin"])


def test_probe_negatives_is_a_closed_set():
    assert compose_run(["task=probe", "probe=edge"]).probe.negatives == Negatives.uniform
    with pytest.raises(ProbingError, match=r"^probe\.negatives=closest: .*uniform, distance_matched"):
        compose_run(["task=probe", "probe=edge", "probe.negatives=closest"])


def test_task_probe_gives_the_edge_margin_an_interval_over_sentences(tiny_model_dir, tmp_path):
    model = ModelConfig(name="tiny", name_or_path=str(tiny_model_dir))
    ext = OmegaConf.structured(ExtractConfig(cache_dir=str(tmp_path / "cache"), progress=False))
    p = ProbeConfig(kind=ProbeKind.edge, linear=LinearFit(max_iter=200), seeds=2, bootstrap=200,
                    negatives=Negatives.distance_matched)
    m = probe_task.run(model, DataConfig(kind=DataKind.grammar, n_sentences=40), ext, p, 0,
                       RunOutput(tmp_path / "edge", Recorder())).metrics
    assert m["negative_distance_tv"] == 0.0 and m["baseline_distance_roc_auc"] == pytest.approx(0.5)
    table = read_table(tmp_path / "edge", "probe_scores").set_index("metric")
    lo, hi = table.loc["margin", ["sentences_ci_low", "sentences_ci_high"]]
    assert lo < table.loc["margin", "value"] < hi
    assert table.loc["margin", "value"] == pytest.approx(m["roc_auc"] - 0.5)
