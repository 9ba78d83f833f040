"""``probe.features=hidden|heads``: relation and edge probes on pair vectors [x_i; x_j; x_i ⊙ x_j]
read from the representation stores; config keys of attention probes unchanged."""

from __future__ import annotations

import numpy as np
import pytest
from omegaconf import OmegaConf
from test_heads_task import Recorder
from test_store_extract import cfg, corpus

from probing.config import (
    DataConfig,
    DataKind,
    ExtractConfig,
    Features,
    LinearFit,
    ModelConfig,
    ProbeConfig,
    ProbeKind,
    Regimen,
    Representation,
)
from probing.errors import ProbingError
from probing.extract import extract
from probing.probes.features import pair_features, vector_selection, word_vectors
from probing.results import read_table
from probing.tasks import probe as probe_task
from probing.tasks.base import RunOutput


@pytest.fixture(scope="module")
def vector_stores(tiny_encoder, tmp_path_factory):
    c = corpus()
    root = tmp_path_factory.mktemp("vec")
    r = extract(tiny_encoder, c, cfg(root, representations=[Representation.hidden, Representation.heads],
                                     shard_mb=0))
    return c, r.stores[Representation.hidden], r.stores[Representation.heads]


def test_word_vectors_are_the_stored_word_slices(vector_stores):
    c, hid, heads = vector_stores
    rng = np.random.default_rng(0)
    sent = rng.choice(hid.indices, 30)
    pos = np.array([rng.integers(len(c[int(s)])) for s in sent])
    for store, layer, head in ((hid, 2, None), (heads, 1, 3), (heads, 0, None)):
        sel = vector_selection(store, layer, head)
        got = word_vectors(store, sent, pos, sel)
        for r, (s, w) in enumerate(zip(sent, pos)):
            x = store.words(int(s), layer)  # (n, D) or (H, n, d)
            want = x[w] if not store.per_head else (x[head, w] if head is not None else x[:, w].reshape(-1))
            np.testing.assert_array_equal(got[r], want)
    assert word_vectors(heads, sent, pos, vector_selection(heads, 0, None)).shape == (30, 4 * 8)


def test_pair_features_are_x_i_x_j_and_their_product(vector_stores):
    c, hid, heads = vector_stores
    sent, q, k = np.array([1, 5, 5]), np.array([0, 9, 2]), np.array([3, 1, 10])
    X, names = pair_features(heads, sent, q, k, vector_selection(heads, 1, 2), "both", [])
    xi = np.stack([heads.words(int(s), 1, 2)[i] for s, i in zip(sent, q)])
    xj = np.stack([heads.words(int(s), 1, 2)[j] for s, j in zip(sent, k)])
    np.testing.assert_array_equal(X, np.concatenate([xi, xj, xi * xj], 1))
    assert names[:2] == ["L1H2:i[0]", "L1H2:i[1]"] and names[8] == "L1H2:j[0]" and names[-1] == "L1H2:ij[7]"
    _, hnames = pair_features(hid, sent, q, k, vector_selection(hid, 0, None), "both", [])
    assert len(hnames) == 3 * 32 and hnames[0] == "L0:i[0]"
    with pytest.raises(ValueError, match="set probe.layer"):
        vector_selection(hid, None, None)
    with pytest.raises(ValueError, match="features=hidden has no heads"):
        vector_selection(hid, 1, 2)
    with pytest.raises(ValueError, match="neighbour_offsets reads attention maps"):
        pair_features(hid, sent, q, k, vector_selection(hid, 0, None), "both", [1])


def _run(tiny_model_dir, tmp_path, name, **kw):
    model = ModelConfig(name="tiny", name_or_path=str(tiny_model_dir))
    data = DataConfig(kind=DataKind.grammar, n_sentences=40)
    ext = OmegaConf.structured(ExtractConfig(cache_dir=str(tmp_path / "cache"), progress=False))
    p = ProbeConfig(linear=LinearFit(max_iter=200), regimen=Regimen(), **kw)
    return probe_task.run(model, data, ext, p, 0, RunOutput(tmp_path / name, Recorder()))


def test_probe_task_on_vector_features(tiny_model_dir, tmp_path):
    hid = _run(tiny_model_dir, tmp_path, "hid", kind=ProbeKind.relation, features=Features.hidden, layer=2)
    assert hid.metrics["measure"] is None and hid.metrics["features"] == "hidden"
    assert hid.metrics["n_features"] == 3 * 32 and hid.metrics["head_set"] == "L2"
    assert [s["measure"] for s in hid.stores] == ["hidden"]
    assert set(read_table(tmp_path / "hid", "relation_weights")["features"]) == {"hidden"}
    one = _run(tiny_model_dir, tmp_path, "head", kind=ProbeKind.edge, features=Features.heads, layer=1, head=3)
    assert one.metrics["n_features"] == 3 * 8 and one.metrics["head_set"] == "L1H3"
    assert 0.0 <= one.metrics["roc_auc"] <= 1.0 and one.metrics["config_key"] != hid.metrics["config_key"]
    # a sweep over layers and heads reads the one extraction
    layer0 = _run(tiny_model_dir, tmp_path, "layer0", kind=ProbeKind.edge, features=Features.heads, layer=0)
    assert layer0.metrics["n_features"] == 3 * 4 * 8 and layer0.metrics["head_set"] == "L0"
    assert layer0.stores[0]["reused"] and layer0.stores[0]["store_dir"] == one.stores[0]["store_dir"]
    with pytest.raises(ProbingError, match="probe=arc reads attention maps"):
        _run(tiny_model_dir, tmp_path, "arc", kind=ProbeKind.arc, features=Features.hidden, layer=1)
    with pytest.raises(ProbingError, match="set probe.layer"):
        _run(tiny_model_dir, tmp_path, "nolayer", kind=ProbeKind.relation, features=Features.heads)


def test_attention_probe_config_keys_ignore_the_new_keys_at_their_defaults():
    """extract.representations never changes a probe's key (it only builds stores beside), nor does
    model.init_seed without random_init; the features read and the run's seed do."""
    from dataclasses import replace

    m = ModelConfig(name="tiny", name_or_path="/x/tiny")
    d = DataConfig(kind=DataKind.grammar, n_sentences=40)
    e = ExtractConfig(cache_dir="c", progress=False)
    p = ProbeConfig(kind=ProbeKind.relation, linear=LinearFit(max_iter=200))
    key = probe_task.config_key(m, d, e, p, 0)
    assert probe_task.config_key(m, d, replace(e, representations=[Representation.hidden]), p, 0) == key
    assert probe_task.config_key(replace(m, init_seed=7), d, e, p, 0) == key
    assert probe_task.config_key(m, d, e, p, 1) != key
    assert probe_task.config_key(m, d, e, replace(p, features=Features.hidden), 0) != key
    rand = replace(m, random_init=True)
    assert len({key, probe_task.config_key(rand, d, e, p, 0),
                probe_task.config_key(replace(rand, init_seed=7), d, e, p, 0)}) == 3


def test_the_relation_control_is_learnable_from_the_embeddings(tiny_model_dir, tmp_path):
    """The control labels a function of the dependent's type: from layer 0 (the embeddings, where a word's own
    vector names its type) a probe learns them far above the majority class on held-out sentences."""
    model = ModelConfig(name="tiny", name_or_path=str(tiny_model_dir))
    data = DataConfig(kind=DataKind.grammar, n_sentences=300)
    ext = OmegaConf.structured(ExtractConfig(cache_dir=str(tmp_path / "cache"), progress=False))
    p = ProbeConfig(linear=LinearFit(max_iter=500), features=Features.hidden, layer=0)
    m = probe_task.run(model, data, ext, p, 0, RunOutput(tmp_path / "control", Recorder())).metrics
    assert m["control_accuracy"] > 1.5 * m["control_majority_accuracy"], m
