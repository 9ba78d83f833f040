"""`probing task=heads` with MiniLM on EWT dev: the best head per relation in the console and metrics.json,
and the reported accuracy of a best head recomputed independently from the store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
REQUIRED = ["det", "nsubj", "obj", "amod", "case", "advmod", "aux", "compound", "nmod:poss", "mark"]


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
    # the console ends with the table: the dashboard's and the results' paths come before it
    lines = [line for line in r.stdout.splitlines() if line.strip()]
    start = next(i for i, line in enumerate(lines) if line.startswith("best head per relation"))
    assert any(line.startswith("dashboard: ") for line in lines[:start])
    assert any(line.startswith("results: ") for line in lines[:start])
    for rel in REQUIRED:
        assert f" {rel} " in table, rel

    m = json.loads((run_dir / "metrics.json").read_text())
    best = m["best_heads"]
    assert set(REQUIRED) <= set(best)
    assert lines[-1].split()[0] in set(best) | {"all"}  # the last console line is a row of the table
    assert m["sentences"] == 2001 and m["conventions"]["min_count"] == 100
    # determiners are the textbook case: the best head beats the best offset for real
    assert best["det"]["diff_ci_low"] > 0 and best["det"]["accuracy"] > 0.7
    for rel in REQUIRED:
        b = best[rel]
        assert b["ci_low"] <= b["accuracy"] <= b["ci_high"]

    # independent recomputation of the best det head from the store, one word at a time
    from probing.corpus import read_conllu
    from probing.store import AttentionStore

    corpus = read_conllu(ewt_dir / "en_ewt-ud-dev.conllu", split="dev")
    store_dir = next(p for p in Path(cache).iterdir() if p.name.startswith("minilm-ud_ewt-dev-") and p.is_dir())
    store = AttentionStore(store_dir)
    b = best["det"]
    n = correct = 0
    for i in store.indices:
        s = corpus[int(i)]
        w = np.asarray(store.words(int(i), b["layer"], b["head"]), dtype=np.float32)
        for d, (g, rel) in enumerate(zip(s.heads, s.relations)):
            if rel != "det":
                continue
            v = (w[d] if b["direction"] == "dep_to_head" else w[:, d]).copy()
            v[d] = 0.0
            n += 1
            correct += int(np.argmax(v)) == g
    assert n == b["n"] and correct / n == pytest.approx(b["accuracy"])
