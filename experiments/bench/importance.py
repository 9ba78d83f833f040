"""Single-head ablation of all 72 MiniLM heads on EWT dev against 72 plain forward passes over the same
batches, and gradient importance against one plain forward pass, side by side in one process (the project's goals:
at most 0.75x and 4x).

The ablation runs as ``task=importance`` does (:func:`probing.importance.scores.evaluate`, mean ablation,
the embedding readout so that no probe has to be fitted): the lower layers and layer k's attention come from
one cached clean pass, ``--replicas`` ablations share a pass. The gradient runs the relation readout's loss
(a probe with random weights: its cost does not depend on what it learned) through one forward and backward
pass per batch. Each variant is timed ``--repeat`` times, the fastest kept; ``--interleave`` times them batch
by batch instead (a plain pass, the 72 ablations, the gradient), so that load drift hits all three alike.
Model loading, tokenisation and the corpus mean are not timed.

    HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 python experiments/bench/importance.py --replicas 12 --interleave
    HF_HUB_OFFLINE=1 python experiments/bench/importance.py --limit 32 --repeat 1 --no-reuse

Figures: experiments/bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=None, help="first N dev sentences (default: all 2001)")
    ap.add_argument("--dir", default=os.environ.get("UD_EWT_DIR"), required=not os.environ.get("UD_EWT_DIR"),
                    help="the UD English EWT folder (default: $UD_EWT_DIR)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--replicas", type=int, nargs="+", default=[1, 12])
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--no-reuse", action="store_true", help="also time the ablation without the layer cache")
    ap.add_argument("--interleave", action="store_true",
                    help="batch by batch: one plain pass, the 72 ablations, the gradient of that batch, each timed "
                         "(load drift hits all three alike); 72 plain passes = 72 x the plain times")
    ap.add_argument("--scale-plain", action="store_true",
                    help="72 plain passes as 72 x one plain pass (timed before and after the rest, mean), not run")
    args = ap.parse_args()

    import torch

    from probing.config import ModelConfig
    from probing.corpus import read_conllu
    from probing.encoder import load_encoder
    from probing.importance.inputs import make_batches
    from probing.importance.readouts import EmbeddingReadout, RelationReadout
    from probing.importance.scores import evaluate, gradients
    from probing.interventions.gates import head_means

    corpus = read_conllu(Path(args.dir) / "en_ewt-ud-dev.conllu", split="dev", strict=True)
    corpus = corpus.head(args.limit) if args.limit else corpus
    encoder = load_encoder(ModelConfig(device=args.device))
    net = encoder.model
    batches = make_batches(encoder, corpus, args.batch_size, 4096)
    n_layers, n_heads = encoder.num_layers, encoder.num_heads
    mean = head_means(net, [b.inputs for b in batches]).to(encoder.device)
    single = torch.ones(n_layers * n_heads, n_layers * n_heads)
    single[torch.arange(n_layers * n_heads), torch.arange(n_layers * n_heads)] = 0
    single = single.view(-1, n_layers, n_heads)
    d = net.config.hidden_size
    g = torch.Generator().manual_seed(0)
    labels = sorted({r for s in corpus for r in s.relations})
    relation = RelationReadout(corpus, "mean_sum", torch.randn(len(labels), 2 * d, generator=g) * 0.05,
                               torch.zeros(len(labels)), labels)

    def plain(times: int) -> None:
        with torch.inference_mode():
            for batch in batches:
                for _ in range(times):
                    net(**batch.inputs)

    runs = {f"plain_x{n_layers * n_heads}": lambda: plain(n_layers * n_heads), "plain_x1": lambda: plain(1),
            "gradient": lambda: gradients(net, batches, relation, mean, torch.ones(n_layers, n_heads))}
    if args.scale_plain:  # each of the 72 passes is the same work: one pass, timed before and after the rest
        del runs[f"plain_x{n_layers * n_heads}"]
    for r in args.replicas:
        runs[f"ablation_r{r}"] = lambda r=r: evaluate(net, batches, EmbeddingReadout(), single, mean, r)
    if args.no_reuse:
        runs["ablation_r12_no_reuse"] = lambda: evaluate(net, batches, EmbeddingReadout(), single, mean, 12,
                                                         reuse=False)
    evaluate(net, batches[:1], EmbeddingReadout(), single[:2], mean, 2)  # warm-up
    if args.interleave:
        _interleaved(args, batches, net, single, mean, relation, plain_batch=lambda b: net(**b.inputs))
        return
    best = {k: float("inf") for k in runs}
    for _ in range(args.repeat):
        for k, f in runs.items():
            t0 = time.perf_counter()
            f()
            best[k] = min(best[k], time.perf_counter() - t0)
    if args.scale_plain:
        t0 = time.perf_counter()
        plain(1)
        after = time.perf_counter() - t0
        print(json.dumps({"run": "plain_x1_before_after", "seconds": [round(best["plain_x1"], 2), round(after, 2)]}))
        best["plain_x1"] = (best["plain_x1"] + after) / 2
        best[f"plain_x{n_layers * n_heads}"] = n_layers * n_heads * best["plain_x1"]
    plain72, plain1 = best[f"plain_x{n_layers * n_heads}"], best["plain_x1"]
    for k, s in best.items():
        row = {"run": k, "sentences": len(corpus), "batches": len(batches), "seconds": round(s, 2),
               "threads": torch.get_num_threads()}
        if k.startswith("ablation"):
            row["ratio_to_72_plain_passes"] = round(s / plain72, 3)
        if k == "gradient":
            row["ratio_to_one_plain_pass"] = round(s / plain1, 2)
        print(json.dumps(row), flush=True)


def _interleaved(args, batches, net, single, mean, relation, plain_batch) -> None:
    """Per batch: a plain pass, the single-head ablations (``--replicas``' last value a pass) and the
    gradient, timed one after the other; totals and ratios over all batches."""
    import torch

    from probing.importance.readouts import EmbeddingReadout
    from probing.importance.scores import evaluate, gradients

    n_layers, n_heads = single.shape[1:]
    tot = {"plain_x1": 0.0, "ablation": 0.0, "gradient": 0.0}
    for batch in batches:
        t0 = time.perf_counter()
        with torch.inference_mode():
            plain_batch(batch)
        t1 = time.perf_counter()
        evaluate(net, [batch], EmbeddingReadout(), single, mean, args.replicas[-1])
        t2 = time.perf_counter()
        gradients(net, [batch], relation, mean, torch.ones(n_layers, n_heads))
        t3 = time.perf_counter()
        tot["plain_x1"] += t1 - t0
        tot["ablation"] += t2 - t1
        tot["gradient"] += t3 - t2
    print(json.dumps({"mode": "interleaved", "sentences": sum(b.size for b in batches), "batches": len(batches),
                      "threads": torch.get_num_threads(), "replicas": args.replicas[-1],
                      "seconds": {k: round(v, 2) for k, v in tot.items()},
                      "plain_x72_seconds": round(n_layers * n_heads * tot["plain_x1"], 2),
                      "ablation_ratio_to_72_plain_passes": round(tot["ablation"] / (n_layers * n_heads * tot["plain_x1"]), 3),
                      "gradient_ratio_to_one_plain_pass": round(tot["gradient"] / tot["plain_x1"], 2)}), flush=True)


if __name__ == "__main__":
    main()
