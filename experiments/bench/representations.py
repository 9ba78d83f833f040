"""Storing ``hidden`` and ``heads`` beside the attention maps: extraction time and disk size against
attention-only extraction, side by side in one run, on EWT train sentences with MiniLM.

Each configuration runs in a fresh cache (nothing reused; all under one temporary directory, removed at exit),
on the same loaded encoder, in one process, the configurations interleaved ``--repeat`` times in ABBA order
and the fastest run of each kept (a shared machine's noise only slows runs down), with every run's ratio to the
attention-only run of its own repeat and their median (``paired_ratio_median``); model loading is not timed.
Prints one JSON line per configuration (wall and process CPU seconds, their ratios to attention only, MiB of
each store) and one with the disk size of the whole of EWT train, computed exactly from its sentences' lengths
(float16: ``(L+1)·M·D`` + ``L·H·M·d`` values against ``L·H·M²`` for the maps, M positions a sentence).
``--configs`` runs attention alone beside only the named stores. The project's goal: attention + hidden + heads at most
1.2x attention only.

    HF_HUB_OFFLINE=1 python experiments/bench/representations.py --limit 200 --repeat 4
    HF_HUB_OFFLINE=1 python experiments/bench/representations.py --limit 1000 --repeat 8 --configs hidden+heads

Figures: experiments/bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

CONFIGS = {"attention": [], "hidden": ["hidden"], "heads": ["heads"], "hidden+heads": ["hidden", "heads"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=1000, help="first N sentences of EWT train")
    ap.add_argument("--dir", default=os.environ.get("UD_EWT_DIR"), required=not os.environ.get("UD_EWT_DIR"),
                    help="the UD English EWT folder (default: $UD_EWT_DIR)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--configs", nargs="+", choices=list(CONFIGS)[1:], default=list(CONFIGS)[1:],
                    help="what is stored beside attention (always run first): fewer configurations put each one's "
                         "runs nearer its attention-only runs in time")
    args = ap.parse_args()
    configs = [CONFIGS["attention"]] + [CONFIGS[c] for c in args.configs]

    import numpy as np
    import torch

    from probing.config import ExtractConfig, ModelConfig, Representation
    from probing.corpus import read_conllu
    from probing.encoder import load_encoder
    from probing.extract import extract

    full = read_conllu(Path(args.dir) / "en_ewt-ud-train.conllu", split="train", strict=True)
    corpus = full.head(args.limit)
    encoder = load_encoder(ModelConfig(device=args.device))
    scratch = tempfile.TemporaryDirectory(prefix="bench_representations_")  # every run's store, removed at exit
    extract(encoder, corpus.head(8), ExtractConfig(cache_dir=tempfile.mkdtemp(dir=scratch.name), progress=False))
    wall: list[list[float]] = [[] for _ in configs]
    cpu: list[list[float]] = [[] for _ in configs]  # this process's CPU seconds: less sensitive to other jobs
    sizes: list[dict] = [{} for _ in configs]
    n = 0
    for r in range(args.repeat):
        order = range(len(configs)) if r % 2 == 0 else reversed(range(len(configs)))  # ABBA: drift cancels
        for k in order:
            cfg = ExtractConfig(cache_dir=tempfile.mkdtemp(dir=scratch.name), progress=False, batch_size=args.batch_size,
                                representations=[Representation(r) for r in configs[k]])
            start, start_cpu = time.perf_counter(), time.process_time()
            report = extract(encoder, corpus, cfg)
            wall[k].append(time.perf_counter() - start)
            cpu[k].append(time.process_time() - start_cpu)
            n = len(report.store)
            sizes[k] = {str(name): round(s.size_bytes() / 2**20, 1) for name, s in report.stores.items()}
    for k, reps in enumerate(configs):
        best, best_cpu = min(wall[k]), min(cpu[k])
        paired = sorted(t / a for t, a in zip(wall[k], wall[0]))  # each run against attention only, same repeat
        print(json.dumps({"representations": reps, "sentences": n, "seconds": round(best, 2),
                          "sentences_per_s": round(n / best, 1), "ratio_to_attention": round(best / min(wall[0]), 3),
                          "paired_ratio_median": round(statistics.median(paired), 3),
                          "paired_ratios": [round(x, 2) for x in paired],
                          "cpu_seconds": round(best_cpu, 2), "cpu_ratio_to_attention": round(best_cpu / min(cpu[0]), 3),
                          "store_mib": sizes[k]}), flush=True)
    scratch.cleanup()
    # the whole of EWT train on disk, float16, from its sentences' position counts (MiniLM: [CLS] ... [SEP])
    m = np.array([t.n_positions for t in encoder.tokenize([s.words for s in full])
                  if not isinstance(t, str)], dtype=np.int64)
    n_layers, n_heads, width = encoder.num_layers, encoder.num_heads, encoder.hidden_size
    gib = {"attention": float(n_layers * n_heads * (m**2).sum()), "hidden": float((n_layers + 1) * width * m.sum()),
           "heads": float(n_layers * width * m.sum())}
    print(json.dumps({"ewt_train_sentences": int(len(m)), "device": args.device,
                      "torch_threads": torch.get_num_threads(),
                      "ewt_train_float16_gib": {k: round(2 * v / 2**30, 3) for k, v in gib.items()}}), flush=True)


if __name__ == "__main__":
    main()
