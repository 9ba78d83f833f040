"""Gates on attention heads: a gate per (layer, head) on the head's context vector just before the
layer's attention output projection, set by a forward pre-hook on the model's own module (transformers 5 has no
``head_mask``). The output projection is found through the model's family entry
(:mod:`probing.mixing.families`), the one part gates need, so every family works and this module needs only
torch. A shared layer (ALBERT) is gated per call: its k-th call in a pass is layer k.

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

from probing.mixing.families import (
    BlockParts,
    CallOrder,
    Wiring,
    block_parts,
    distinct,
    family_of,
    get_path,
    head_counts,
)


def num_heads(model: nn.Module) -> int:
    """Attention (query) heads per layer, from the model's config."""
    return head_counts(model, family_of(model)[0])[0]


def per_call(parts: list[BlockParts], hook: Any) -> list[Any]:
    """Forward pre-hooks ``hook(k, module, args)`` on every layer's output projection, ``k`` the layer the call
    is for: a distinct module's own index, or a shared module's call count in the pass."""
    modules = [p.out for p in parts]
    if len(distinct(modules)) == len(modules):
        return [m.register_forward_pre_hook(lambda mod, args, k=k: hook(k, mod, args)) for k, m in enumerate(modules)]
    order = CallOrder(len(modules))
    return [modules[0].register_forward_pre_hook(lambda mod, args: hook(order.take(), mod, args))]


@contextmanager
def hooked(parts: list[BlockParts], hook: Any) -> Iterator[None]:
    """``hook(k, module, args)`` on every layer's output projection inside the block (:func:`per_call`), removed
    on exit."""
    handles = per_call(parts, hook)
    try:
        yield
    finally:
        for hd in handles:
            hd.remove()


@contextmanager
def frozen(model: nn.Module) -> Iterator[None]:
    """No parameter gradients inside the block, only those of what the pass adds (gates, patch probes): half
    the backward pass."""
    flags = [p.requires_grad for p in model.parameters()]
    for p in model.parameters():
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, f in zip(model.parameters(), flags):
            p.requires_grad_(f)


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
    parts = block_parts(model, "heads")
    if gates.dim() != 3 or gates.shape[1:] != (len(parts), num_heads(model)):
        raise ValueError(f"gates of shape {tuple(gates.shape)}: expected (replicas, {len(parts)}, "
                         f"{num_heads(model)})")
    idle = set() if gates.requires_grad else {k for k in range(len(parts)) if bool((gates[:, k] == 1).all())}

    def pre(k: int, module: nn.Module, args: tuple) -> Optional[tuple]:
        if k in idle:
            return None
        return (_gate(args[0], gates[:, k], None if mean is None else mean[k]),) + tuple(args[1:])

    with hooked(parts, pre):
        yield


def head_means(model: nn.Module, batches: Iterable[dict]) -> torch.Tensor:
    """``(L, H, d)`` float32: every head's mean context vector over the real (unpadded) positions of
    ``batches`` (dicts of model inputs with ``attention_mask``), special tokens included."""
    parts, h = block_parts(model, "heads"), num_heads(model)
    sums: list[Optional[torch.Tensor]] = [None] * len(parts)
    count = torch.zeros(())
    mask: dict[str, torch.Tensor] = {}

    def pre(k: int, module: nn.Module, args: tuple) -> None:
        x = args[0].float()
        s = (x * mask["m"][..., None]).sum((0, 1))
        sums[k] = s if sums[k] is None else sums[k] + s

    with hooked(parts, pre), torch.inference_mode():
        for batch in batches:
            mask["m"] = batch["attention_mask"].float()
            count = count + mask["m"].sum().cpu()
            model(**batch)
    if count == 0:
        raise ValueError("head means: no positions in the batches")
    d = sums[0].shape[0]
    return torch.stack([s.cpu() / count for s in sums]).view(len(parts), h, d // h)


def _repeat(x: Any, r: int, b: int) -> Any:
    """Tensors with the batch on dim 0 repeated ``r`` times along it (replica-major), inside tuples too (a
    decoder's rotary ``position_embeddings``); anything else as is."""
    if isinstance(x, tuple):
        return tuple(_repeat(y, r, b) for y in x)
    if isinstance(x, torch.Tensor) and x.dim() > 0 and x.shape[0] == b and r > 1:
        return x.repeat(r, *([1] * (x.dim() - 1)))
    return x


class LayerCache:
    """One clean pass of ``inputs`` (a dict of model inputs) with every layer's input, call arguments and
    attention context kept, so that a gated pass can start at layer k (:meth:`run_from`) instead of at the
    embeddings. ``output`` is the clean last hidden state ``(B, T, D)``."""

    def __init__(self, model: nn.Module, inputs: dict):
        self.model = model
        self.parts: list[BlockParts] = block_parts(model, "heads")
        self.layers = [p.layer for p in self.parts]
        n = len(self.parts)
        self.hidden: list[Optional[torch.Tensor]] = [None] * n
        self.context: list[Optional[torch.Tensor]] = [None] * n
        self.calls: list[Optional[tuple[tuple, dict]]] = [None] * n
        order = CallOrder(n)

        def on_layer(module: nn.Module, args: tuple, kwargs: dict) -> None:
            k = order.take()
            self.hidden[k] = args[0] if args else kwargs["hidden_states"]
            self.calls[k] = (tuple(args[1:]), {key: v for key, v in kwargs.items() if key != "hidden_states"})

        def on_out(k: int, module: nn.Module, args: tuple) -> None:
            self.context[k] = args[0]

        handles = [m.register_forward_pre_hook(on_layer, with_kwargs=True) for m in distinct(self.layers)]
        handles += per_call(self.parts, on_out)
        if getattr(model.config, "use_cache", False):
            inputs = {**inputs, "use_cache": False}  # a decoder's key/value cache would grow with every re-run
        try:
            with torch.inference_mode():
                self.output: torch.Tensor = model(**inputs).last_hidden_state
        finally:
            for hd in handles:
                hd.remove()
        self.batch = self.output.shape[0]
        family = self.parts[0].family
        # the rest of layer k from its output projection on, where the block is post-LN and every layer distinct
        self.fast = family.wiring is Wiring.post_ln and not family.shared_layers

    def run_from(self, k: int, replicas: int, start: Optional[torch.Tensor] = None) -> torch.Tensor:
        """The last hidden state ``(replicas·B, T, D)`` of a pass that reuses layers below k (and, for a post-LN
        block, layer k's attention weights, identical in every replica: only its output projection onward sees
        the gates). A shared layer's pass starts at layer 0, so its calls count from there. Call it inside
        :func:`gated` with gates of ``replicas`` rows; their rows for layers below k are ignored. ``start``: the
        input of layer k ``(replicas·B, T, D)`` to run from instead of the clean one (a patch of the residual
        stream; no gates then), the pass starting at layer k itself."""
        r, b = replicas, self.batch
        with torch.inference_mode():
            if start is not None:
                y, first = start, k
            elif self.fast:
                p = self.parts[k]
                x = _repeat(self.hidden[k], r, b)
                # the rest of layer k as BertSelfOutput / BertOutput (and DistilBERT's block) compute it
                h = p.norm1(p.out(_repeat(self.context[k], r, b)) + x)
                y = p.norm2(h + p.ffn(h))
                first = k + 1
            else:
                first = 0 if self.parts[0].family.shared_layers else k
                y = _repeat(self.hidden[first], r, b)
            for j in range(first, len(self.parts)):
                args, kwargs = self.calls[j]
                y = self.layers[j](y, *[_repeat(a, r, b) for a in args],
                                   **{key: _repeat(v, r, b) for key, v in kwargs.items()})
                y = y[0] if isinstance(y, tuple) else y
            final = self.parts[0].family.final_norm
            if final is not None and (start is not None or not self.fast):
                y = get_path(self.model, final)(y)
        return y
