"""Per-pair metrics of patched runs: every head's output from the corrupt run put into the clean run at each
named position (activation patching), every layer's input at each named position (the residual stream), and
gradient × (corrupt − clean) head outputs (attribution patching).

Per batch the clean and the corrupt run are cached (:class:`~probing.interventions.gates.LayerCache`); the patches
of layer k run ``replicas`` at a time from layer k of the clean cache (a post-LN layer from its output projection
on), so all single-head patches cost about (L + 1) / 2L of one pass per head.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

from probing.interventions.gates import LayerCache, frozen, num_heads
from probing.interventions.patches import context_probes, patched
from probing.patching.batches import PairBatch

Readout = Callable[[torch.Tensor, PairBatch], torch.Tensor]  # hidden (R·B, T, D) -> metric (R, S, B)


@dataclass(frozen=True)
class PairMetrics:
    """Metrics per readout and pair (``S`` readouts; pairs last, in the order of ``pairs``): ``clean``/``corrupt``
    ``(S, N)``; ``heads[position]`` ``(L, H, S, N)`` with that head patched there; ``residual[position]``
    ``(L, S, N)`` with layer l's input patched there; ``attribution[position]`` ``(L, H, S, N)`` the first-order
    estimate of ``heads`` minus ``clean``."""

    pairs: np.ndarray
    clean: np.ndarray
    corrupt: np.ndarray
    heads: dict
    residual: dict
    attribution: dict


def _layer_patches(cache: LayerCache, source: LayerCache, batch: PairBatch, readout: Readout, k: int,
                   names: Sequence[str], n_heads: int, replicas: int) -> dict:
    """``{position: (H, S, B)}``: the metrics with each head of layer k patched at each position."""
    model, n_layers = cache.model, len(cache.parts)
    combos = [(name, h) for name in names for h in range(n_heads)]
    out: dict = {name: [None] * n_heads for name in names}
    for a in range(0, len(combos), replicas):
        chunk = combos[a:a + replicas]
        gates = torch.ones(len(chunk), n_layers, n_heads, device=cache.output.device)
        for r, (_, h) in enumerate(chunk):
            gates[r, k, h] = 0
        positions = torch.stack([batch.masks[name] for name, _ in chunk])
        with patched(model, source.context, gates, positions):
            values = readout(cache.run_from(k, len(chunk)), batch).cpu()
        for r, (name, h) in enumerate(chunk):
            out[name][h] = values[r]
    return {name: torch.stack(v) for name, v in out.items()}


def _residual_patches(cache: LayerCache, source: LayerCache, batch: PairBatch, readout: Readout, k: int,
                      names: Sequence[str]) -> dict:
    """``{position: (S, B)}``: the metrics with layer k's input taken from ``source`` at each position."""
    masks = torch.stack([batch.masks[name] for name in names])[..., None]  # (R, B, T, 1)
    x, y = cache.hidden[k], source.hidden[k]
    start = (x[None] + masks.to(x.dtype) * (y - x)[None]).reshape(-1, *x.shape[1:])
    values = readout(cache.run_from(k, len(names), start=start), batch).cpu()
    return {name: values[r] for r, name in enumerate(names)}


def patch_metrics(model: torch.nn.Module, batches: Sequence[PairBatch], readout: Readout, names: Sequence[str],
                  replicas: int, residual: bool = True, attribution: bool = True) -> PairMetrics:
    """Every single-head patch at every position in ``names`` (and the residual stream, the attribution
    estimates) for the pairs of ``batches``."""
    n_heads = num_heads(model)
    cols: dict[str, list] = {"clean": [], "corrupt": []}
    heads: dict[str, list] = {n: [] for n in names}
    resid: dict[str, list] = {n: [] for n in names}
    attr: dict[str, list] = {n: [] for n in names}
    for batch in batches:
        cache, source = LayerCache(model, batch.clean), LayerCache(model, batch.corrupt)
        cols["clean"].append(readout(cache.output, batch)[0].cpu())
        cols["corrupt"].append(readout(source.output, batch)[0].cpu())
        n_layers = len(cache.parts)
        per_layer = [_layer_patches(cache, source, batch, readout, k, names, n_heads, replicas)
                     for k in range(n_layers)]
        for n in names:
            heads[n].append(torch.stack([p[n] for p in per_layer]))  # (L, H, S, B)
        if residual:
            per_layer_r = [_residual_patches(cache, source, batch, readout, k, names) for k in range(n_layers)]
            for n in names:
                resid[n].append(torch.stack([p[n] for p in per_layer_r]))  # (L, S, B)
        if attribution:
            a = attribution_estimates(model, batch, readout, source.context, names)
            for n in names:
                attr[n].append(a[n])
    cat = lambda xs: torch.cat(xs, -1).double().numpy()  # noqa: E731
    return PairMetrics(np.concatenate([b.pairs for b in batches]), cat(cols["clean"]), cat(cols["corrupt"]),
                       {n: cat(v) for n, v in heads.items()},
                       {n: cat(v) for n, v in resid.items()} if residual else {},
                       {n: cat(v) for n, v in attr.items()} if attribution else {})


def attribution_estimates(model: torch.nn.Module, batch: PairBatch, readout: Readout,
                          corrupt_context: Sequence[torch.Tensor], names: Sequence[str]) -> dict:
    """``{position: (L, H, S, B)}``: ``∂m/∂c · (c_corrupt − c_clean)`` summed over the position's pieces and each
    head's slice, from one forward pass of the clean side and one backward pass a readout (Nanda 2023's
    attribution patching, per head)."""
    n_heads = num_heads(model)
    per_readout = []
    with frozen(model), torch.enable_grad(), context_probes(model) as probes:
        inputs = {**batch.clean, "use_cache": False} if getattr(model.config, "use_cache", False) else batch.clean
        metric = readout(model(**inputs).last_hidden_state, batch)[0]  # (S, B)
        for s in range(metric.shape[0]):
            grads = torch.autograd.grad(metric[s].sum(), [p.zero for p in probes], retain_graph=True,
                                        allow_unused=True)
            per_readout.append([torch.zeros_like(p.zero) if g is None else g for g, p in zip(grads, probes)])
    out = {}
    for name in names:
        mask = batch.masks[name][..., None, None].float()  # (B, T, 1, 1)
        layers = []
        for k, probe in enumerate(probes):
            b, t, d = probe.clean.shape
            diff = (corrupt_context[k] - probe.clean).float().view(b, t, n_heads, d // n_heads)
            layers.append(torch.stack([((g[k].float().view(b, t, n_heads, -1) * diff) * mask).sum((1, 3)).T
                                       for g in per_readout], 1).cpu())  # (H, S, B)
        out[name] = torch.stack(layers)
    return out
