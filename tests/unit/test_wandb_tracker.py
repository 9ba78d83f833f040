"""The wandb tracker: an offline run inside the run dir, read back from wandb's own files; a broken wandb
never fails a run."""

from __future__ import annotations

import json
import logging
import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf
from wandb_offline import offline_records, offline_summary

from probing.config import LoggerConfig, RunConfig
from probing.results import write_table
from probing.tracking import NoTracker, make_tracker


@pytest.fixture
def wandb_env(tmp_path, monkeypatch):
    """Keep wandb's own caches and settings in the test's temp dir, and let the config pick the mode."""
    for var in ("WANDB_MODE", "WANDB_DISABLED", "WANDB_RUN_ID", "WANDB_RUN_GROUP", "WANDB_PROJECT", "WANDB_DIR"):
        monkeypatch.delenv(var, raising=False)
    for var, sub in (("WANDB_CONFIG_DIR", "config"), ("WANDB_CACHE_DIR", "cache"), ("WANDB_DATA_DIR", "data")):
        monkeypatch.setenv(var, str(tmp_path / "wandb_home" / sub))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_START_METHOD", "thread")
    return tmp_path


def finished_records(run_dir: Path, timeout_s: float = 30.0) -> list:
    """The records of an offline run once its exit record is on disk: wandb's service writes the file
    asynchronously, so it can lag ``finish()`` by a few milliseconds."""
    import time

    from google.protobuf.message import DecodeError

    run_file = next(Path(run_dir).glob("run-*.wandb"))
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            records = offline_records(run_file)
        except DecodeError:  # read mid-write (a record not yet whole): read again
            if time.monotonic() > deadline:
                raise
            records = []
        if any(r.WhichOneof("record_type") == "exit" for r in records) or time.monotonic() > deadline:
            return records
        time.sleep(0.05)


def heads_frame(n_rows: int = 4) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({
        "model": "minilm", "corpus": "grammar", "split": "dev", "label_set": "as_is",
        "relation": ["nsubj", "det", "obl", "nmod:poss"] * (n_rows // 4),
        "direction": "dep_to_head", "layer": np.arange(n_rows) % 6, "head": np.arange(n_rows) % 12,
        "n": 10, "correct": np.arange(n_rows) % 11, "accuracy": rng.random(n_rows),
        "ci_low": 0.1, "ci_high": np.nan,
    })


def test_offline_run_lands_in_the_run_dir_with_summary_config_and_tables(wandb_env):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = wandb_env / "results" / "exp" / "2026-01-01_00-00-00"
    out_dir.mkdir(parents=True)
    # a table and a figure the task writes but does not log: finish() mirrors them
    pd.DataFrame({"layer": [0, 1], "head": [0, 0], "metric": ["cls", "cls"], "value": [0.5, 0.25]}).to_csv(
        out_dir / "patterns.csv", index=False)
    fig, ax = plt.subplots(figsize=(1, 1))
    ax.plot([0, 1])
    (out_dir / "figures").mkdir()
    fig.savefig(out_dir / "figures" / "heads.png")
    plt.close(fig)

    config = {"experiment_name": "exp", "task": {"name": "heads"}, "model": {"name": "minilm"}}
    tracker = make_tracker(LoggerConfig(name="wandb", mode="offline"), config, out_dir, None)
    assert type(tracker).__name__ == "WandbTracker"
    heads = heads_frame()
    big = heads_frame(12_000)  # above wandb's 10,000-row per-log limit: must still be logged whole
    write_table(heads, out_dir, "heads")  # the task writes it and logs it: logged once
    tracker.log_table("heads", heads)
    tracker.log_table("heads_big", big)
    tracker.log_metrics({"probe": {"relation": {"accuracy": 0.75, "layer": np.int64(3)}},
                         "selectivity": np.float32(0.5), "nan_metric": float("nan"), "task": "heads"})
    tracker.finish(True)

    runs = list((out_dir / "wandb").glob("offline-run-*"))
    assert len(runs) == 1, "one offline run, inside the run dir"
    records = finished_records(runs[0])
    run_rec = next(r.run for r in records if r.WhichOneof("record_type") == "run")
    assert run_rec.run_group == "exp"
    assert run_rec.project == "probing"
    cfg = {u.key: json.loads(u.value_json) for u in run_rec.config.update}
    assert cfg["model"] == {"name": "minilm"} and cfg["run_dir"] == str(out_dir)

    summary = offline_summary(records)
    assert summary["probe/relation/accuracy"] == 0.75 and summary["probe/relation/layer"] == 3
    # the best head per relation, from the run dir's heads table
    for rel, row in heads.set_index("relation").iterrows():  # one row per relation in this table
        assert summary[f"best/{rel}/dep_to_head/accuracy"] == pytest.approx(row.accuracy)
        assert (summary[f"best/{rel}/dep_to_head/layer"], summary[f"best/{rel}/dep_to_head/head"]) == (
            row.layer, row["head"])
    assert summary["selectivity"] == 0.5
    assert summary["task"] == "heads"
    for key, rows in (("heads", 4), ("heads_big", 12_000), ("patterns", 2)):
        assert summary[f"{key}/_type"] == "table-file" and summary[f"{key}/nrows"] == rows, key
    assert summary["figures/figures/heads/_type"] == "image-file"
    exits = [r.exit.exit_code for r in records if r.WhichOneof("record_type") == "exit"]
    assert exits == [0]

    tables = {p.name.split("_")[0] if not p.name.startswith("heads_big") else "heads_big": p
              for p in (runs[0] / "files" / "media" / "table").glob("*.table.json")}
    table_files = [p.name for p in (runs[0] / "files" / "media" / "table").glob("heads_*.table.json")]
    assert len([n for n in table_files if not n.startswith("heads_big")]) == 1, table_files
    got = json.loads(tables["heads"].read_text())
    assert got["columns"] == list(heads.columns)
    assert [row[got["columns"].index("accuracy")] for row in got["data"]] == pytest.approx(heads["accuracy"].tolist())
    assert got["data"][0][got["columns"].index("relation")] == "nsubj"
    assert len(json.loads(tables["heads_big"].read_text())["data"]) == 12_000
    assert json.loads(tables["patterns"].read_text())["data"] == [[0, 0, "cls", 0.5], [1, 0, "cls", 0.25]]
    assert list((runs[0] / "files" / "media" / "images").rglob("*.png")), "the figure is logged as an image"


def test_sweep_jobs_are_grouped_by_experiment_and_sweep_dir(wandb_env):
    from probing.tracking.wandb_run import run_group

    job = wandb_env / "results" / "layers" / "multirun" / "2026-01-01_00-00-00" / "3"
    assert run_group({"experiment_name": "layers"}, job, multirun=True) == "layers/2026-01-01_00-00-00"
    assert run_group({"experiment_name": "layers"}, job.parent, multirun=False) == "layers"


def test_missing_wandb_gives_no_tracker_and_a_warning(wandb_env, monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "wandb", None)  # "import wandb" raises ImportError
    with caplog.at_level(logging.WARNING):
        tracker = make_tracker(LoggerConfig(name="wandb"), {}, wandb_env / "run", None)
    assert isinstance(tracker, NoTracker)
    assert "wandb could not start" in caplog.text


class _Broken:
    """A wandb whose run starts but then fails at every call (a crashed service, a full disk...)."""

    def __init__(self, fail_init: bool = False):
        self.fail_init = fail_init
        self.calls: list[str] = []

    def module(self) -> types.ModuleType:
        mod = types.ModuleType("wandb")
        outer = self

        class Run:
            dir = "/nonexistent/files"
            offline = True

            class summary:  # noqa: N801
                @staticmethod
                def update(_):
                    outer.calls.append("summary")
                    raise RuntimeError("wandb service crashed")

            def log(self, _data, **_kw):
                outer.calls.append("log")
                raise BrokenPipeError("wandb service crashed")

            def finish(self, exit_code=0):
                outer.calls.append(f"finish:{exit_code}")
                raise RuntimeError("wandb service crashed")

        def init(**_kw):
            if outer.fail_init:
                raise RuntimeError("api_key not configured (no-tty)")
            return Run()

        mod.init = init
        mod.Settings = lambda **kw: kw
        mod.Table = type("Table", (), {"MAX_ROWS": 10, "__init__": lambda self, dataframe=None: None})
        mod.Image = lambda path: path
        mod.Html = lambda text: text
        return mod


@pytest.mark.parametrize("fail_init", [False, True])
def test_a_broken_wandb_does_not_fail_the_run(wandb_env, monkeypatch, caplog, fail_init):
    import probing.tasks.run as pipeline
    from probing.config import TaskName
    from probing.tasks.base import TaskResult

    broken = _Broken(fail_init)
    monkeypatch.setitem(sys.modules, "wandb", broken.module())

    def fake_task(cfg, out):
        out.tracker.log_table("heads", heads_frame())
        (out.dir / "heads.csv").write_text("a\n1\n")
        return TaskResult({"best": 0.5})

    monkeypatch.setitem(pipeline.TASKS, TaskName.extract, pipeline.Task(fake_task))
    cfg = OmegaConf.structured(RunConfig)
    cfg.task.name = "extract"
    cfg.logger.name = "wandb"
    out_dir = wandb_env / "run"
    with caplog.at_level(logging.WARNING):
        metrics = pipeline.run(cfg, out_dir).metrics
    assert metrics["best"] == 0.5
    assert json.loads((out_dir / "metrics.json").read_text())["best"] == 0.5
    if fail_init:
        assert "wandb could not start" in caplog.text and broken.calls == []
    else:
        # the task's table, the metrics, the mirrored heads.csv, then finish with exit code 0: all failed, all warned
        assert broken.calls[0] == "log" and "summary" in broken.calls and broken.calls[-1] == "finish:0"
        assert "wandb: could not log table 'heads'" in caplog.text and "wandb: finish failed" in caplog.text


def test_failed_task_finishes_the_wandb_run_with_exit_code_1(wandb_env, monkeypatch):
    import probing.tasks.run as pipeline
    from probing.config import TaskName

    broken = _Broken()
    monkeypatch.setitem(sys.modules, "wandb", broken.module())

    def failing_task(cfg, out):
        raise ValueError("bad input")

    monkeypatch.setitem(pipeline.TASKS, TaskName.extract, pipeline.Task(failing_task))
    cfg = OmegaConf.structured(RunConfig)
    cfg.task.name = "extract"
    cfg.logger.name = "wandb"
    with pytest.raises(ValueError, match="bad input"):
        pipeline.run(cfg, wandb_env / "run")
    assert broken.calls[-1] == "finish:1"


def test_a_collected_sweep_is_logged_in_the_group_of_its_jobs(wandb_env):
    from probing.tracking.wandb_run import log_sweep_dir

    sweep = wandb_env / "results" / "layers" / "multirun" / "2026-01-01_00-00-00"
    (sweep / "0" / ".hydra").mkdir(parents=True)
    (sweep / "0" / ".hydra" / "config.yaml").write_text("experiment_name: layers\n")
    table = pd.DataFrame({"job": ["0", "0"], "layer": [0, 0], "head": [None, None],
                          "metric": ["accuracy", "selectivity"], "value": [0.8, 0.3]})
    write_table(table, sweep, "sweep")
    run_dir = log_sweep_dir(sweep)
    assert run_dir is not None and run_dir.parent == sweep / "wandb"
    records = finished_records(run_dir)
    run = next(r.run for r in records if r.WhichOneof("record_type") == "run")
    assert run.run_group == "layers/2026-01-01_00-00-00" and run.display_name == "collect 2026-01-01_00-00-00"
    assert offline_summary(records)["sweep/nrows"] == 2


def test_probing_collect_wandb_flag_logs_the_merged_sweep(wandb_env, capsys):
    import json

    from probing.cli import collect_main

    sweep = wandb_env / "results" / "layers" / "multirun" / "2026-01-02_00-00-00"
    for num, layer in enumerate((0, 1)):
        d = sweep / str(num)
        (d / ".hydra").mkdir(parents=True)
        (d / ".hydra" / "overrides.yaml").write_text(f"- task=probe\n- probe.layer={layer}\n")
        (d / ".hydra" / "config.yaml").write_text(f"experiment_name: layers\nprobe:\n  layer: {layer}\n")
        (d / "metrics.json").write_text(json.dumps({"task": "probe", "accuracy": 0.5 + layer / 10}))
    collect_main([str(sweep), "--wandb", "offline"])
    out = capsys.readouterr().out
    assert "2 of 2 jobs complete" in out and "wandb (offline): " in out
    run_dir = Path(out.split("wandb (offline): ")[1].split()[0])
    assert run_dir.parent == sweep / "wandb"
    records = finished_records(run_dir)
    assert offline_summary(records)["sweep/nrows"] == 2
