"""A failed run leaves nothing that looks like a run: a run that fails on a user error removes the dir Hydra
made for it (the error line is all it had to say); one that fails on a bug keeps its log, marked failed in
``failed.txt``, which probing-report names and leaves out. A dir that held something before is never removed."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from probing.cli import report_main

ROOT = Path(__file__).resolve().parents[2]
# the package's run() replaced by one that raises what the test names, then the probing command
INJECT = ("import sys, probing.tasks.run as r\n"
          "def run(*a, **k):\n    raise {exc}\n"
          "r.run = run\nfrom probing.cli import main\nsys.argv = ['probing', *sys.argv[1:]]\nmain()\n")


def probing(tmp_path: Path, *args: str, exc: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PROBING_CACHE_DIR": str(tmp_path / "cache"),
           "PROBING_RESULTS_DIR": str(tmp_path / "results")}
    cmd = [sys.executable, "-c", INJECT.format(exc=exc)] if exc else [sys.executable, "-m", "probing.cli"]
    return subprocess.run([*cmd, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()]


def test_a_run_that_fails_on_a_user_error_leaves_no_run_dir(tmp_path):
    missing = tmp_path / "missing.conllu"
    r = probing(tmp_path, "task=extract", "data=conllu", f"data.path={missing}")
    assert r.returncode == 2 and f"error: {missing}: no such CoNLL-U file" in r.stdout + r.stderr
    assert (tmp_path / "results").is_dir() and files_under(tmp_path / "results") == []


def test_a_run_that_fails_on_a_bug_is_marked_failed_and_the_report_says_so(tmp_path, caplog, capsys):
    r = probing(tmp_path, "task=extract", "hydra.run.dir=" + str(tmp_path / "run"), exc="RuntimeError('boom')")
    assert r.returncode == 1 and "RuntimeError: boom" in r.stderr
    run = tmp_path / "run"
    assert (run / "failed.txt").read_text() == "RuntimeError: boom\n" and (run / "cli.log").is_file()
    assert not (run / "metrics.json").exists()
    with caplog.at_level(logging.WARNING), pytest.raises(SystemExit) as exit_:
        report_main([str(run), "--out", str(tmp_path / "report.html")])
    assert exit_.value.code == 2 and f"{run}: a failed run (failed.txt: RuntimeError: boom); left out" in caplog.text
    assert capsys.readouterr().err.strip().endswith(f"(unfinished or failed runs left out: {run})")


def test_a_failed_run_into_a_dir_that_held_something_keeps_it(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "notes.txt").write_text("mine\n")
    r = probing(tmp_path, "task=extract", f"hydra.run.dir={run}", exc="FileNotFoundError('x.conllu: no such file')")
    assert r.returncode == 2 and (run / "notes.txt").read_text() == "mine\n" and not (run / "failed.txt").exists()
