"""Gates on attention heads: a gate per (layer, head) on the head's context vector just before the
layer's attention output projection, set by a forward pre-hook on the model's own module (transformers 5 has no
``head_mask``). The layout is found by structure (:func:`~probing.mixing.layout.layer_parts`), so BERT,
RoBERTa, MiniLM and DistilBERT all work and this module needs only torch.

A gated context vector is ``ξ·c + (1 − ξ)·m``: ``m`` is 0 (zero ablation) or the head's mean context vector
over a corpus (mean ablation, which keeps the next module's input distribution). ``ξ = 1`` leaves the head
as it is (bit-identical: the hook is not even applied where every gate of a layer is 1 and none needs a
gradient), ``ξ = 0`` ablates it, and a ``ξ`` that requires a gradient gives Michel et al.'s (2019) head
importance ``∂L/∂ξ``.

Several ablations run in one pass: gates have a leading replica axis ``R`` and the model sees the batch
repeated ``R`` times along dim 0 (replica-major), replica r gated by ``gates[r]``. :class:`LayerCache` runs
the lower layers once and starts a replicated pass at layer k, which is what makes ablating every head
cheaper than one full pass per head.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterable, Iterator, Optional

import torch
from torch import nn

from probing.mixing.layout import LayerParts, _find_layers, layer_parts


def num_heads(model: nn.Module) -> int:
    """Attention heads per layer, from the model's config (BERT-style or DistilBERT names)."""
    cfg = model.config
    return int(getattr(cfg, "num_attention_heads", None) or cfg.n_heads)


def _gate(x: torch.Tensor, gate: torch.Tensor, mean: Optional[torch.Tensor]) -> torch.Tensor:
    """``x (R·B, T, D)`` context vectors, ``gate (R, H)``, ``mean (H, d)`` or None -> gated ``(R·B, T, D)``."""
    r, h = gate.shape
    rb, t, d = x.shape
    xs = x.view(r, rb // r, t, h, d // h)
    g = gate.to(x.dtype)[:, None, None, :, None]
    y = xs * g if mean is None else xs * g + (1 - g) * mean.to(x.dtype)
    return y.reshape(rb, t, d)


@contextmanager
def gated(model: nn.Module, gates: torch.Tensor, mean: Optional[torch.Tensor] = None) -> Iterator[None]:
    """Gate every head inside the block. ``gates (R, L, H)``: replica r's gate on layer l, head h, for a
    batch of ``R·B`` sequences (replica-major); ``mean (L, H, d)``: the mean-ablation vectors (None: zero).
    Hooks are removed on exit."""
    parts = layer_parts(model)
    if gates.dim() != 3 or gates.shape[1:] != (len(parts), num_heads(model)):
        raise ValueError(f"gates of shape {tuple(gates.shape)}: expected (replicas, {len(parts)}, "
                         f"{num_heads(model)})")
    active = list(range(len(parts)))
    if not gates.requires_grad:
        active = [k for k in active if not bool((gates[:, k] == 1).all())]
    handles = []
    for k in active:
        def pre(module: nn.Module, args: tuple, k: int = k) -> tuple:
            return (_gate(args[0], gates[:, k], None if mean is None else mean[k]),) + tuple(args[1:])

        handles.append(parts[k].out.register_forward_pre_hook(pre))
    try:
        yield
    finally:
        for hd in handles:
            hd.remove()


def head_means(model: nn.Module, batches: Iterable[dict]) -> torch.Tensor:
    """``(L, H, d)`` float32: every head's mean context vector over the real (unpadded) positions of
    ``batches`` (dicts of model inputs with ``attention_mask``), special tokens included."""
    parts, h = layer_parts(model), num_heads(model)
    sums: list[Optional[torch.Tensor]] = [None] * len(parts)
    count = torch.zeros(())
    mask: dict[str, torch.Tensor] = {}

    def pre(module: nn.Module, args: tuple, k: int) -> None:
        x = args[0].float()
        s = (x * mask["m"][..., None]).sum((0, 1))
        sums[k] = s if sums[k] is None else sums[k] + s

    handles = [p.out.register_forward_pre_hook(lambda m, a, k=k: pre(m, a, k)) for k, p in enumerate(parts)]
    try:
        with torch.inference_mode():
            for batch in batches:
                mask["m"] = batch["attention_mask"].float()
                count = count + mask["m"].sum().cpu()
                model(**batch)
    finally:
        for hd in handles:
            hd.remove()
    if count == 0:
        raise ValueError("head means: no positions in the batches")
    d = sums[0].shape[0]
    return torch.stack([s.cpu() / count for s in sums]).view(len(parts), h, d // h)


def _repeat(x: Any, r: int, b: int) -> Any:
    """Tensors with the batch on dim 0 repeated ``r`` times along it (replica-major); anything else as is."""
    if isinstance(x, torch.Tensor) and x.dim() > 0 and x.shape[0] == b and r > 1:
        return x.repeat(r, *([1] * (x.dim() - 1)))
    return x


class LayerCache:
    """One clean pass of ``inputs`` (a dict of model inputs) with every layer's input, call arguments and
    attention context kept, so that a gated pass can start at layer k (:meth:`run_from`) instead of at the
    embeddings. ``output`` is the clean last hidden state ``(B, T, D)``."""

    def __init__(self, model: nn.Module, inputs: dict):
        self.model = model
        self.parts: list[LayerParts] = layer_parts(model)
        self.layers = _find_layers(model)
        n = len(self.parts)
        self.hidden: list[Optional[torch.Tensor]] = [None] * n
        self.context: list[Optional[torch.Tensor]] = [None] * n
        self.calls: list[Optional[tuple[tuple, dict]]] = [None] * n
        handles = []
        for k in range(n):
            def on_layer(module: nn.Module, args: tuple, kwargs: dict, k: int = k) -> None:
                self.hidden[k] = args[0] if args else kwargs["hidden_states"]
                self.calls[k] = (tuple(args[1:]), {key: v for key, v in kwargs.items() if key != "hidden_states"})

            def on_out(module: nn.Module, args: tuple, k: int = k) -> None:
                self.context[k] = args[0]

            handles.append(self.layers[k].register_forward_pre_hook(on_layer, with_kwargs=True))
            handles.append(self.parts[k].out.register_forward_pre_hook(on_out))
        try:
            with torch.inference_mode():
                self.output: torch.Tensor = model(**inputs).last_hidden_state
        finally:
            for hd in handles:
                hd.remove()
        self.batch = self.output.shape[0]

    def run_from(self, k: int, replicas: int) -> torch.Tensor:
        """The last hidden state ``(replicas·B, T, D)`` of a pass that reuses layers below k and layer k's
        attention weights (identical in every replica: only its output projection onward sees the gates).
        Call it inside :func:`gated` with gates of ``replicas`` rows; their rows for layers below k are ignored."""
        r, b = replicas, self.batch
        p = self.parts[k]
        with torch.inference_mode():
            x = _repeat(self.hidden[k], r, b)
            # the rest of layer k as BertSelfOutput / BertOutput (and DistilBERT's block) compute it
            h = p.ln1(p.out(_repeat(self.context[k], r, b)) + x)
            y = p.ln2(h + p.ffn(h))
            for j in range(k + 1, len(self.parts)):
                args, kwargs = self.calls[j]
                y = self.layers[j](y, *[_repeat(a, r, b) for a in args],
                                   **{key: _repeat(v, r, b) for key, v in kwargs.items()})
                y = y[0] if isinstance(y, tuple) else y
        return y
