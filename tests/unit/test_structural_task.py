"""task=probe probe=distance|depth: structural probes on stored hidden / head vectors, end to end on
a tiny random BERT; the probe settings that change the numbers change the config key."""

from __future__ import annotations

from dataclasses import replace

import pytest
from omegaconf import OmegaConf
from test_heads_task import Recorder

from probing import schema
from probing.config import (
    DataConfig,
    DataKind,
    ExtractConfig,
    Features,
    ModelConfig,
    ProbeConfig,
    ProbeKind,
    Regimen,
)
from probing.errors import ProbingError
from probing.results import read_table
from probing.tasks import probe as probe_task
from probing.tasks.base import RunOutput


def _run(tiny_model_dir, tmp_path, name, **kw):
    model = ModelConfig(name="tiny", name_or_path=str(tiny_model_dir))
    data = DataConfig(kind=DataKind.grammar, n_sentences=40)
    ext = OmegaConf.structured(ExtractConfig(cache_dir=str(tmp_path / "cache"), progress=False))
    kw.setdefault("regimen", Regimen())
    return probe_task.run(model, data, ext, ProbeConfig(**kw), 0, RunOutput(tmp_path / name, Recorder()))


def test_distance_and_depth_probes_end_to_end(tiny_model_dir, tmp_path):
    dist = _run(tiny_model_dir, tmp_path, "dist", kind=ProbeKind.distance, features=Features.hidden, layer=2)
    m = dist.metrics
    assert 0.0 <= m["uuas"] <= 1.0 and -1.0 <= m["dspr"] <= 1.0
    assert m["objective"] == m["uuas"] and m["rank"] == 32 and m["features"] == "hidden" and m["measure"] is None
    assert m["stop_split"] == m["eval_split"]  # single-split data: stopped on the held-out part
    by_len = read_table(tmp_path / "dist", "structural_by_length")
    assert set(by_len["metric"]) == {"dspr"} and set(by_len.columns) >= set(schema.STRUCTURAL_BY_LENGTH.keys)
    table = read_table(tmp_path / "dist", schema.PROBE_SCORES.name).set_index("metric")
    scores = table["value"]
    assert scores["uuas"] == pytest.approx(m["uuas"])
    # intervals over eval sentences for the headline metrics only, around the mean of the seeds
    for k in ("uuas", "dspr"):
        lo, hi = table.loc[k, ["sentences_ci_low", "sentences_ci_high"]]
        assert lo < hi and lo <= scores[k] <= hi and m["seeds"]["sentences_ci"][k] == [lo, hi]
    assert table.loc[["rank", "epochs"], "sentences_ci_low"].isna().all()
    # the console's headline, printed last, names the probe, what it read and its scores
    assert dist.console.startswith("probe=distance features=hidden head_set=L2 (")
    assert f"uuas={m['uuas']:.4f}" in dist.console and f"dspr={m['dspr']:.4f}" in dist.console
    depth = _run(tiny_model_dir, tmp_path, "depth", kind=ProbeKind.depth, features=Features.heads, layer=1,
                 rank=4)
    d = depth.metrics
    assert 0.0 <= d["root_accuracy"] <= 1.0 and d["rank"] == 4 and d["n_features"] == 4 * 8
    assert d["objective"] == d["root_accuracy"]


def test_structural_probe_needs_vectors(tiny_model_dir, tmp_path):
    with pytest.raises(ProbingError, match="probe=distance reads word vectors: set probe.features=hidden or heads"):
        _run(tiny_model_dir, tmp_path, "att", kind=ProbeKind.distance, layer=1)


def test_structural_probe_keys_change_the_config_key():
    m = ModelConfig(name="tiny", name_or_path="/x/tiny")
    d = DataConfig(kind=DataKind.grammar, n_sentences=40)
    e = ExtractConfig(cache_dir="c", progress=False)
    p = ProbeConfig(kind=ProbeKind.relation)
    key = probe_task.config_key(m, d, e, p, 0)
    assert probe_task.config_key(m, d, e, replace(p, mdl=True), 0) != key
    assert probe_task.config_key(m, d, e, replace(p, rank=8), 0) != key


def test_max_train_sentences_is_a_seeded_subsample_of_whole_sentences():
    import numpy as np

    from probing.probes.data import ProbeSplit, sample_sentences, subsample_sentences

    split = ProbeSplit("train", None, None, np.array([10, 11, 12, 13, 14, 15]))
    assert subsample_sentences(split, None, 0) is split and subsample_sentences(split, 6, 0) is split
    got = subsample_sentences(split, 2, 0)
    # numpy's seeded choice of 2 of 6, sorted
    assert list(got.indices) == [10 + i for i in sorted(np.random.default_rng(0).choice(6, 2, replace=False))]
    assert got.name == "train[2 of 6 sentences]" and list(subsample_sentences(split, 2, 0).indices) == list(got.indices)
    with pytest.raises(ValueError, match="probe.max_train_sentences must be positive, got 0"):
        subsample_sentences(split, 0, 0)
    assert list(sample_sentences(3, 5, 1, "k")) == [0, 1, 2]



def test_word_offset_represents_each_word_by_its_neighbours_vector(tiny_model_dir, tmp_path):
    """probe.word_offset=-1 (a positional control): word i reads word i-1's vector, the first word its own."""
    import numpy as np

    from probing.config import Representation
    from probing.probes.features import vector_selection
    from probing.probes.structural.run import split_sentences

    model = ModelConfig(name="tiny", name_or_path=str(tiny_model_dir))
    data = DataConfig(kind=DataKind.grammar, n_sentences=12)
    ext = OmegaConf.structured(ExtractConfig(cache_dir=str(tmp_path / "cache"), progress=False))
    p = ProbeConfig(kind=ProbeKind.distance, features=Features.hidden, layer=2, regimen=Regimen())
    _, ev, _ = probe_task.load_splits(data, p, ext, probe_task._Stores(model, ext, Representation.hidden))
    sel = vector_selection(ev.store, 2, None)
    own, left = split_sentences(p, ev, sel), split_sentences(replace(p, word_offset=-1), ev, sel)
    for start, n in zip(own.starts, own.lengths):
        rows = own.vectors[start:start + n]
        np.testing.assert_array_equal(left.vectors[start:start + n], rows[np.maximum(np.arange(n) - 1, 0)])
    np.testing.assert_array_equal(left.heads, own.heads)
    with pytest.raises(ProbingError, match="probe.word_offset=1 applies to probe=distance and probe=depth, not "
                                           "probe=relation"):
        _run(tiny_model_dir, tmp_path, "rel", kind=ProbeKind.relation, features=Features.hidden, layer=1,
             word_offset=1)
