"""Whole extraction of EWT dev sentences with MiniLM for several ``extract.measures`` lists, side by side.

Each list runs in a fresh cache (so nothing is reused; all of them under one temporary directory, removed at
exit), on the same loaded encoder, in one process, the lists interleaved ``--repeat`` times in ABBA order;
model loading is not timed. Prints one JSON line per list: the fastest run's seconds, sentences/s and ratio
to the fastest ``[attention]`` run, and every run's ratio to the ``[attention]`` run of its own repeat
(``paired_ratios``, with their median): a slow phase of a shared machine that lasts longer than one repeat
slows both sides of a pair, so the paired median is the steadier figure.

    HF_HUB_OFFLINE=1 python experiments/bench/measures.py --limit 200 --repeat 8 --no-value-zeroing

The project's goals: ``[attention,norm]`` at most 1.3x ``[attention]``, the five measures at most 2x. Figures:
experiments/bench/README.md."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

LISTS = [["attention"], ["attention", "norm"], ["attention", "norm", "norm_layer", "alti", "globenc"],
         ["attention", "value_zeroing"]]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=200)
    ap.add_argument("--dir", default=os.environ.get("UD_EWT_DIR"), required=not os.environ.get("UD_EWT_DIR"),
                    help="the UD English EWT folder (default: $UD_EWT_DIR)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-value-zeroing", action="store_true", help="skip the slow value-zeroing list")
    args = ap.parse_args()

    from probing.config import ExtractConfig, Measure, ModelConfig
    from probing.corpus import read_conllu
    from probing.encoder import load_encoder
    from probing.extract import extract

    corpus = read_conllu(Path(args.dir) / "en_ewt-ud-dev.conllu", split="dev", strict=True).head(args.limit)
    encoder = load_encoder(ModelConfig(device=args.device))
    scratch = tempfile.TemporaryDirectory(prefix="bench_measures_")  # every run's store, removed at exit
    extract(encoder, corpus.head(8), ExtractConfig(cache_dir=tempfile.mkdtemp(dir=scratch.name), progress=False))
    lists = [n for n in LISTS if not (args.no_value_zeroing and "value_zeroing" in n)]
    times: list[list[float]] = [[] for _ in lists]
    n = 0
    for r in range(args.repeat):
        order = range(len(lists)) if r % 2 == 0 else reversed(range(len(lists)))  # ABBA: drift cancels in pairs
        for i in order:
            cfg = ExtractConfig(cache_dir=tempfile.mkdtemp(dir=scratch.name), progress=False,
                                measures=[Measure(m) for m in lists[i]])
            start = time.perf_counter()
            n = len(extract(encoder, corpus, cfg).store)
            times[i].append(time.perf_counter() - start)
    for i, names in enumerate(lists):
        best = min(times[i])
        paired = sorted(t / a for t, a in zip(times[i], times[0]))  # each run against [attention] of its repeat
        print(json.dumps({"measures": names, "sentences": n, "seconds": round(best, 2),
                          "sentences_per_s": round(n / best, 1),
                          "ratio_to_attention": round(best / min(times[0]), 2),
                          "paired_ratio_median": round(statistics.median(paired), 2),
                          "paired_ratios": [round(x, 2) for x in paired]}), flush=True)
    scratch.cleanup()

if __name__ == "__main__":
    main()
