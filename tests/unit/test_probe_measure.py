"""``probe.measure``: the probe task reads the stores of the chosen measure (built beside the attention store),
names it in its config key, metrics and tables, and a per-layer measure offers one "head" per layer."""

from __future__ import annotations

import numpy as np
import pytest
from omegaconf import OmegaConf
from test_heads_task import Recorder

from probing.config import (
    DataConfig,
    DataKind,
    ExtractConfig,
    LinearFit,
    Measure,
    ModelConfig,
    ProbeConfig,
    ProbeKind,
    Regimen,
)
from probing.errors import ProbingError
from probing.probes.features import select_heads
from probing.results import read_table
from probing.tasks import probe as probe_task
from probing.tasks.base import RunOutput


def _inputs(tiny_model_dir, tmp_path):
    model = ModelConfig(name="tiny", name_or_path=str(tiny_model_dir))
    data = DataConfig(kind=DataKind.grammar, n_sentences=40)
    ext = OmegaConf.structured(ExtractConfig(cache_dir=str(tmp_path / "cache"), progress=False))
    return model, data, ext


def _run(tiny_model_dir, tmp_path, name, **kw):
    model, data, ext = _inputs(tiny_model_dir, tmp_path)
    kw.setdefault("seeds", 1)  # one fit: the direct call below is compared with it number for number
    p = ProbeConfig(kind=ProbeKind.relation, linear=LinearFit(max_iter=200), **kw)
    return probe_task.run(model, data, ext, p, 0, RunOutput(tmp_path / name, Recorder()))


def test_probe_reads_the_store_of_probe_measure(tiny_model_dir, tmp_path):
    att = _run(tiny_model_dir, tmp_path, "att")
    norm = _run(tiny_model_dir, tmp_path, "norm", measure=Measure.norm)
    assert [s["measure"] for s in norm.stores] == ["norm"] and norm.metrics["measure"] == "norm"
    assert att.metrics["measure"] == "attention" and att.metrics["config_key"] != norm.metrics["config_key"]
    for name in ("probe_scores", "relation_f1", "relation_weights"):
        assert set(read_table(tmp_path / "norm", name)["measure"]) == {"norm"}, name
    assert att.metrics["accuracy"] != norm.metrics["accuracy"] or att.metrics["macro_f1"] != norm.metrics["macro_f1"]

    # the same probe handed the norm store directly gives the task's numbers
    model, data, ext = _inputs(tiny_model_dir, tmp_path)
    store = probe_task.ensure_store(model, probe_task.load_corpus_cached(data, None, ext.cache_dir), ext,
                                    Measure.norm).store
    p = ProbeConfig(kind=ProbeKind.relation, linear=LinearFit(max_iter=200))
    train, ev, _ = probe_task.load_splits(data, p, ext, lambda corpus: store)
    direct = probe_task.run_relation(p, train, ev, select_heads(store.num_layers, store.num_heads, None, None), 0)
    for k, v in direct.metrics.items():
        if isinstance(v, float):
            assert norm.metrics[k] == pytest.approx(v, abs=0, rel=0), k


def test_a_per_layer_measure_has_one_head_per_layer(tiny_model_dir, tmp_path):
    sel = select_heads(2, 1, None, None)
    assert sel.layers.tolist() == [0, 1] and sel.heads.tolist() == [0, 0]
    alti = _run(tiny_model_dir, tmp_path, "alti", measure=Measure.alti)
    assert alti.metrics["n_heads"] == 2 and alti.metrics["measure"] == "alti"
    one = _run(tiny_model_dir, tmp_path, "alti_l1", measure=Measure.alti, layer=1, head=0)
    assert one.metrics["n_heads"] == 1 and np.isfinite(one.metrics["accuracy"])
    with pytest.raises(ProbingError, match=r"probe.measure=alti has one map per layer: probe.head must be unset "
                                           r"or 0, not 2$"):
        _run(tiny_model_dir, tmp_path, "bad", measure=Measure.alti, head=2)


def test_config_key_has_the_measure_read_not_the_other_stores_built():
    from probing.config import ProbeConfig, RunConfig

    c = OmegaConf.structured(RunConfig(probe=ProbeConfig()))

    def key():
        return probe_task.config_key(c.model, c.data, c.extract, c.probe, c.seed)

    base = key()
    c.extract.measures = [Measure.attention, Measure.norm]  # another store beside it: the same numbers
    assert key() == base
    c.probe.measure = Measure.norm
    assert key() != base


def test_a_probe_is_fitted_with_several_seeds_and_reports_their_interval(tiny_model_dir, tmp_path):
    first = _run(tiny_model_dir, tmp_path, "s3", seeds=3).metrics
    spread = first["seeds"]
    assert spread["seeds"] == [0, 1, 2] and spread["level"] == 0.95
    control = spread["values"]["control_accuracy"]
    assert len(set(control)) > 1  # each seed is another control function (and another fit)
    assert first["control_accuracy"] == pytest.approx(sum(control) / 3)
    lo, hi = spread["ci"]["control_accuracy"]
    assert lo < first["control_accuracy"] < hi
    table = read_table(tmp_path / "s3", "probe_scores").set_index("metric")
    assert table.loc["control_accuracy", "n_seeds"] == 3
    assert table.loc["control_accuracy", "ci_low"] == pytest.approx(lo)
    again = _run(tiny_model_dir, tmp_path, "s3again", seeds=3).metrics
    assert again["seeds"]["values"] == spread["values"]  # the same seeds repeat the numbers


def test_a_probe_run_as_parts_extracts_its_part_then_probes_the_whole_store(tiny_model_dir, tmp_path):
    """task=probe with extract.partition: each job extracts its part and says which parts are left; the job
    that completes the store probes it, with the numbers of a run on a store built at once."""
    from dataclasses import replace

    model, data, ext = _inputs(tiny_model_dir, tmp_path)
    p = ProbeConfig(kind=ProbeKind.relation, linear=LinearFit(max_iter=200), seeds=1)
    parts = OmegaConf.structured(replace(OmegaConf.to_object(ext), partitions=2, block_sentences=16))

    def job(k, name):
        parts.partition = k
        return probe_task.run(model, data, parts, p, 0, RunOutput(tmp_path / name, Recorder()))

    first = job(1, "part1")
    assert first.metrics["complete"] is False and first.metrics["parts_pending"] == [0]
    assert first.metrics["waiting"] == ["grammar seed0"] and "accuracy" not in first.metrics
    assert "parts [0] are not done yet" in first.console
    last = job(0, "part0")
    whole = _run(tiny_model_dir, tmp_path / "once", "once")
    assert last.metrics["accuracy"] == whole.metrics["accuracy"] and last.metrics["n_eval"] == whole.metrics["n_eval"]
    assert last.metrics["macro_f1"] == whole.metrics["macro_f1"]


def test_a_part_run_refuses_early_stopping_on_the_training_split_before_extracting(tiny_model_dir, tmp_path):
    model, _, ext = _inputs(tiny_model_dir, tmp_path)
    ext.partitions, ext.partition = 2, 0
    p = ProbeConfig(kind=ProbeKind.distance, features="hidden", layer=1, dev_split="train", regimen=Regimen())
    with pytest.raises(ProbingError, match="probe.dev_split=train is the training split"):
        probe_task.run(model, DataConfig(kind=DataKind.ud_ewt, dir=str(tmp_path / "none")), ext, p, 0,
                       RunOutput(tmp_path / "x", Recorder()))
    assert not (tmp_path / "cache").exists()


def test_a_probe_scores_its_margin_over_the_best_baseline_with_an_interval_over_sentences(tiny_model_dir, tmp_path):
    m = _run(tiny_model_dir, tmp_path, "margin", seeds=2, bootstrap=200).metrics
    best = max(m[k] for k in ("majority_accuracy", "baseline_offset_accuracy", "baseline_offset_pos_accuracy"))
    assert m["margin"] == pytest.approx(m["accuracy"] - best)  # the baselines do not depend on the seed
    table = read_table(tmp_path / "margin", "probe_scores").set_index("metric")
    lo, hi = table.loc["margin", ["sentences_ci_low", "sentences_ci_high"]]
    assert lo < table.loc["margin", "value"] < hi and hi - lo < 0.5
    assert np.isnan(table.loc["majority_accuracy", "sentences_ci_low"])  # baselines alone get no interval
    assert [lo, hi] == pytest.approx(m["seeds"]["sentences_ci"]["margin"])
