"""Patching costs, side by side in one process, on the grammar's agreement pairs (the project's goals in brackets):

(1) all single-head patches of MiniLM (72 heads, every piece) on ``--pairs`` pairs as ``task=patching`` runs them
    (:func:`probing.patching.effects.patch_metrics`: clean and corrupt runs cached, layer k's patches run from layer k,
    ``--replicas`` at a time): the layers computed, counted at every layer's attention output projection (a layer
    started from its output projection, as a post-LN layer is, counts whole), as full forward passes against one
    pass per head and pair [at most 0.6x];
(2) attribution patching (one forward and one backward pass of the clean side a batch) against one clean plus one
    corrupt forward pass of the same batches, timed batch by batch, interleaved [at most 3x];
(3) with ``--smollm2``: SmolLM2-135M's 270 heads on ``--smollm2-pairs`` pairs, every piece, the minutes and peak RSS.

    HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 python experiments/bench/patching.py --pairs 1000
    HF_HUB_OFFLINE=1 python experiments/bench/patching.py --pairs 1000 --smollm2 --smollm2-pairs 500

Model loading and tokenisation are not timed. Figures: experiments/bench/README.md.
"""

from __future__ import annotations

import argparse
import resource
import time

KINDS = ["agreement", "agreement_pp", "agreement_relative"]


def _setup(name: str, n_pairs: int, seed: int, lm_head: bool):
    from probing.config import LmHead, ModelConfig
    from probing.corpus.minimal_pairs import generate_pairs
    from probing.encoder import load_encoder
    from probing.mixing.families import family_of
    from probing.patching.batches import ALL, make_pair_batches, prepare

    enc = load_encoder(ModelConfig(name=name, name_or_path=f"bundled:{name}"), LmHead.causal if lm_head else None)
    causal = family_of(enc.model)[0].causal
    pairs = generate_pairs(KINDS, n_pairs, seed)
    sides = prepare(enc, pairs, causal)
    ok = [i for i, s in enumerate(sides) if not isinstance(s, str)]
    return enc, make_pair_batches(enc, sides, ok, 32, 4096, causal, [ALL]), len(ok)


def _probe_readout(enc, n_pairs: int):
    """A probe readout with random weights: its cost does not depend on what it learned."""
    import torch

    from probing.patching.readouts import ProbeDiff

    g = torch.Generator().manual_seed(0)
    return ProbeDiff(torch.randn(1, enc.hidden_size, generator=g), torch.zeros(1), torch.ones(1, n_pairs))


def passes(enc, batches, readout, replicas: int) -> tuple[float, float]:
    """(1): full forward passes counted at the output projections, over heads x pairs; and the seconds."""
    # (the plain pass's seconds are timed in main, before and after, so that load drift hits both alike)
    from probing.interventions.gates import per_call
    from probing.mixing.families import block_parts
    from probing.patching.batches import ALL
    from probing.patching.effects import patch_metrics

    rows = [0]
    handles = per_call(block_parts(enc.model, "heads"), lambda k, m, args: rows.__setitem__(0, rows[0] + args[0].shape[0]))
    t0 = time.perf_counter()
    try:
        patch_metrics(enc.model, batches, readout, [ALL], replicas, residual=False, attribution=False)
    finally:
        for h in handles:
            h.remove()
    n_pairs = sum(b.size for b in batches)
    return rows[0] / enc.num_layers / (enc.num_heads * enc.num_layers * n_pairs), time.perf_counter() - t0


def plain_seconds(enc, batches) -> float:
    """One plain forward pass of every batch's clean side."""
    import torch

    t0 = time.perf_counter()
    with torch.inference_mode():
        for b in batches:
            enc.model(**b.clean)
    return time.perf_counter() - t0


def attribution_ratio(enc, batches, readout) -> tuple[float, float, float]:
    """(2): seconds of attribution patching and of one clean plus one corrupt pass, batch by batch."""
    import torch

    from probing.interventions.gates import LayerCache
    from probing.patching.batches import ALL
    from probing.patching.effects import attribution_estimates

    t_attr = t_plain = 0.0
    for b in batches:
        t0 = time.perf_counter()
        with torch.inference_mode():
            enc.model(**b.clean)
            enc.model(**b.corrupt)
        t1 = time.perf_counter()
        corrupt = LayerCache(enc.model, b.corrupt).context  # the corrupt contexts, cached by the task anyway
        t2 = time.perf_counter()
        attribution_estimates(enc.model, b, readout, corrupt, [ALL])
        t3 = time.perf_counter()
        t_plain += t1 - t0
        t_attr += t3 - t2
    return t_attr / t_plain, t_attr, t_plain


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=1000, help="MiniLM pairs for (1) and (2) (default 1000)")
    ap.add_argument("--replicas", type=int, default=12)
    ap.add_argument("--smollm2", action="store_true", help="also (3)")
    ap.add_argument("--smollm2-pairs", type=int, default=500)
    args = ap.parse_args()

    from probing.patching.readouts import LogitDiff

    enc, batches, n = _setup("minilm", args.pairs, 0, lm_head=False)
    readout = _probe_readout(enc, args.pairs)
    before = plain_seconds(enc, batches)
    ratio, seconds = passes(enc, batches, readout, args.replicas)
    plain = (before + plain_seconds(enc, batches)) / 2
    heads = enc.num_layers * enc.num_heads
    print(f"(1) MiniLM, {heads} heads x {n} pairs, every piece: {ratio:.3f}x the full passes of one per head and "
          f"pair, counting every layer entered as whole ((L + 1) / 2L = "
          f"{(enc.num_layers + 1) / (2 * enc.num_layers):.3f}, plus the two cached runs); {seconds:.1f} s against "
          f"{heads} x {plain:.2f} s of one plain pass: {seconds / (heads * plain):.3f}x (project goal <= 0.6x)",
          flush=True)
    r, ta, tp = attribution_ratio(enc, batches, readout)
    print(f"(2) attribution patching {ta:.2f} s against one clean + one corrupt pass {tp:.2f} s: {r:.2f}x "
          f"(project goal <= 3x)", flush=True)
    if args.smollm2:
        enc, batches, n = _setup("smollm2_q4", args.smollm2_pairs, 0, lm_head=True)
        ratio, seconds = passes(enc, batches, LogitDiff(enc.lm_head), args.replicas)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"(3) SmolLM2, 270 heads x {n} pairs, every piece: {seconds / 60:.1f} min, {ratio:.3f}x the full "
              f"passes of one per head and pair, peak RSS {rss:.0f} MB", flush=True)


if __name__ == "__main__":
    main()
