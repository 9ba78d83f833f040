"""Path patching of the direct path: a head's patched output reaching the readout through the residual stream
alone, every later attention and feed-forward block frozen at its clean output. The rest of the head's total effect
goes through later layers (indirect = total - direct).

Pre-LN and parallel blocks add every block's output to the residual stream, so the direct path is the clean last
residual plus the head's output change ``Δ = out(c_patched) - out(c_clean)``, through the final norm. A post-LN
block normalises the stream after each block; there ``Δ`` passes every later norm linearised at the clean run's
statistics, ``γ ⊙ (Δ - mean Δ) / σ_clean`` (the frozen-norm convention of direct logit attribution), and is added
to the clean last hidden state. Shared layers (ALBERT) are not supported.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from probing.interventions.gates import LayerCache, num_heads
from probing.mixing.families import Wiring, block_parts, get_path
from probing.patching.batches import PairBatch
from probing.patching.effects import Readout


def _norm_inputs(model: torch.nn.Module, inputs: dict, modules: Sequence[torch.nn.Module]) -> list[torch.Tensor]:
    """What each of ``modules`` receives in a clean pass (in order)."""
    seen: list = [None] * len(modules)
    hooks = [m.register_forward_pre_hook(lambda mod, args, i=i: seen.__setitem__(i, args[0]))
             for i, m in enumerate(modules)]
    try:
        with torch.inference_mode():
            model(**({**inputs, "use_cache": False} if getattr(model.config, "use_cache", False) else inputs))
    finally:
        for h in hooks:
            h.remove()
    return seen


def _through(norm: torch.nn.Module, x: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
    """``delta`` through a LayerNorm linearised at its clean input ``x``: ``γ ⊙ (Δ - mean Δ) / σ(x)``."""
    var = x.float().var(-1, unbiased=False, keepdim=True)
    out = (delta - delta.mean(-1, keepdim=True)) / torch.sqrt(var + norm.eps)
    return out * norm.weight.float() if getattr(norm, "weight", None) is not None else out


def direct_metrics(model: torch.nn.Module, batches: Sequence[PairBatch], readout: Readout,
                   heads: Sequence[tuple[int, int]], position: str) -> np.ndarray:
    """``(len(heads), S, N)``: the readout with each head's patch at ``position`` reaching it by the direct path
    only (module docstring), pairs in batch order."""
    parts = block_parts(model, "heads")
    family = parts[0].family
    if family.shared_layers:
        raise ValueError(f"{family.name}: the direct path of a shared layer is not supported")
    n_heads = num_heads(model)
    out = []
    for batch in batches:
        cache, source = LayerCache(model, batch.clean), LayerCache(model, batch.corrupt)
        norms = ([n for p in parts for n in (p.norm1, p.norm2)] if family.wiring is Wiring.post_ln
                 else [get_path(model, family.final_norm)] if family.final_norm else [])
        seen = _norm_inputs(model, batch.clean, norms)
        hidden = []
        for k, h in heads:
            c, src = cache.context[k], source.context[k]
            b, t, d = c.shape
            w = d // n_heads
            mask = batch.masks[position][..., None].to(c.dtype)
            patched = c.clone()
            patched[..., h * w:(h + 1) * w] = c[..., h * w:(h + 1) * w] + mask * (src - c)[..., h * w:(h + 1) * w]
            with torch.inference_mode():
                delta = (parts[k].out(patched) - parts[k].out(c)).float()
                if family.wiring is Wiring.post_ln:
                    for i in range(2 * k, len(norms)):
                        delta = _through(norms[i], seen[i], delta)
                    hidden.append(cache.output.float() + delta)
                else:
                    resid = (seen[0] if norms else cache.output).float() + delta
                    hidden.append(norms[0](resid.to(c.dtype)).float() if norms else resid)
        out.append(readout(torch.cat(hidden), batch).cpu())  # (R, S, B)
    return torch.cat(out, -1).double().numpy()
