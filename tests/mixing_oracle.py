"""Test-only references for the context-mixing measures, computed the slow, obvious way from the model's own
modules (one head, one token at a time), so the fast code in probing.mixing has something independent to
agree with."""

from __future__ import annotations

import torch
from torch import nn

from probing.mixing import capture, layer_parts


def randomise(model: nn.Module, seed: int = 0) -> nn.Module:
    """Every parameter drawn at random (LayerNorm gains around 1, biases non-zero), so no identity holds by
    the accident of zero biases or unit gains."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g)
            if "LayerNorm.weight" in name or "layer_norm.weight" in name:
                p.copy_(1 + 0.3 * noise)
            elif p.dim() == 1:
                p.copy_(0.2 * noise)
            else:
                p.copy_(noise / p.shape[-1] ** 0.5)
    return model.eval()


def run(model: nn.Module, ids: torch.Tensor, mask: torch.Tensor):
    """One forward pass under the capture hooks, plus each LayerNorm-1's input and output from hooks of its
    own; returns (pieces, model attentions, ln1 inputs, ln1 outputs)."""
    ln_in, ln_out, handles = {}, {}, []
    norms = [p.norm1 for p in layer_parts(model)]

    def hook(module, args, out):  # by call order: a shared layer's one norm is layer k at its k-th call
        k = len(ln_in)
        ln_in[k], ln_out[k] = args[0].detach().clone(), out.detach().clone()

    for m in {id(n): n for n in norms}.values():
        handles.append(m.register_forward_hook(hook))
    try:
        with torch.no_grad(), capture(model) as cap:
            out = model(input_ids=ids, attention_mask=mask, output_attentions=True)
    finally:
        for h in handles:
            h.remove()
    return cap.pieces(), out.attentions, ln_in, ln_out


def per_head_values(model: nn.Module, layer: int, x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """``f^h(x_j) = (x_j W_V^h + b_V^h) W_O^h`` head by head from the weight slices: ``(B, H, T, D)``."""
    p = layer_parts(model)[layer]
    d = p.value.weight.shape[0] // n_heads
    out = []
    for h in range(n_heads):
        rows = slice(h * d, (h + 1) * d)
        v = x @ p.value.weight[rows].T + p.value.bias[rows]
        out.append(v @ p.out.weight[:, rows].T)
    return torch.stack(out, dim=1)


def _layer_output(layer: nn.Module, x: torch.Tensor) -> torch.Tensor:
    out = layer(x)
    return out[0] if isinstance(out, tuple) else out


def naive_value_zeroing(model: nn.Module, layer: int, x: torch.Tensor) -> torch.Tensor:
    """Mohebbi et al. (2023) by re-running the model's layer ``layer`` on one unpadded sentence ``x (1, T, D)``
    once per token j with j's value vectors zeroed (a hook on the value projection): ``(T, T)``, rows
    normalised. The layer's FFN is the model's own (the caller must not have bypassed it)."""
    mod = model.encoder.layer[layer] if hasattr(model, "encoder") else model.transformer.layer[layer]
    value = layer_parts(model)[layer].value
    t = x.shape[1]
    with torch.no_grad():
        y = _layer_output(mod, x)[0]
        scores = torch.zeros(t, t)
        for j in range(t):
            def zero(module, args, out, j=j):
                out = out.clone()
                out[:, j] = 0
                return out
            handle = value.register_forward_hook(zero)
            try:
                y_zero = _layer_output(mod, x)[0]
            finally:
                handle.remove()
            # in float64: a distance can be ~1e-8, below float32's resolution of a cosine near 1
            scores[:, j] = (1 - torch.nn.functional.cosine_similarity(y_zero.double(), y.double(), dim=-1)).float()
    return scores / scores.sum(-1, keepdim=True)
