"""Benchmark: a structural distance probe (Hewitt and Manning 2019) on one layer of MiniLM's hidden vectors,
trained on UD EWT train, stopped early on dev, scored on dev and test (project goal: under a minute on 2 cores).

Reads the ``hidden`` representation stores through the same path as ``task=probe probe=distance`` (built first
if missing, and that time reported apart). Reports, for the probe alone: seconds to gather the word vectors,
to build the padded batches and fit (epochs until early stopping), to predict and score; UUAS, DSpr, the
epochs run and peak RSS. ``--compare REV`` also fits with ``probing/probes/structural/probe.py`` of git revision
REV, side by side on the same vectors.

Run:  HF_HUB_OFFLINE=1 python experiments/bench/structural_probe.py [--layer 3] [--limit N] [--rank R]
      [--threads T] [--max-epochs E] [--compare REV]

Figures: experiments/bench/README.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from types import ModuleType


def code_at(rev: str) -> ModuleType:
    """``probing/probes/structural/probe.py`` as it was at commit ``rev``, imported as its own module."""
    src = subprocess.run(["git", "show", f"{rev}:probing/probes/structural/probe.py"], check=True, capture_output=True,
                         text=True, cwd=Path(__file__).resolve().parents[2]).stdout
    path = Path(tempfile.mkdtemp()) / f"structural_{rev}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = mod  # dataclasses look their module up here
    spec.loader.exec_module(mod)
    return mod


def timed_fit(mod: ModuleType, kind: str, regimen, tr, dv, te) -> dict:
    """Fit ``mod``'s probe on ``tr`` (stopped on ``dv``) and score ``dv`` and ``te``: seconds (wall and this
    process's CPU), epochs, scores."""
    t0, c0 = time.perf_counter(), time.process_time()
    probe = mod.StructuralProbe(kind, mod.Regimen(**vars(regimen))).fit(tr, dv)
    fit_s, fit_cpu = time.perf_counter() - t0, time.process_time() - c0
    t0 = time.perf_counter()
    dev = mod.score(kind, probe.predict(dv), dv)
    test = mod.score(kind, probe.predict(te), te)
    return {"fit_s": round(fit_s, 1), "fit_cpu_s": round(fit_cpu, 1), "score_s": round(time.perf_counter() - t0, 2),
            "epochs": probe.epochs_, "s_per_epoch": round(fit_s / probe.epochs_, 2),
            "cpu_s_per_epoch": round(fit_cpu / probe.epochs_, 2), "best_epoch": probe.best_epoch_,
            "dev_loss": round(probe.dev_loss_, 5), **{f"dev_{k}": round(v, 4) for k, v in dev.items()},
            **{f"test_{k}": round(v, 4) for k, v in test.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layer", type=int, default=3)
    ap.add_argument("--limit", type=int, default=None, help="first N training sentences (default: all)")
    ap.add_argument("--rank", type=int, default=None)
    ap.add_argument("--kind", default="distance", choices=("distance", "depth"))
    ap.add_argument("--threads", type=int, default=None,
                    help="torch threads while the probe trains (default: probing.probes.structural.MAX_THREADS, 1)")
    ap.add_argument("--max-epochs", type=int, default=None, help="cap the epochs (default: the regimen's 40)")
    ap.add_argument("--compare", metavar="REV", default=None,
                    help="also fit with probing/probes/structural/probe.py of git commit REV (before the current code)")
    ap.add_argument("--dir", default=os.environ.get("UD_EWT_DIR"), required=not os.environ.get("UD_EWT_DIR"),
                    help="the UD English EWT folder (default: $UD_EWT_DIR)")
    args = ap.parse_args()
    import logging

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("probing.extract").setLevel(logging.WARNING)

    import torch

    from probing.probes.structural import probe as structural

    before = code_at(args.compare) if args.compare else None
    for mod in filter(None, (structural, before)):
        if args.threads:  # the probe's bound, for this measurement
            mod.MAX_THREADS = args.threads
    from omegaconf import OmegaConf

    from probing.config import Features, ProbeConfig, ProbeKind, RunConfig
    from probing.extract import stored
    from probing.probes.data import ProbeSplit
    from probing.probes.features import vector_selection
    from probing.probes.structural.probe import Regimen
    from probing.probes.structural.run import split_sentences
    from probing.tasks.probe import _Stores, load_dev_split, load_splits

    cfg = OmegaConf.structured(RunConfig(probe=ProbeConfig()))
    cfg.data = OmegaConf.merge(cfg.data, {"name": "ud_ewt", "kind": "ud_ewt", "dir": args.dir})
    cfg.probe.kind = ProbeKind(args.kind)
    cfg.probe.features = Features.hidden
    cfg.probe.layer = args.layer
    cfg.probe.eval_split, cfg.probe.dev_split = "test", "dev"
    cfg.extract.progress = False
    pc = cfg.probe
    t0 = time.perf_counter()
    stores = _Stores(cfg.model, cfg.extract, stored("hidden"))
    train, ev, _ = load_splits(cfg.data, pc, cfg.extract, stores)
    dev = load_dev_split(cfg.data, pc, cfg.extract, stores, ev)
    stores_s = time.perf_counter() - t0
    if args.limit:
        train = ProbeSplit(train.name, train.corpus, train.store, train.indices[:args.limit])
    sel = vector_selection(train.store, pc.layer, pc.head)

    t0, c0 = time.perf_counter(), time.process_time()
    tr, dv, te = (split_sentences(pc, s, sel) for s in (train, dev, ev))
    gather = {"gather_s": round(time.perf_counter() - t0, 2), "gather_cpu_s": round(time.process_time() - c0, 2)}
    regimen = Regimen(rank=args.rank, seed=cfg.seed)
    if args.max_epochs:
        regimen = replace(regimen, max_epochs=args.max_epochs)
    runs = {"now": timed_fit(structural, args.kind, regimen, tr, dv, te)}
    if before is not None:
        runs[args.compare] = timed_fit(before, args.kind, regimen, tr, dv, te)
        runs["ratio_now_to_before"] = {k: round(runs["now"][k] / runs[args.compare][k], 3)
                                       for k in ("fit_s", "fit_cpu_s", "s_per_epoch", "cpu_s_per_epoch")}
    print(json.dumps({
        "kind": args.kind, "layer": args.layer, "train_sentences": len(tr), "train_words": int(len(tr.heads)),
        "dev_sentences": len(dv), "test_sentences": len(te), "dim": int(tr.vectors.shape[1]),
        "rank": args.rank or int(tr.vectors.shape[1]),
        "torch_threads": min(torch.get_num_threads(), structural.MAX_THREADS), "stores_s": round(stores_s, 1),
        **gather, **runs, "load_average": [round(x, 2) for x in __import__("os").getloadavg()],
        "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)}, indent=1))


if __name__ == "__main__":
    main()
