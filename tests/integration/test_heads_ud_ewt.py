"""`probing task=heads` with MiniLM on EWT dev: the best head per relation in the console and metrics.json,
and each required relation's best head recomputed independently from the store: its accuracy, baseline, and
bootstrap intervals (the resamples redrawn from the reported seed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from cache_dirs import store_dir

REPO = Path(__file__).resolve().parents[2]
REQUIRED = ["det", "nsubj", "obj", "amod", "case", "advmod", "aux", "compound", "nmod:poss", "mark"]


def resample_counts(n_sentences: int, n_resamples: int, seed: int, block: int = 64) -> np.ndarray:
    """The documented draw of the bootstrap (probing/heads/bootstrap.py): ``np.random.default_rng(seed)``,
    then per block of up to 64 resamples one ``integers(0, S, size=(k, S))`` call, each row a resample of S
    sentences drawn with replacement. Returns how often each resample drew each sentence, ``(B, S)``."""
    rng = np.random.default_rng(seed)
    rows = []
    for start in range(0, n_resamples, block):
        draws = rng.integers(0, n_sentences, size=(min(block, n_resamples - start), n_sentences))
        rows += [np.bincount(d, minlength=n_sentences) for d in draws]
    return np.array(rows, dtype=np.float64)


def interval(samples: np.ndarray, ci: float) -> tuple[float, float]:
    """The central percentile interval (numpy's linear interpolation), resamples without arcs ignored."""
    lo, hi = np.nanpercentile(samples, [50 * (1 - ci), 50 * (1 + ci)])
    return float(lo), float(hi)


@pytest.mark.slow
def test_heads_minilm_ewt_dev(ewt_dir, tmp_path):
    # reuse a cache the caller points at (a built store saves the extraction); else build into tmp
    cache = os.environ.get("PROBING_CACHE_DIR", str(tmp_path / "cache"))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PROBING_CACHE_DIR": cache}
    run_dir = tmp_path / "run"
    args = ["task=heads", "data=ud_ewt", "data.split=dev", f"data.dir={ewt_dir}", "heads.bootstrap=200",
            "heads.tree_sentences=100", "heads.distance_sentences=100", "heads.figures=false",
            "extract.progress=false", f"hydra.run.dir={run_dir}"]
    r = subprocess.run([sys.executable, "-m", "probing.cli", *args], cwd=REPO, env=env, capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout + r.stderr
    table = out[out.index("best head per relation"):]
    # the console ends with the results' path, the table and its legend, then the dashboard's path
    lines = [line for line in r.stdout.splitlines() if line.strip()]
    start = next(i for i, line in enumerate(lines) if line.startswith("best head per relation"))
    assert lines[-1] == f"dashboard: {run_dir / 'dashboard.html'}"
    assert any(line.startswith("results: ") for line in lines[:start])
    for rel in REQUIRED:
        assert f" {rel} " in table, rel

    m = json.loads((run_dir / "metrics.json").read_text())
    best = m["best_heads"]
    assert set(REQUIRED) <= set(best)
    # the table's last row, then the legend of its columns (3 lines), then the dashboard's path
    assert lines[-5].split()[0] in set(best) | {"all"} and lines[-4].startswith("held-out head: the head chosen")
    assert lines[-2].startswith("beats: the held-out gain's p-value")
    assert m["sentences"] == 2001 and m["conventions"]["min_count"] == 100
    # determiners are the textbook case: the best head beats the best offset for real
    assert best["det"]["gain_ci_low"] > 0 and best["det"]["accuracy"] > 0.7

    # independent recomputation of every required relation's best head from the store, one word at a time:
    # its accuracy, its bootstrap interval and that of its difference with the best offset
    from probing.corpus import read_conllu
    from probing.store import AttentionStore

    corpus = read_conllu(ewt_dir / "en_ewt-ud-dev.conllu", split="dev", strict=True)
    store = AttentionStore(store_dir(Path(cache), "minilm-ud_ewt-dev-"))
    boot = m["conventions"]["bootstrap"]
    assert (boot["resamples"], boot["unit"], boot["interval"]) == (200, "sentence", "percentile")
    weights = resample_counts(len(store.indices), boot["resamples"], boot["seed"])
    for rel in REQUIRED:
        b = best[rel]
        hits = np.zeros((3, len(store.indices)))  # per sentence: arcs, head hits, baseline-offset hits
        for k, i in enumerate(store.indices):
            s = corpus[int(i)]
            w = np.asarray(store.words(int(i), b["layer"], b["head"]), dtype=np.float32)
            for d, (g, r) in enumerate(zip(s.heads, s.relations)):
                if r != rel:
                    continue
                v = (w[d] if b["direction"] == "dep_to_head" else w[:, d]).copy()
                v[d] = 0.0
                guess = d + b["baseline_offset"]
                hits[:, k] += (1, int(np.argmax(v)) == g, 0 <= guess < len(s) and guess == g)
        n, correct, offset = hits.sum(axis=1)
        assert n == b["n"] and correct / n == pytest.approx(b["accuracy"]), rel
        assert offset / n == pytest.approx(b["baseline_accuracy"]), rel
        arcs, acc, off = weights @ hits[0], weights @ hits[1], weights @ hits[2]
        with np.errstate(invalid="ignore"):
            lo, hi = interval(acc / arcs, boot["ci"])
            dlo, dhi = interval((acc - off) / arcs, boot["ci"])
        assert (b["ci_low"], b["ci_high"]) == (pytest.approx(lo, abs=1e-6), pytest.approx(hi, abs=1e-6)), rel
        assert (b["gain_ci_low"], b["gain_ci_high"]) == (pytest.approx(dlo, abs=1e-6),
                                                         pytest.approx(dhi, abs=1e-6)), rel
