"""probe.mdl on the relation and edge probes: codelengths of task and control labels in metrics.json keys.
The synthetic splits are small (200 sentences), so the blocks' probes learn at a higher rate than the default
to fit within their epochs."""

from __future__ import annotations

import numpy as np
import pytest
from probes_synth import probe_cfg, splits, tree_corpus, write_store

from probing.probes.edge import run_edge
from probing.probes.features import select_heads
from probing.probes.relation import relation_data, run_relation


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    corpus = tree_corpus(200, seed=5)
    d = tmp_path_factory.mktemp("mdl_stores")
    return (splits(corpus, write_store(corpus, d / "planted", seed=6)),
            splits(corpus, write_store(corpus, d / "random", seed=6, plant=False)))


def test_relation_mdl_codes_planted_labels_shorter_than_noise_and_control(data):
    planted, noise = data
    sel = select_heads(2, 4, layer=1, head=None)
    m = run_relation(probe_cfg(mdl=True, mdl_lr=0.05), *planted, sel, 0).metrics
    r = run_relation(probe_cfg(mdl=True, mdl_lr=0.05), *noise, sel, 0)
    k = m["n_classes"]
    assert m["uniform_codelength_bits"] == pytest.approx(m["n_train"] * np.log2(k))
    assert m["codelength_bits"] < r.metrics["codelength_bits"]
    assert m["compression"] > 2 > r.metrics["compression"]
    assert m["codelength_ratio"] == pytest.approx(m["control_codelength_bits"] / m["codelength_bits"])
    assert m["codelength_ratio"] > 1.5  # attention says nothing about the type-hashed control labels
    blocks = r.tables["mdl_blocks"]
    assert blocks.groupby("labels")["bits"].sum()["task"] == pytest.approx(r.metrics["codelength_bits"])
    # each dependent word type of the training arcs is new to the code exactly once, in both codes
    arcs, _, _ = relation_data(probe_cfg(), noise[0], sel)
    assert (blocks.groupby("labels")["new_type_items"].sum() == len(set(arcs.word))).all()
    assert "codelength_bits" not in run_relation(probe_cfg(), *planted, sel, 0).metrics  # mdl off by default


def test_edge_mdl_keys_and_planted_signal(data):
    planted, noise = data
    sel = select_heads(2, 4, layer=0, head=0)
    planted_run = run_edge(probe_cfg(mdl=True, mdl_lr=0.05), *planted, sel, 0)
    m = planted_run.metrics
    r = run_edge(probe_cfg(mdl=True, mdl_lr=0.05), *noise, sel, 0).metrics
    assert {"codelength_bits", "compression", "control_codelength_bits"} <= set(m)
    assert m["uniform_codelength_bits"] == pytest.approx(m["n_train"])  # binary: one bit a pair
    assert m["codelength_bits"] < r["codelength_bits"]
    assert m["compression"] > 1.5 and r["compression"] < 1.1
    assert planted_run.tables["mdl_blocks"]["new_type_items"].isna().all()  # a pair has no one word type
