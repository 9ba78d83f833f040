"""Benchmark: the arc probe (Clark et al.'s Attn probe) on UD EWT train, evaluated on dev.

Side by side in one run, each method in a fresh process (so peak RSS is its own):
  lbfgs      ArcProbe.fit: full-batch L-BFGS from zero on the raw features (what the probe does)
  warm       an experiment: the same L-BFGS started from the optimum of a seeded 20,000-dependent subsample
  lbfgs_rms  an experiment: L-BFGS from zero in coordinates rescaled by each feature's RMS (a diagonal
             preconditioner; the same objective and optimum)
Both fit the task probe only (no control task), with the config's C, max_iter and tol, on a seeded subsample
of ``--limit`` training dependents (default: all of them), and report seconds (features, fit), iterations,
training loss, dev UAS and peak RSS.

Measured (2 cores, 2026-12-01):
- --limit 40000 (1.0M candidates): lbfgs 144 iterations, 56.8 s, dev UAS 0.5841, 2.42 GB; lbfgs_rms 561
  iterations, 219.8 s, dev UAS 0.5840, 2.80 GB: the rescaling makes L-BFGS 3.9x slower here (the heads'
  features are strongly correlated), so the probe does not use it.
- all of EWT train (180,981 dependents, 4.51M candidates x 144 features): lbfgs 198 iterations, fit 161.0 s,
  features 27.3 s, dev UAS 0.5858, 3.51 GB; warm 164 iterations, 143.6 s (1.1x), dev UAS 0.5849, 3.70 GB:
  too little gained for the extra memory, so the probe does not use it either. The 60 s / 1.5 GB goal needs
  another data path (see the closing note of the session that measured this).

Build the stores first:  HF_HUB_OFFLINE=1 probing task=extract data=ud_ewt data.split=train  (and dev)
Run:                     python experiments/bench/arc_probe.py [--limit 40000] [--methods lbfgs,lbfgs_rms]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np


def one(method: str, limit: int | None) -> dict:
    from omegaconf import OmegaConf
    from scipy.optimize import minimize

    from probing.config import ProbeKind, RunConfig
    from probing.probes.arc import ArcData, ArcProbe, _heads, arc_data, arc_loss
    from probing.probes.features import select_heads
    from probing.tasks.probe import _Stores, load_splits

    cfg = OmegaConf.structured(RunConfig)
    cfg.data = OmegaConf.merge(cfg.data, {"name": "ud_ewt", "kind": "ud_ewt",
                                          "dir": "../shared/data/ud_english_ewt"})
    cfg.probe.kind = ProbeKind.arc
    cfg.extract.progress = False
    train, ev, _ = load_splits(cfg.data, cfg.probe, cfg.extract, _Stores(cfg.model, cfg.extract))
    sel = select_heads(train.store.num_layers, train.store.num_heads, None, None)
    t0 = time.perf_counter()
    dtr, _, tr, _ = arc_data(cfg.probe, train, sel, limit)
    dte, cte, te, _ = arc_data(cfg.probe, ev, sel, None)
    features = time.perf_counter() - t0
    t0 = time.perf_counter()
    probe = ArcProbe(C=cfg.probe.C, max_iter=cfg.probe.max_iter, tol=cfg.probe.tol)
    if method == "warm":
        keep = np.sort(np.random.default_rng(0).choice(len(tr.sizes), size=20_000, replace=False))
        starts, sizes = tr.starts[keep], tr.sizes[keep]
        rows = np.repeat(starts - (np.cumsum(sizes) - sizes), sizes) + np.arange(int(sizes.sum()))
        sub = ArcData(tr.X[rows], tr.R[keep], sizes, tr.gold[keep])
        start = ArcProbe(C=cfg.probe.C, max_iter=cfg.probe.max_iter, tol=cfg.probe.tol).fit(sub).theta_
        alpha = 1.0 / (cfg.probe.C * len(tr.sizes))
        res = minimize(arc_loss, start, args=(tr, alpha), jac=True, method="L-BFGS-B",
                       options={"maxiter": cfg.probe.max_iter, "gtol": cfg.probe.tol, "ftol": 1e-12})
        f = tr.X.shape[1]
        probe.coef_, probe.root_coef_, probe.root_intercept_ = res.x[:f], res.x[f:-1], float(res.x[-1])
        n_iter, loss, converged = int(res.nit), float(res.fun), bool(res.success)
    elif method == "lbfgs_rms":
        alpha = 1.0 / (cfg.probe.C * len(tr.sizes))
        scale = np.concatenate([np.sqrt((tr.X.astype(np.float64) ** 2).mean(0)),
                                np.sqrt((tr.R.astype(np.float64) ** 2).mean(0)), [1.0]])
        scale[scale == 0] = 1.0

        def objective(z: np.ndarray) -> tuple[float, np.ndarray]:
            loss, grad = arc_loss(z / scale, tr, alpha)
            return loss, grad / scale

        res = minimize(objective, np.zeros_like(scale), jac=True, method="L-BFGS-B",
                       options={"maxiter": cfg.probe.max_iter, "gtol": cfg.probe.tol, "ftol": 1e-12})
        theta, f = res.x / scale, tr.X.shape[1]
        probe.coef_, probe.root_coef_, probe.root_intercept_ = theta[:f], theta[f:-1], float(theta[-1])
        n_iter, loss, converged = int(res.nit), float(res.fun), bool(res.success)
    else:
        probe.fit(tr)
        n_iter, loss, converged = probe.n_iter_, probe.loss_, probe.converged_
    fit = time.perf_counter() - t0
    uas = float(np.mean(_heads(cte, probe.predict(te)) == dte.head))
    return {"method": method, "train_dependents": int(len(tr.sizes)), "candidates": int(tr.X.shape[0]),
            "features_s": round(features, 1), "fit_s": round(fit, 1), "iterations": n_iter,
            "train_loss": round(loss, 6), "converged": converged, "dev_uas": round(uas, 4),
            "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=None, help="training dependents (default: all)")
    ap.add_argument("--methods", default="lbfgs,lbfgs_rms")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(one(args.child, args.limit)))
        return
    rows = []
    for method in args.methods.split(","):
        cmd = [sys.executable, __file__, "--child", method] + (["--limit", str(args.limit)] if args.limit else [])
        start = time.perf_counter()
        got = subprocess.run(cmd, capture_output=True, text=True, check=True)
        row = json.loads(got.stdout.strip().splitlines()[-1])
        row["wall_s"] = round(time.perf_counter() - start, 1)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if len(rows) == 2:
        a, b = rows
        print(f"fit time ratio {a['method']}/{b['method']}: {a['fit_s'] / max(b['fit_s'], 1e-9):.1f}x; "
              f"dev UAS {a['dev_uas']:.4f} vs {b['dev_uas']:.4f}; peak RSS {a['peak_rss_gb']} vs "
              f"{b['peak_rss_gb']} GB")


if __name__ == "__main__":
    main()
