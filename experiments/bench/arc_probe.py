"""Benchmark: the arc probe (Clark et al.'s Attn probe) on UD EWT train, evaluated on dev, task + control.

Side by side in one run, each method in a fresh process (so peak RSS is its own):
  memory_lbfgs  the whole design matrix gathered into memory (pair_features, root_features), then scipy's
                L-BFGS from zero, task probe and control probe one after the other
  store_newton  the probe as the package runs it (run_arc): features built from the memory-mapped store by
                compiled kernels a block at a time, damped Newton with a sampled Hessian, warm start on 1/8
                of the sentences, task and control fitted in the same passes
Both use the config's C, max_iter and tol on a seeded subsample of ``--limit`` training sentences (default:
all of them); each reports seconds (features, fit), iterations, training loss, dev UAS (task and control)
and peak RSS.

Build the stores first:  HF_HUB_OFFLINE=1 probing task=extract data=ud_ewt data.split=train  (and dev)
Run:                     python experiments/bench/arc_probe.py [--limit 3000] [--methods memory_lbfgs,store_newton]

Figures: experiments/bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np


def one(method: str, limit: int | None, ewt: str) -> dict:
    from omegaconf import OmegaConf
    from scipy.optimize import minimize

    from probing.config import LinearFit, ProbeConfig, ProbeKind, RunConfig
    from probing.probes.arc.blocks import ArcData
    from probing.probes.arc.probe import ArcProbe, arc_data, arc_loss, fit_probes, local_index, word_index
    from probing.probes.control import control_heads
    from probing.probes.data import subsample_sentences
    from probing.probes.features import pair_features, root_features, select_heads
    from probing.probes.pairs import candidates
    from probing.tasks.probe import _Stores, load_splits

    cfg = OmegaConf.structured(RunConfig(probe=ProbeConfig()))
    cfg.data = OmegaConf.merge(cfg.data, {"name": "ud_ewt", "kind": "ud_ewt", "dir": ewt})
    cfg.probe.kind = ProbeKind.arc
    cfg.extract.progress = False
    pc = cfg.probe
    train, ev, _ = load_splits(cfg.data, pc, cfg.extract, _Stores(cfg.model, cfg.extract, pc.measure))
    sel = select_heads(train.store.num_layers, train.store.num_heads, None, None)
    t0 = time.perf_counter()
    dtr, tr = arc_data(pc, subsample_sentences(train, limit, cfg.seed), sel)
    dte, te = arc_data(pc, ev, sel)
    golds = [local_index(dtr.pos, dtr.head),
             local_index(dtr.pos, control_heads(dtr.word, dtr.pos, dtr.n, cfg.seed))]
    if method == "memory_lbfgs":  # the whole design matrix in memory
        def matrix(split, deps):
            cand = candidates(deps)
            X, _ = pair_features(split.store, cand.sent, cand.query, cand.key, sel, pc.feature_set, [])
            R, _ = root_features(split.store, deps.sent, deps.pos, sel, pc.feature_set)
            return X, R, cand.sizes
        X, R, sizes = matrix(train, dtr)
        tr = ArcData(X, R, sizes)
        te = ArcData(*matrix(ev, dte))
    features = time.perf_counter() - t0
    t0 = time.perf_counter()
    fit = LinearFit()  # probe.linear's defaults, as probe=arc composes them
    probes = [ArcProbe(C=fit.C, max_iter=fit.max_iter, tol=fit.tol) for _ in golds]
    if method == "memory_lbfgs":
        alpha, f = 1.0 / (fit.C * len(dtr)), tr.n_features
        for probe, gold in zip(probes, golds):
            data = ArcData(tr.X, tr.R, tr.sizes, gold)
            res = minimize(arc_loss, np.zeros(f + tr.n_root_features + 1), args=(data, alpha), jac=True,
                           method="L-BFGS-B", options={"maxiter": fit.max_iter, "gtol": fit.tol, "ftol": 1e-12})
            probe.coef_, probe.root_coef_, probe.root_intercept_ = res.x[:f], res.x[f:-1], float(res.x[-1])
            probe.n_iter_, probe.loss_, probe.converged_ = int(res.nit), float(res.fun), bool(res.success)
    else:
        fit_probes(probes, tr, golds, names=("task", "control"))
    fit = time.perf_counter() - t0
    uas = float(np.mean(word_index(dte.pos, probes[0].predict(te)) == dte.head))
    c_te = control_heads(dte.word, dte.pos, dte.n, cfg.seed)
    control = float(np.mean(word_index(dte.pos, probes[1].predict(te)) == c_te))
    return {"method": method, "train_dependents": int(len(dtr)), "candidates": int(tr.sizes.sum()),
            "features_s": round(features, 1), "fit_s": round(fit, 1),
            "iterations": [p.n_iter_ for p in probes], "train_loss": round(probes[0].loss_, 6),
            "converged": [p.converged_ for p in probes], "dev_uas": round(uas, 4),
            "control_uas": round(control, 4),
            "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=None, help="training sentences (default: all)")
    ap.add_argument("--methods", default="memory_lbfgs,store_newton")
    ap.add_argument("--dir", default=os.environ.get("UD_EWT_DIR"), required=not os.environ.get("UD_EWT_DIR"),
                    help="the UD English EWT folder (default: $UD_EWT_DIR)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(one(args.child, args.limit, args.dir)))
        return
    rows = []
    for method in args.methods.split(","):
        cmd = [sys.executable, __file__, "--child", method, "--dir", args.dir] + (["--limit", str(args.limit)] if args.limit else [])
        start = time.perf_counter()
        got = subprocess.run(cmd, capture_output=True, text=True, check=True)
        row = json.loads(got.stdout.strip().splitlines()[-1])
        row["wall_s"] = round(time.perf_counter() - start, 1)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if len(rows) == 2:
        a, b = rows
        print(f"{a['method']} / {b['method']}: fit {a['fit_s'] / max(b['fit_s'], 1e-9):.1f}x, "
              f"wall {a['wall_s'] / max(b['wall_s'], 1e-9):.1f}x, peak RSS {a['peak_rss_gb']} vs "
              f"{b['peak_rss_gb']} GB; dev UAS {a['dev_uas']:.4f} vs {b['dev_uas']:.4f}, control "
              f"{a['control_uas']:.4f} vs {b['control_uas']:.4f}")


if __name__ == "__main__":
    main()
