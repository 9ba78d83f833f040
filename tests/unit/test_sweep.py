"""probing-collect on a hand-made sweep dir (one failed job), and the probe task's skip-if-complete check."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import yaml
from omegaconf import OmegaConf

from probing.cli import collect_main as main
from probing.config import LinearFit, ProbeConfig, RunConfig
from probing.sweep import parse_overrides, write_collection
from probing.tasks.probe import completed, config_key


def job(root: Path, num: int, layer: int, head: int, C: float, metrics: dict | None, log: str = "") -> None:
    d = root / str(num)
    (d / ".hydra").mkdir(parents=True)
    (d / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(
        ["task=probe", f"probe.layer={layer}", f"probe.head={head}", f"probe.linear.C={C}"]))
    (d / ".hydra" / "config.yaml").write_text(yaml.safe_dump({
        "task": {"name": "probe"}, "model": {"name": "minilm"}, "data": {"name": "ud_ewt"},
        "probe": {"kind": "relation", "layer": layer, "head": head, "linear": {"C": C}}}))
    if metrics is not None:
        (d / "metrics.json").write_text(json.dumps(metrics))
    (d / "probing.log").write_text(log)


def test_parse_overrides():
    assert parse_overrides(["probe.layer=3", "+x=y", "probe.head=null", "probe.C=0.5"]) == {
        "probe.layer": 3, "x": "y", "probe.head": None, "probe.C": 0.5}
    # Hydra's grammar, as Hydra itself read the job's command line: floats like 1e-3 (YAML 1.1 reads a
    # string), casts, lists, quoted values holding '=' and commas, config groups
    got = parse_overrides(["probe.C=1e-3", "data.text=str(5)", "probe.neighbour_offsets=[-1,1]",
                           "inspect.text='a=b, c'", "hydra/launcher=joblib"])
    assert got == {"probe.C": 0.001, "data.text": "5", "probe.neighbour_offsets": [-1, 1],
                   "inspect.text": "a=b, c", "hydra/launcher": "joblib"}


def test_collect_merges_jobs_lists_failures_and_draws_heatmaps(tmp_path, capsys):
    sweep = tmp_path / "sweep"
    k = 0
    for layer in (0, 1):
        for head in (0, 1, 2):
            acc = 0.1 * layer + 0.01 * head
            metrics = {"task": "probe", "accuracy": acc, "selectivity": acc / 2, "converged": True,
                       "probe": "relation", "layer": layer, "seconds": 2}
            job(sweep, k, layer, head, 1.0, metrics)
            k += 1
    job(sweep, k, 2, 0, 1.0, None, log="[x][probing][ERROR] error: probe=relation: no arcs to probe\n")
    s = write_collection(sweep, tmp_path / "out")
    assert s["jobs"] == 7 and s["complete"] == 6 and s["failed"] == ["6"]
    assert s["swept"] == ["probe.head", "probe.layer"]  # task=probe and probe.linear.C were the same everywhere
    df = pd.read_parquet(tmp_path / "out" / "sweep.parquet")
    # flags, names and timings are not metrics
    assert sorted(df["metric"].unique()) == ["accuracy", "selectivity"]
    assert len(df) == 12 and set(df.columns) >= {"job", "layer", "head", "probe.linear.C", "metric", "value"}
    row = df[(df.layer == 1) & (df["head"] == 2) & (df.metric == "accuracy")]
    assert row["value"].item() == 0.1 + 0.02
    failed = pd.read_csv(tmp_path / "out" / "failed_jobs.csv")
    assert failed["reason"].item().endswith("no arcs to probe")
    assert (tmp_path / "out" / "figures" / "heatmap_accuracy.png").is_file()
    main([str(sweep)])  # the command: writes into the sweep dir, reports the failure, does not fail
    out = capsys.readouterr().out
    assert "6 of 7 jobs complete" in out and "failed or incomplete (1): 6" in out
    assert (sweep / "sweep.csv").is_file()


def test_completed_needs_the_same_config_key(tmp_path):
    cfg = OmegaConf.structured(RunConfig(probe=ProbeConfig(linear=LinearFit())))

    def config_key_of(c):
        return config_key(c.model, c.data, c.extract, c.probe, c.seed)

    key = config_key_of(cfg)
    assert completed(tmp_path, key) is None
    (tmp_path / "metrics.json").write_text(json.dumps({"task": "probe", "accuracy": 0.5, "config_key": key,
                                                        "seconds": 3.0}))
    assert completed(tmp_path, key) == {"accuracy": 0.5, "config_key": key}
    cfg.probe.linear.C = 0.5
    assert config_key_of(cfg) != key and completed(tmp_path, config_key_of(cfg)) is None
    cfg.probe.linear.C = 1.0
    cfg.extract.batch_size = 7  # does not change the maps, so not the results either
    assert config_key_of(cfg) == key
