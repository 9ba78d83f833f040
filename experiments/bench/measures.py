"""Whole extraction of EWT dev sentences with MiniLM for several ``extract.measures`` lists, side by side.

Each list runs in a fresh cache (so nothing is reused), on the same loaded encoder, in one process, the
lists interleaved ``--repeat`` times and the fastest run of each kept (a shared machine's noise only slows
runs down); model loading is not timed. Prints one JSON line per list: seconds, sentences/s and the ratio
to ``[attention]``.

    HF_HUB_OFFLINE=1 python experiments/bench/measures.py --limit 200 --repeat 3

Measured on a quiet 2-core machine (2026-12-01, --limit 200 --repeat 3 --no-value-zeroing): [attention] 1.13 s
(178 sentences/s); [attention,norm] 1.54 s, 1.37x (issue 9's target: 1.3x); [attention,norm,norm_layer,alti,
globenc] 4.62 s, 4.11x (target: 2x). Both targets are still open.
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
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-value-zeroing", action="store_true", help="skip the slow value-zeroing list")
    args = ap.parse_args()

    from probing.config import ExtractConfig, Measure, ModelConfig
    from probing.corpus import read_conllu
    from probing.encoder import load_encoder
    from probing.extract import extract

    corpus = read_conllu(Path(args.dir) / "en_ewt-ud-dev.conllu", split="dev", strict=True).head(args.limit)
    encoder = load_encoder(ModelConfig(device=args.device))
    extract(encoder, corpus.head(8), ExtractConfig(cache_dir=tempfile.mkdtemp(), progress=False))  # warm-up
    lists = [n for n in LISTS if not (args.no_value_zeroing and "value_zeroing" in n)]
    best = {i: float("inf") for i in range(len(lists))}
    n = 0
    for _ in range(args.repeat):
        for i, names in enumerate(lists):
            cfg = ExtractConfig(cache_dir=tempfile.mkdtemp(), progress=False, measures=[Measure(m) for m in names])
            start = time.perf_counter()
            n = len(extract(encoder, corpus, cfg).store)
            best[i] = min(best[i], time.perf_counter() - start)
    for i, names in enumerate(lists):
        print(json.dumps({"measures": names, "sentences": n, "seconds": round(best[i], 2),
                          "sentences_per_s": round(n / best[i], 1),
                          "ratio_to_attention": round(best[i] / best[0], 2)}), flush=True)


if __name__ == "__main__":
    main()
