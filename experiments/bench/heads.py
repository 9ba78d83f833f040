"""Benchmark: relation accuracy of all heads x relations x both directions, from a built store.

Compares, side by side in one run:
  1. the vectorised chunked scorer (``probing.heads.head_accuracy.count_relations``) on the whole split,
     without and with bootstrap intervals (store opened inside the timing; best of 3 runs);
  2. the same scorer against a plain Python loop over sentences, words and heads on the same sentences;
  3. peak RSS of the scorer (a fresh process each) as the corpus grows.

The store is the one ``probing task=heads data=ud_ewt data.split=SPLIT`` reads, found by its key (built first
when missing; to build it beforehand:  HF_HUB_OFFLINE=1 probing task=extract data=ud_ewt data.split=train).
Run:                    python experiments/bench/heads.py --split train

Figures and findings: experiments/bench/README.md.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

DIRECTIONS = ("dep_to_head", "head_to_dep")
OFFSETS = (-3, -2, -1, 1, 2, 3)


def run_config(split: str, data_dir: str):
    """The config of ``probing task=heads data=ud_ewt``: its model, data and extraction settings key the store."""
    from probing.compose import compose_run

    return compose_run(["task=heads", "data=ud_ewt", f"data.dir={data_dir}", f"data.split={split}"])


def load(split: str, data_dir: str):
    from probing.corpus import load_corpus

    return load_corpus(run_config(split, data_dir).data)


def find_store(split: str, data_dir: str, corpus) -> Path:
    """The attention store of ``corpus`` found by its key, as task=heads finds it (built when missing), so a
    store of another kind beside it (``hidden``, a measure) is never taken."""
    from probing.config import Measure
    from probing.extract import ensure_store

    cfg = run_config(split, data_dir)
    return ensure_store(cfg.model, corpus, cfg.extract, Measure.attention).store.dir


def vectorised(store_dir: Path, corpus, indices=None, resamples: int = 0) -> tuple[float, dict]:
    from probing.config import HeadsConfig
    from probing.heads.head_accuracy import count_relations
    from probing.store import AttentionStore

    start = time.perf_counter()
    store = AttentionStore(store_dir)
    h = HeadsConfig()  # the config's chunking and label sets; resamples as asked
    counts = count_relations(store, corpus, indices, DIRECTIONS, OFFSETS, h.label_sets, resamples, 0,
                             h.chunk_words, h.block_mb)
    return time.perf_counter() - start, counts


def plain_loop(store_dir: Path, corpus, indices) -> tuple[float, dict]:
    """The obvious code: for every sentence, word, layer and head, an argmax over a row (and a column)."""
    from probing.store import AttentionStore

    start = time.perf_counter()
    store = AttentionStore(store_dir)
    hits: dict = defaultdict(lambda: np.zeros((2, store.num_layers, store.num_heads), dtype=np.int64))
    for i in indices:
        s = corpus[int(i)]
        w = np.asarray(store.words(int(i)), dtype=np.float32)
        for d, (gold, rel) in enumerate(zip(s.heads, s.relations)):
            for layer in range(store.num_layers):
                for head in range(store.num_heads):
                    row = w[layer, head, d].copy()
                    row[d] = 0.0
                    col = w[layer, head, :, d].copy()
                    col[d] = 0.0
                    for k, pred in enumerate((int(np.argmax(row)), int(np.argmax(col)))):
                        if pred == gold:
                            hits[rel][k, layer, head] += 1
                            hits["all"][k, layer, head] += 1
    return time.perf_counter() - start, hits


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def rss_child(args: argparse.Namespace) -> None:
    """Run in a fresh process: score the first ``--fraction`` of the split and print the peak RSS while
    scoring (the high-water mark is reset after the corpus is parsed, so the CoNLL-U parser's own peak does
    not hide the scorer's)."""
    corpus = load(args.split, args.data_dir)
    from probing.heads.head_accuracy import count_relations  # noqa: F401 - imports before the reset
    from probing.store import AttentionStore

    store_dir = find_store(args.split, args.data_dir, corpus)
    store = AttentionStore(store_dir)
    idx = store.indices[: max(1, int(len(store.indices) * args.fraction))]
    gc.collect()
    before = _status_mb("VmRSS")
    try:
        Path("/proc/self/clear_refs").write_text("5")  # Linux: reset VmHWM to the current RSS
        reset = True
    except OSError:
        reset = False
    seconds, _ = vectorised(store_dir, corpus, idx, args.resamples)
    peak = _status_mb("VmHWM") if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"fraction": args.fraction, "sentences": len(idx), "rss_before_mb": round(before, 1),
                      "peak_rss_mb": round(peak, 1), "seconds": round(seconds, 2), "reset": reset}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--split", default="train")
    ap.add_argument("--data-dir", default=os.environ.get("UD_EWT_DIR"), required=not os.environ.get("UD_EWT_DIR"),
                    help="the UD English EWT folder (default: $UD_EWT_DIR)")
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--loop-sentences", type=int, default=None, help="default: the whole split")
    ap.add_argument("--fractions", default="0.125,0.25,0.5,1.0")
    ap.add_argument("--fraction", type=float, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.fraction is not None:
        rss_child(args)
        return
    t = time.perf_counter()
    corpus = load(args.split, args.data_dir)
    parse_s = time.perf_counter() - t
    store_dir = find_store(args.split, args.data_dir, corpus)
    print(f"store {store_dir.name}; corpus {args.split}: {len(corpus)} sentences, "
          f"{sum(len(s) for s in corpus)} words (CoNLL-U parse {parse_s:.1f} s, not timed below)")
    vectorised(store_dir, corpus, np.arange(50))  # warm-up: imports, BLAS threads

    # best of 3: the machine is shared, the minimum is the least disturbed run
    full, counts = min((vectorised(store_dir, corpus) for _ in range(3)), key=lambda r: r[0])
    full_boot = min(vectorised(store_dir, corpus, resamples=args.resamples)[0] for _ in range(3))
    n_rel = len(counts["as_is"].relations) + len(counts["base"].relations)
    print(f"vectorised, all {len(corpus)} sentences, {n_rel} relations (as_is + base, incl. all), "
          f"72 heads, 2 directions, 6 offsets:")
    print(f"  no bootstrap:               {full:6.2f} s   (project goal < 5 s)")
    print(f"  with {args.resamples} bootstrap resamples: {full_boot:6.2f} s   ({full_boot / full:.2f}x; "
          f"project goal <= 2x)")

    subset = np.arange(len(corpus) if args.loop_sentences is None else min(args.loop_sentences, len(corpus)))
    loop_s, loop_hits = plain_loop(store_dir, corpus, subset)
    vec_s, vec_counts = min((vectorised(store_dir, corpus, subset) for _ in range(3)), key=lambda r: r[0])
    c = vec_counts["as_is"]
    lh = 2 * 72
    ok = all(np.array_equal(loop_hits[r].ravel() if r in loop_hits else np.zeros(lh), c.totals[k, :lh])
             for k, r in enumerate(c.relations))
    print(f"same {len(subset)} sentences: plain loop {loop_s:.2f} s, vectorised {vec_s:.3f} s -> "
          f"{loop_s / vec_s:.0f}x faster (project goal >= 20x); identical counts: {ok}")
    if len(subset) < len(corpus):
        print(f"  extrapolated plain loop on all {len(corpus)}: ~{loop_s * len(corpus) / len(subset):.0f} s")

    print(f"peak RSS (fresh process each, {args.resamples} bootstrap resamples):")
    for f in args.fractions.split(","):
        out = subprocess.run([sys.executable, __file__, "--split", args.split, "--data-dir", args.data_dir,
                              "--fraction", f, "--resamples", str(args.resamples)], capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"  {r['sentences']:6d} sentences: peak {r['peak_rss_mb']:7.1f} MiB while scoring, "
              f"{r['peak_rss_mb'] - r['rss_before_mb']:+6.1f} MiB over the {r['rss_before_mb']:.1f} MiB before "
              f"(corpus + imports){'' if r['reset'] else ' [peak not reset: includes parsing]'}, {r['seconds']:.2f} s")


if __name__ == "__main__":
    main()
