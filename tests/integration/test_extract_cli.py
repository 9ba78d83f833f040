"""The `probing` command end to end: extraction runs, errors are one clear line, nothing half-written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from cache_dirs import store_dir

REPO = Path(__file__).resolve().parents[2]


def probing(*args: str, cwd: Path, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PROBING_CACHE_DIR": str(cwd / "cache"), **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "probing.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.slow
def test_extract_grammar_then_reuse(tmp_path):
    r = probing("task=extract", "data.n_sentences=60", f"hydra.run.dir={tmp_path / 'run1'}", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "built: 60 of 60 sentences from grammar" in r.stdout
    metrics = json.loads((tmp_path / "run1" / "metrics.json").read_text())
    assert metrics["sentences"] == 60 and metrics["reused"] is False
    store = Path(metrics["store"])
    assert (store / "manifest.json").is_file() and store.parent == tmp_path / "cache"
    saved = yaml.safe_load((tmp_path / "run1" / ".hydra" / "config.yaml").read_text())
    # an extract run's config holds only what it read: no section of another task, not even as null
    assert set(saved) == {"experiment_name", "seed", "model", "data", "task", "extract", "logger"}
    assert set(json.loads((tmp_path / "run1" / "run_meta.json").read_text())["config"]) == set(saved)
    meta = json.loads((tmp_path / "run1" / "run_meta.json").read_text())
    assert meta["versions"]["torch"] and meta["task"] == "extract" and meta["device"] == "cpu"
    (used,) = meta["stores"]
    assert used["store_dir"] == str(store) and used["sentences"] == 60 and used["reused"] is False
    assert used["store_key"] == json.loads((store / "manifest.json").read_text())["key"]
    from probing.corpus import generate_corpus

    assert used["corpus_fingerprint"] == generate_corpus(60, 0).fingerprint()
    r2 = probing("task=extract", "data.n_sentences=60", f"hydra.run.dir={tmp_path / 'run2'}", cwd=tmp_path)
    assert r2.returncode == 0 and "reused (already built)" in r2.stdout


@pytest.mark.slow
def test_conllu_command_as_written(tmp_path, ewt_dir):
    src = (ewt_dir / "en_ewt-ud-dev.conllu").read_text().split("\n\n")[:25]
    f = tmp_path / "FILE.conllu"
    f.write_text("\n\n".join(src) + "\n\n")
    r = probing("task=extract", "model=minilm", "data=conllu", f"data.path={f}", f"hydra.run.dir={tmp_path / 'r'}",
                cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "built: 25 of 25 sentences from FILE" in r.stdout


def test_unreachable_model_is_one_line(tmp_path):
    r = probing("task=extract", "model=bert_base_uncased", "data.n_sentences=5", f"hydra.run.dir={tmp_path / 'r'}",
                cwd=tmp_path)
    assert r.returncode == 2
    err_lines = [line for line in (r.stdout + r.stderr).splitlines() if line.startswith("error:")]
    assert len(err_lines) == 1 and "could not load model 'google-bert/bert-base-uncased'" in err_lines[0]
    assert "Traceback" not in r.stdout + r.stderr
    assert not (tmp_path / "r" / "metrics.json").exists()


def test_malformed_treebank_is_one_line(tmp_path):
    f = tmp_path / "bad.conllu"
    f.write_text("1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_\n2\tcat\tcat\tNOUN\tNN\t_\t5\troot\t_\t_\n\n")
    r = probing("task=extract", "data=conllu", f"data.path={f}", f"hydra.run.dir={tmp_path / 'r'}", cwd=tmp_path)
    assert r.returncode == 2
    assert f"error: {f}:2: head 5 is out of range" in r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr


def test_missing_ud_ewt_says_where_to_get_it(tmp_path):
    r = probing("task=extract", "data=ud_ewt", f"data.dir={tmp_path / 'nowhere'}", f"hydra.run.dir={tmp_path / 'r'}",
                cwd=tmp_path)
    assert r.returncode == 2
    assert "en_ewt-ud-dev.conllu: not found" in r.stdout + r.stderr and "UD_English-EWT" in r.stdout + r.stderr
    # neither data.dir nor UD_EWT_DIR: one line naming the key
    line = one_error_line(probing("task=extract", "data=ud_ewt", f"hydra.run.dir={tmp_path / 'r2'}", cwd=tmp_path,
                                  env_extra={"UD_EWT_DIR": ""}))
    assert line.startswith("error: data=ud_ewt needs data.dir (or UD_EWT_DIR). Universal Dependencies English EWT "
                           "is at https://github.com/UniversalDependencies/UD_English-EWT"), line


def test_config_typo_fails_at_start(tmp_path):
    r = probing("task=extract", "extract.polling=first", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr == "error: unknown config key 'extract.polling'; did you mean extract.pooling?\n"


@pytest.mark.slow
def test_a_damaged_store_is_rebuilt_or_refused_by_name_and_never_scored(tmp_path):
    """The issue's reproduction: damage a finished store, run task=heads on the same data again."""
    base = ["task=heads", "data.n_sentences=60", "extract.shard_mb=0", "extract.progress=false",
            "heads.bootstrap=50", "heads.figures=false", "heads.distances=false", "report.enabled=false"]

    def heads(name: str, *extra: str) -> subprocess.CompletedProcess:
        return probing(*base, *extra, f"hydra.run.dir={tmp_path / name}", cwd=tmp_path)

    assert heads("clean").returncode == 0
    clean = (tmp_path / "clean" / "heads.csv").read_text()
    store = store_dir(tmp_path / "cache", "minilm-grammar-seed")  # not the heads run's induction sequences
    # a truncated shard: found when the store opens, re-extracted, and the numbers are a clean build's
    os.truncate(store / "shard-00001.bin", 100)
    r = heads("truncated")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "shard-00001.bin has 100 bytes" in r.stdout and "re-extracting what is damaged" in r.stdout
    assert "built: 60 of 60" in r.stdout and (tmp_path / "truncated" / "heads.csv").read_text() == clean
    meta = json.loads((tmp_path / "truncated" / "run_meta.json").read_text())
    assert meta["stores"][0]["reused"] is False and meta["stores"][0]["sentences"] == 60
    # bytes changed in place (same size): refused with one line naming the shard, no tables written
    path = store / "shard-00003.bin"
    data = bytearray(path.read_bytes())
    data[10:12] = b"\x00\x3c"  # float16 1.0: a plausible value
    path.write_bytes(bytes(data))
    r = heads("flipped")
    assert r.returncode == 2
    errors = [line for line in (r.stdout + r.stderr).splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "shard-00003.bin does not match its checksum" in errors[0], r.stdout[-2000:]
    assert "Traceback" not in r.stdout + r.stderr and not (tmp_path / "flipped" / "heads.csv").exists()
    # extract.verify=true checks every checksum, re-extracts the damaged shard, and the numbers are clean
    r = heads("verified", "extract.verify=true")
    assert r.returncode == 0, r.stderr[-2000:]
    assert (tmp_path / "verified" / "heads.csv").read_text() == clean


@pytest.mark.slow
def test_runs_started_together_get_their_own_run_dirs_and_never_share_one(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PROBING_CACHE_DIR": str(tmp_path / "cache"),
           "PROBING_RESULTS_DIR": str(tmp_path / "results")}
    args = [sys.executable, "-m", "probing.cli", "task=extract", "data.n_sentences=5", "extract.progress=false"]
    procs = [subprocess.Popen(args + [f"data.grammar_seed={k}"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for k in range(2)]
    assert [p.wait(timeout=600) for p in procs] == [0, 0]
    runs = sorted((tmp_path / "results" / "default" / "extract").iterdir())
    assert len(runs) == 2  # microseconds in the name: two runs in the same second still differ
    seeds = sorted(json.loads((r / "run_meta.json").read_text())["config"]["data"]["grammar_seed"] for r in runs)
    assert seeds == [0, 1] and all((r / "metrics.json").is_file() for r in runs)
    # a run never writes into a dir that holds another run's results
    before = (runs[0] / "metrics.json").read_text()
    r = probing("task=extract", "data.n_sentences=7", f"hydra.run.dir={runs[0]}", cwd=tmp_path)
    assert r.returncode == 2 and "already holds the results of another run" in r.stdout + r.stderr
    assert (runs[0] / "metrics.json").read_text() == before


def one_error_line(r: subprocess.CompletedProcess) -> str:
    """The run failed with exit status 2 and said why in exactly one ``error:`` line, with no traceback."""
    out = r.stdout + r.stderr
    assert r.returncode == 2, out[-2000:]
    assert "Traceback" not in out, out[-2000:]
    (line,) = [ln for ln in out.splitlines() if ln.startswith("error:")]
    return line


@pytest.mark.slow
def test_user_errors_are_one_line_naming_what_to_fix(tmp_path):
    run = ["task=extract", "data.n_sentences=5", "extract.progress=false"]
    # a typo added with + (Hydra's own suggestion after a plain typo) is refused like a typo
    line = one_error_line(probing(*run, "+extract.polling=first", cwd=tmp_path))
    assert "unknown config key 'extract.polling'" in line and "did you mean extract.pooling?" in line
    line = one_error_line(probing(*run, "model.device=tpu", cwd=tmp_path))
    assert "model.device=tpu: not a device torch knows" in line
    # folders that cannot be written: the results root (before Hydra makes the run dir) and the cache
    line = one_error_line(probing(*run, cwd=tmp_path, env_extra={"PROBING_RESULTS_DIR": "/proc/probing-nope"}))
    assert "cannot write results: /proc/probing-nope" in line and "PROBING_RESULTS_DIR" in line
    line = one_error_line(probing(*run, cwd=tmp_path, env_extra={"PROBING_CACHE_DIR": "/proc/probing-nope"}))
    assert "/proc/probing-nope" in line and "PROBING_CACHE_DIR" in line
    # a UTF-16 treebank, and a folder given as data.path
    f = tmp_path / "u16.conllu"
    f.write_bytes("1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_\n\n".encode("utf-16"))
    line = one_error_line(probing("task=extract", "data=conllu", f"data.path={f}", cwd=tmp_path))
    assert f"{f}:1: not UTF-8 text" in line
    line = one_error_line(probing("task=extract", "data=conllu", f"data.path={tmp_path}", cwd=tmp_path))
    assert f"{tmp_path}: is a directory, not a CoNLL-U file" in line
    line = one_error_line(probing("task=extract", "model=local", cwd=tmp_path))
    assert "model.name_or_path is empty" in line


def test_help_lists_tasks_examples_and_environment(tmp_path):
    r = probing("--help", cwd=tmp_path)
    assert r.returncode == 0
    for text in ("Tasks (task=NAME):", "extract ", "heads ", "probe ", "inspect ", "importance ", "merge ", "Examples:",
                 "PROBING_RESULTS_DIR", "PROBING_CACHE_DIR", "UD_EWT_DIR",
                 "task: extract, heads, importance, inspect, merge, patching, probe"):
        assert text in r.stdout, text


def test_a_hub_model_that_cannot_be_reached_fails_at_once_and_leaves_no_trace(tmp_path):
    """No HF_HUB_OFFLINE and a hub that refuses connections: one line naming what to do instead, and the
    cache holds no empty store folder or lock."""
    env = {**os.environ, "HF_ENDPOINT": "http://127.0.0.1:9", "PROBING_CACHE_DIR": str(tmp_path / "cache"),
           "HF_HOME": str(tmp_path / "hf")}
    env.pop("HF_HUB_OFFLINE", None)
    r = subprocess.run([sys.executable, "-m", "probing.cli", "task=extract", "model=bert_base_uncased",
                        "data.n_sentences=5", f"hydra.run.dir={tmp_path / 'r'}"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stdout + r.stderr
    [line] = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.startswith("error:")]
    assert "could not reach 127.0.0.1 for model 'google-bert/bert-base-uncased'" in line
    assert "HF_HUB_OFFLINE=1" in line and "model=minilm" in line and "model=local model.name_or_path=DIR" in line
    cache = tmp_path / "cache"
    assert not [p for p in cache.rglob("*") if p.name.startswith("bert_base_uncased")], list(cache.rglob("*"))
