"""Value zeroing's cost per sentence against sentence length, and peak RSS against corpus size (MiniLM, EWT dev).

1. Cost: EWT dev sentences binned by word pieces ([CLS] and [SEP] included), a seeded sample of up to
   ``--per-bin`` sentences per bin, batched as ``extract`` batches them (length-sorted, ``batch_size`` and
   ``max_batch_tokens`` of ``ExtractConfig``); each bin's maps (``probing.extract.word_maps``: forward pass,
   measures, pooling; no store writing, whose fixed cost per call would swamp a small bin) with
   ``[attention]`` and with ``[attention, value_zeroing]``, on the same loaded encoder in one process,
   interleaved ``--repeat`` times, the fastest run of each kept (a shared machine's noise only slows runs
   down). Prints one JSON line per bin: seconds per sentence of each list and their ratio.
2. Memory: ``[attention, value_zeroing]`` extractions of the first N dev sentences (``--sizes``), each in a
   fresh subprocess and cache; prints each child's ``ru_maxrss`` after loading the model and at the end, and
   its peak RSS during the extraction alone (``VmHWM`` after resetting it through ``/proc/self/clear_refs``
   once the model is loaded, whose own transient peak would otherwise hide the extraction's).
   ``--max-pieces`` keeps every size's longest batch alike, so that the runs measure corpus size alone.

    HF_HUB_OFFLINE=1 python experiments/bench/value_zeroing.py --per-bin 24 --repeat 2 --sizes 200 800
    HF_HUB_OFFLINE=1 python experiments/bench/value_zeroing.py --no-cost --max-pieces 32 --sizes 192 800
    (add ``--measures attention`` for the same runs with attention alone)

Value zeroing runs LN1 -> FFN -> LN2 once per (query, zeroed token) pair, so its work grows as T^2 per
sentence, where attention's forward pass is dominated by the T-linear projections and FFN at these lengths.

Figures: experiments/bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BINS = [(3, 16), (16, 32), (32, 48), (48, 64), (64, 96), (96, 10**6)]
LISTS = [["attention"], ["attention", "value_zeroing"]]


def _dev(directory: str):
    from probing.corpus import read_conllu

    return read_conllu(Path(directory) / "en_ewt-ud-dev.conllu", split="dev", strict=True)


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _reset_hwm() -> bool:
    """Reset the kernel's high-water mark of this process's RSS (Linux >= 4.0), so that it measures from here."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _hwm_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(args: argparse.Namespace) -> None:
    """One extraction of the first ``--child`` sentences in a fresh cache; prints its peak RSS."""
    from probing.config import ExtractConfig, Measure, ModelConfig
    from probing.corpus import Corpus
    from probing.encoder import load_encoder
    from probing.extract import extract

    corpus = _dev(args.dir)
    encoder = load_encoder(ModelConfig(device=args.device))
    if args.max_pieces:  # the first sentences of at most --max-pieces pieces: every size's longest batch alike
        fits = [s for s, t in zip(corpus, encoder.tokenize([s.words for s in corpus]))
                if not isinstance(t, str) and len(t.input_ids) <= args.max_pieces]
        corpus = Corpus(corpus.name, corpus.split, tuple(fits[: args.child]))
    else:
        corpus = corpus.head(args.child)
    longest = max(len(t.input_ids) for t in encoder.tokenize([s.words for s in corpus]) if not isinstance(t, str))
    loaded = _peak_mb()
    reset = _reset_hwm()  # loading the weights has a transient peak of its own; measure the extraction's
    with tempfile.TemporaryDirectory(prefix="bench_value_zeroing_") as cache:
        cfg = ExtractConfig(cache_dir=cache, progress=False, shard_mb=args.shard_mb,
                            measures=[Measure(m) for m in args.measures])
        start = time.perf_counter()
        n = len(extract(encoder, corpus, cfg).store)
    print(json.dumps({"measures": args.measures, "sentences": n, "max_pieces": args.max_pieces,
                      "longest_pieces": longest, "seconds": round(time.perf_counter() - start, 1),
                      "rss_after_model_load_mb": round(loaded), "peak_rss_mb": round(_peak_mb()),
                      "peak_rss_during_extraction_mb": round(_hwm_mb()) if reset else None}), flush=True)


def cost(args: argparse.Namespace) -> None:
    import numpy as np

    from probing.config import ExtractConfig, Measure, ModelConfig, Pooling
    from probing.encoder import load_encoder
    from probing.extract import word_maps

    corpus = _dev(args.dir)
    cfg = ExtractConfig()
    encoder = load_encoder(ModelConfig(device=args.device))
    encoder.skip_last_ffn()  # as extract() does (value zeroing calls the FFN from its own modules)
    tokenized = encoder.tokenize([s.words for s in corpus])
    pieces = np.array([0 if isinstance(t, str) else len(t.input_ids) for t in tokenized])
    lists = [[Measure(m) for m in names] for names in LISTS]
    word_maps(encoder, [t for t in tokenized[:8] if not isinstance(t, str)], Pooling(cfg.pooling), lists[1])  # warm-up
    rng = np.random.default_rng(args.seed)
    for lo, hi in BINS:
        members = np.flatnonzero((pieces >= lo) & (pieces < hi))
        if len(members) == 0:
            continue
        chosen = sorted(rng.choice(members, size=min(args.per_bin, len(members)), replace=False),
                        key=lambda i: pieces[i])
        batches, batch = [], []
        for i in chosen:  # extract()'s batching: length-sorted, capped by sentences and by padded tokens
            if batch and (len(batch) >= cfg.batch_size or pieces[i] * (len(batch) + 1) > cfg.max_batch_tokens):
                batches.append(batch)
                batch = []
            batch.append(tokenized[i])
        batches.append(batch)
        best = [float("inf")] * len(lists)
        for _ in range(args.repeat):
            for k, measures in enumerate(lists):
                start = time.perf_counter()
                for b in batches:
                    word_maps(encoder, b, Pooling(cfg.pooling), measures)
                best[k] = min(best[k], time.perf_counter() - start)
        n = len(chosen)
        print(json.dumps({"pieces": f"{lo}-{hi - 1}" if hi < 10**6 else f">={lo}", "dev_sentences": int(len(members)),
                          "timed": n, "mean_pieces": round(float(pieces[chosen].mean()), 1),
                          "attention_s_per_sentence": round(best[0] / n, 4),
                          "value_zeroing_s_per_sentence": round(best[1] / n, 4),
                          "ratio": round(best[1] / best[0], 1)}), flush=True)


def memory(args: argparse.Namespace) -> None:
    for n in args.sizes:
        cmd = [sys.executable, __file__, "--child", str(n), "--dir", args.dir, "--device", args.device,
               "--measures", *args.measures]
        cmd += ["--max-pieces", str(args.max_pieces)] if args.max_pieces else []
        cmd += ["--shard-mb", str(args.shard_mb)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True)
        print(out.stdout.strip().splitlines()[-1], flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=os.environ.get("UD_EWT_DIR"), required=not os.environ.get("UD_EWT_DIR"),
                    help="the UD English EWT folder (default: $UD_EWT_DIR)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--per-bin", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sizes", type=int, nargs="*", default=[200, 800], help="corpus sizes of the RSS runs")
    ap.add_argument("--max-pieces", type=int, default=None,
                    help="RSS corpora: only sentences of at most this many pieces (sizes a multiple of batch_size "
                         "then give every size the same longest batch)")
    ap.add_argument("--measures", nargs="+", default=["attention", "value_zeroing"], help="of the RSS runs")
    ap.add_argument("--no-cost", action="store_true")
    ap.add_argument("--shard-mb", type=int, default=64, help="extract.shard_mb of the RSS runs (each store "
                    "buffers up to this much before its first shard is written)")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child(args)
        return
    if not args.no_cost:
        cost(args)
    memory(args)


if __name__ == "__main__":
    main()
