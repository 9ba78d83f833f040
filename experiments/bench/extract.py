"""Extraction benchmark: MiniLM on UD English EWT dev, three ways, side by side in one run.

(a) the loop a user would write: one sentence at a time, word pooling by Python loops per layer, head and
    split word (the shape of the papers' released scripts), maps kept in a list and saved with numpy at the end;
(b) the framework: ``probing.extract.extract`` into a fresh store on disk (float16, sharded, fsynced);
(c) the model's forward pass alone on the same length-sorted batches, attention returned, nothing else.

Each mode runs in its own subprocess so its peak RSS is its own; imports and model loading are not timed.
Usage:
    HF_HUB_OFFLINE=1 python experiments/bench/extract.py [--dir PATH/TO/UD_English-EWT] [--limit N]

Figures and findings: experiments/bench/README.md.
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


def load(dir_: str, limit: int | None):
    from probing.corpus import read_conllu

    corpus = read_conllu(Path(dir_) / "en_ewt-ud-dev.conllu", split="dev", strict=True)
    return corpus.head(limit)


def word_level(head_map, groups):
    """One head's piece-level map -> word level, the way the papers' scripts do it (Clark et al. 2019's
    released code has this shape): per split word, sum its columns and average its rows, then drop the
    non-first pieces."""
    import numpy as np

    a = np.array(head_map)
    rest = [t for g in groups for t in g[1:]]
    for g in groups:
        a[:, g[0]] = a[:, g].sum(axis=-1)
    a = np.delete(a, rest, -1)
    for g in groups:
        a[g[0]] = a[g].mean(axis=0)
    return np.delete(a, rest, 0)


def user_loop(tok, model, corpus):
    """Yield one (L, H, M, M) float16 array per sentence: a forward pass per sentence, pooling per head."""
    import numpy as np
    import torch

    for s in corpus:
        enc = tok(list(s.words), is_split_into_words=True, return_tensors="pt")
        with torch.no_grad():
            attentions = model(**enc, output_attentions=True).attentions
        word_ids = enc.word_ids(0)
        groups: list[list[int]] = []
        for t, w in enumerate(word_ids):
            if w is None or t == 0 or word_ids[t - 1] != w:
                groups.append([t])
            else:
                groups[-1].append(t)
        yield np.stack([[word_level(head, groups) for head in layer[0].numpy()] for layer in attentions]
                       ).astype(np.float16)


def mode_user_loop(corpus, out: Path):
    from transformers import AutoModel, AutoTokenizer

    from probing.encoder import resolve_model_path

    path = resolve_model_path("bundled:minilm")
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path, attn_implementation="eager").eval()

    def work() -> int:
        import numpy as np

        results = list(user_loop(tok, model, corpus))
        np.savez(out / "user_loop.npz", *results)
        return len(results)

    return work


def mode_framework(corpus, out: Path):
    from probing.config import ExtractConfig, ModelConfig
    from probing.encoder import Encoder
    from probing.extract import extract

    enc = Encoder.load(ModelConfig(name="minilm", name_or_path="bundled:minilm"))
    return lambda: len(extract(enc, corpus, ExtractConfig(cache_dir=str(out), progress=False)).store)


def mode_forward_only(corpus, out: Path):
    from probing.config import ExtractConfig, ModelConfig
    from probing.encoder import Encoder

    enc = Encoder.load(ModelConfig(name="minilm", name_or_path="bundled:minilm"))
    return lambda: forward_only(enc, corpus, ExtractConfig())


def forward_only(enc, corpus, cfg) -> int:
    """Tokenise, sort and batch as the framework does, run the full model with attention returned; no more."""
    import torch

    from probing.encoder import length_batches

    items = sorted(enumerate(enc.tokenize([s.words for s in corpus])), key=lambda it: len(it[1].input_ids))
    n = 0
    for group in length_batches([len(x.input_ids) for _, x in items], cfg.batch_size, cfg.max_batch_tokens,
                                cfg.max_batch_cells):
        batch = [items[i] for i in group]
        t = max(len(x.input_ids) for _, x in batch)
        ids = torch.zeros((len(batch), t), dtype=torch.long)
        mask = torch.zeros((len(batch), t), dtype=torch.long)
        for b, (_, x) in enumerate(batch):
            ids[b, : len(x.input_ids)] = torch.tensor(x.input_ids)
            mask[b, : len(x.input_ids)] = 1
        with torch.inference_mode():
            enc.model(input_ids=ids, attention_mask=mask, output_attentions=True)
        n += len(batch)
    return n


MODES = {"a_user_loop": mode_user_loop, "b_framework": mode_framework, "c_forward_only": mode_forward_only}


def child(mode: str, dir_: str, limit: int | None) -> None:
    corpus = load(dir_, limit)
    with tempfile.TemporaryDirectory() as tmp:
        work = MODES[mode](corpus, Path(tmp))  # imports and model loading are not timed
        start = time.perf_counter()
        n = work()
        seconds = time.perf_counter() - start
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"mode": mode, "sentences": n, "seconds": seconds, "peak_rss_mb": rss_mb}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=os.environ.get("UD_EWT_DIR"), required=not os.environ.get("UD_EWT_DIR"),
                    help="the UD English EWT folder (default: $UD_EWT_DIR)")
    ap.add_argument("--limit", type=int, default=None, help="first N sentences of dev (default: all 2,001)")
    ap.add_argument("--repeat", type=int, default=2,
                    help="runs of (c) and (b), alternating; the fastest of each is reported (default 2)")
    ap.add_argument("--child", choices=list(MODES), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.dir, args.limit)
        return
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    rows: dict[str, dict] = {}
    order = ["c_forward_only", "b_framework"] * max(1, args.repeat) + ["a_user_loop"]
    for mode in order:
        cmd = [sys.executable, __file__, "--child", mode, "--dir", args.dir]
        if args.limit:
            cmd += ["--limit", str(args.limit)]
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{mode:16s} {r['sentences']:6d} sentences {r['seconds']:8.2f} s "
              f"{r['sentences'] / r['seconds']:8.1f} sentences/s  peak RSS {r['peak_rss_mb']:7.0f} MB", flush=True)
        if mode not in rows or r["seconds"] < rows[mode]["seconds"]:
            rows[mode] = r
    a, b, c = (rows[m]["seconds"] for m in ("a_user_loop", "b_framework", "c_forward_only"))
    print(f"best of {args.repeat}: (c) {c:.2f} s, (b) {b:.2f} s; (a) {a:.2f} s")
    print(f"speed-up of the framework over the user loop (a/b): {a / b:.2f}x   (project goal >= 5x)")
    print(f"framework time over forward-only time (b/c):        {b / c:.2f}x   (project goal <= 1.2x)")


if __name__ == "__main__":
    main()
