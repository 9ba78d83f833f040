"""Whole extraction of EWT dev sentences with MiniLM for several ``extract.measures`` lists, side by side.

Each list runs in a fresh cache (so nothing is reused), on the same loaded encoder, in one process; model
loading is not timed. Prints one JSON line per list: seconds, sentences/s and the ratio to ``[attention]``.

    HF_HUB_OFFLINE=1 python experiments/bench/measures.py --limit 200
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

LISTS = [["attention"], ["attention", "norm"], ["attention", "norm", "norm_layer", "alti", "globenc"],
         ["attention", "value_zeroing"]]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=200)
    ap.add_argument("--dir", default=os.environ.get("UD_EWT_DIR", "../shared/data/ud_english_ewt"))
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()

    from probing.config import ExtractConfig, Measure, ModelConfig
    from probing.corpus import read_conllu
    from probing.encoder import load_encoder
    from probing.extract import extract

    corpus = read_conllu(Path(args.dir) / "en_ewt-ud-dev.conllu", split="dev", strict=True).head(args.limit)
    encoder = load_encoder(ModelConfig(device=args.device))
    extract(encoder, corpus.head(8), ExtractConfig(cache_dir=tempfile.mkdtemp(), progress=False))  # warm-up
    base = None
    for names in LISTS:
        cfg = ExtractConfig(cache_dir=tempfile.mkdtemp(), progress=False, measures=[Measure(n) for n in names])
        start = time.perf_counter()
        report = extract(encoder, corpus, cfg)
        seconds = time.perf_counter() - start
        base = base or seconds
        print(json.dumps({"measures": names, "sentences": len(report.store), "seconds": round(seconds, 2),
                          "sentences_per_s": round(len(report.store) / seconds, 1),
                          "ratio_to_attention": round(seconds / base, 2)}), flush=True)


if __name__ == "__main__":
    main()
