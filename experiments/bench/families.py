"""How extraction's cost grows with the model: a BERT-large-shaped random encoder (24 layers x 16 heads, hidden
1024) and a SmolLM2-135M-shaped random Llama (30 layers, 9 query and 3 key/value heads, hidden 576), side by
side in one run on EWT dev sentences:

(f) the bare forward pass on the framework's length-sorted batches, attention returned, nothing else;
(a) a cold extraction of ``[attention]`` into a fresh store;
(n) a cold extraction of ``[attention, norm]``.

Both models get freshly initialised weights from their config (``model.random_init``) and MiniLM's WordPiece
tokenizer (SmolLM2's own is a byte-level BPE: its pieces, and so its cost, differ). Each run is its own
subprocess, so its peak RSS is its own; imports and model set-up are not timed. The runs go f, a, n in turn,
``--repeat`` times; each ratio is taken within one repeat, and the median of those is printed.
Usage:
    HF_HUB_OFFLINE=1 python experiments/bench/families.py [--limit 500] [--repeat 2] [--models bert_large,smollm2]

Figures and findings: experiments/bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(Path(__file__).resolve().parent), str(REPO)]  # this checkout's probing, whatever is installed
from extract import forward_only, load  # noqa: E402


def shape(name: str):
    """The model's config, with MiniLM's vocabulary size (its tokenizer is the one attached)."""
    from transformers import BertConfig, LlamaConfig

    vocab = 30522
    if name == "bert_large":
        return BertConfig(vocab_size=vocab, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                          intermediate_size=4096, max_position_embeddings=512)
    if name == "smollm2":
        return LlamaConfig(vocab_size=vocab, hidden_size=576, num_hidden_layers=30, num_attention_heads=9,
                           num_key_value_heads=3, intermediate_size=1536, max_position_embeddings=2048,
                           tie_word_embeddings=True, pad_token_id=0, bos_token_id=101, eos_token_id=102)
    raise SystemExit(f"unknown model shape {name!r}: bert_large or smollm2")


def encoder(name: str, tmp: Path):
    """The random-weight encoder of a shape: its config and MiniLM's tokenizer in a folder, loaded as a user's
    ``model=local model.name_or_path=DIR model.random_init=true`` would be."""
    from transformers import AutoTokenizer

    from probing.config import ModelConfig
    from probing.encoder import Encoder, resolve_model_path

    folder = tmp / name
    shape(name).save_pretrained(str(folder))
    AutoTokenizer.from_pretrained(resolve_model_path("bundled:minilm")).save_pretrained(str(folder))
    return Encoder.load(ModelConfig(name=name, name_or_path=str(folder), random_init=True, device="cpu"))


def child(model: str, mode: str, dir_: str, limit: int) -> None:
    from probing.config import ExtractConfig, Measure
    from probing.extract import extract

    corpus = load(dir_, limit)
    with tempfile.TemporaryDirectory() as tmp:
        enc = encoder(model, Path(tmp))
        measures = {"a": [Measure.attention], "n": [Measure.attention, Measure.norm]}.get(mode)
        cfg = ExtractConfig(cache_dir=str(Path(tmp) / "cache"), progress=False, measures=measures or [])
        start = time.perf_counter()
        if mode == "f":
            n, size = forward_only(enc, corpus, cfg), 0
        else:
            report = extract(enc, corpus, cfg)
            n = len(report.store)
            size = sum(s.size_bytes() for s in report.stores.values())
        seconds = time.perf_counter() - start
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"model": model, "mode": mode, "sentences": n, "seconds": seconds, "store_bytes": size,
                      "peak_rss_mb": rss_mb}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=os.environ.get("UD_EWT_DIR"), required=not os.environ.get("UD_EWT_DIR"),
                    help="the UD English EWT folder (default: $UD_EWT_DIR)")
    ap.add_argument("--limit", type=int, default=500, help="first N sentences of EWT dev (default 500)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--models", default="bert_large,smollm2")
    ap.add_argument("--child", nargs=2, metavar=("MODEL", "MODE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.dir, args.limit)
        return
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    for model in args.models.split(","):
        runs: dict[str, list[dict]] = {"f": [], "a": [], "n": []}
        for _ in range(args.repeat):
            for mode in ("f", "a", "n"):
                cmd = [sys.executable, __file__, "--child", model, mode, "--dir", args.dir, "--limit", str(args.limit)]
                r = json.loads(subprocess.run(cmd, capture_output=True, text=True, env=env, check=True
                                              ).stdout.strip().splitlines()[-1])
                runs[mode].append(r)
                print(f"{model:10s} {mode}  {r['sentences']:5d} sentences {r['seconds']:8.2f} s  store "
                      f"{r['store_bytes'] / max(r['sentences'], 1) / 1024:8.1f} KiB/sentence  peak RSS "
                      f"{r['peak_rss_mb']:7.0f} MB", flush=True)
        a_f = statistics.median(a["seconds"] / f["seconds"] for a, f in zip(runs["a"], runs["f"]))
        n_a = statistics.median(n["seconds"] / a["seconds"] for n, a in zip(runs["n"], runs["a"]))
        print(f"{model}: [attention] extraction / bare forward {a_f:.2f}x (project goal <= 1.0x); "
              f"[attention,norm] / [attention] {n_a:.2f}x (project goal <= 1.3x); medians of {args.repeat} paired runs")


if __name__ == "__main__":
    main()
