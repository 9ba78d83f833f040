"""Where a post-LayerNorm encoder layer keeps what the context-mixing measures need, and forward hooks that
capture it in the pass that gives the attention weights.

Each layer is ``h = LN1(x + Σ_h α^h f^h(x) + b_O)`` then ``y = LN2(h + FFN(h))``. The layout is found by
structure (BERT, RoBERTa, MiniLM: ``attention.self.value`` / ``attention.output.{dense,LayerNorm}`` /
``intermediate`` + ``output``; DistilBERT: ``attention.{v_lin,out_lin}`` / ``sa_layer_norm`` / ``ffn`` /
``output_layer_norm``), so this module needs only torch, never transformers. The FFN is called from its own
modules, so ``Encoder.skip_last_ffn`` (which bypasses the layer's ``feed_forward_chunk``) does not change what
the measures see.
"""

from __future__ import annotations

import functools
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

import torch
from torch import nn

from probing.buffers import Buffers
from probing.errors import ProbingError


class LayoutError(ProbingError):
    """A layer whose attention block cannot be decomposed into per-token vectors."""


@dataclass(frozen=True)
class Norm:
    """A LayerNorm's parameters: ``γ ⊙ (z - mean z) / sqrt(var z + eps) + β`` over the last axis."""

    weight: torch.Tensor  # (D,)
    bias: torch.Tensor  # (D,)
    eps: float

    @classmethod
    def of(cls, ln: nn.LayerNorm) -> "Norm":
        return cls(ln.weight.detach().float(), ln.bias.detach().float(), float(ln.eps))

    def scale(self, z: torch.Tensor) -> torch.Tensor:
        """``1 / sqrt(var z + eps)`` per vector, keepdim: the factor that makes LN linear in fixed context."""
        return self.split(z)[1]

    def split(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(γ ⊙ (z - mean z), scale(z))``, so that ``LN(z) = first · scale + β``; the variance from the
        centred values (torch's ``var`` is 2.5x slower on (B, T, D))."""
        c = z - z.mean(-1, keepdim=True)
        return self.weight * c, torch.rsqrt(c.square().mean(-1, keepdim=True) + self.eps)

    def centred(self, v: torch.Tensor) -> torch.Tensor:
        """``γ ⊙ (v - mean v)``: LN's centring and gain, the linear part before the scale."""
        return self.weight * (v - v.mean(-1, keepdim=True))

    def linear(self, v: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        """LN as a linear map of a part ``v`` of the normalised sum, given that sum's ``scale`` (no β)."""
        return self.centred(v) * scale

    def __call__(self, z: torch.Tensor) -> torch.Tensor:
        c, scale = self.split(z)
        return c * scale + self.bias


def key_lengths(probs: torch.Tensor) -> torch.Tensor:
    """(B,) pieces up to the last key that some query attends to in ``probs`` (B, H, T, T) (padding gets
    weight exactly 0): the compiled kernels skip the rest."""
    used = probs.amax(dim=(1, 2)) > 0
    return (used * torch.arange(1, probs.shape[-1] + 1, device=probs.device)).amax(-1)


@dataclass(frozen=True)
class LayerParts:
    """The modules of one layer the measures read: the attention module (input x, weights α), the value
    projection, the output projection (``W_O``, ``b_O``), both LayerNorms, and the FFN without residual."""

    attention: nn.Module
    value: nn.Linear
    out: nn.Linear
    ln1: nn.LayerNorm
    ln2: nn.LayerNorm
    ffn: Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class LayerPieces:
    """What one layer computed in a forward pass, in float32, ``B`` sentences of ``T`` pieces, ``H`` heads.

    ``f[b, h, j]`` is ``(x_j W_V^h + b_V^h) W_O^h``, head h's transformed value of piece j (Kobayashi et al.
    2020), so that the attention block's output before LN1 is ``Σ_h Σ_j α^h_ij f^h_j + b_O + x_i``. ``f`` is
    computed on first use (``(B, H, T, D)``, as much work as the layer's value projection times ``D / d``);
    measures that need less (``norm``: only ``||f||``; ALTI: ``f`` after a linear map) read ``values`` and
    ``w_o`` through :meth:`transformed` and :meth:`f_norms`.
    """

    x: torch.Tensor  # (B, T, D) the layer's input, which is also the residual
    probs: torch.Tensor  # (B, H, T, T) attention weights, rows = queries
    values: torch.Tensor  # (B, H, T, d) value vectors x_j W_V^h + b_V^h
    w_o: torch.Tensor  # (D, H, d) the output projection, one (D, d) slice per head
    b_o: torch.Tensor  # (D,)
    ln1: Norm
    ln2: Norm
    ffn: Callable[[torch.Tensor], torch.Tensor]  # (..., D) -> (..., D), no residual
    # (B, T, D) LN1's input as the model computed it (hooked); the measures' decomposition sums to it
    ln1_in: Optional[torch.Tensor] = None
    scratch: Optional[Buffers] = None  # shared by the layers of a pass, and by passes (:meth:`f_lent`)

    @functools.cached_property
    def f(self) -> torch.Tensor:
        """``(B, H, T, D)``: every head's transformed values."""
        return self.transformed(self.w_o)

    def f_lent(self) -> torch.Tensor:
        """:attr:`f`, computed into the ``scratch`` buffers' slot ``f`` when there are buffers and ``f`` is not
        cached: valid only until another layer's ``f_lent`` (for a kernel that reads it once). The heads'
        transformed values are the measures' largest temporary: lent, they land on memory already mapped
        instead of on fresh pages, once per layer of every batch (:mod:`probing.buffers`)."""
        if "f" in self.__dict__ or self.scratch is None:
            return self.f
        b, n_heads, t, _ = self.values.shape
        return self.transformed(self.w_o, self.scratch.take("f", (n_heads, b * t, self.w_o.shape[0])))

    def transformed(self, w: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
        """``(B, H, T, D)`` values through a per-head map ``w`` (D, H, d): ``w_o`` with a linear map of the
        output side folded in costs one projection, where mapping ``f`` after would cost a second pass.
        Stored head-major (``.transpose(0, 1)`` is contiguous), as the ALTI kernel reads it; into ``out``
        (H, B·T, D) when given."""
        b, n_heads, t, d = self.values.shape
        per_head = self.values.transpose(0, 1).reshape(n_heads, b * t, d)
        # one GEMM per head; the result is stored head-major, (H, B, T, D), and viewed as (B, H, T, D)
        return torch.bmm(per_head, w.permute(1, 2, 0), out=out).view(n_heads, b, t, -1).transpose(0, 1)

    @functools.cached_property
    def x1(self) -> torch.Tensor:
        """``γ1 ⊙ centred x`` (B, T, D): the residual through LN1's centring and gain, which ALTI and GlobEnc
        both read."""
        return self.ln1.centred(self.x)

    @functools.cached_property
    def key_lengths(self) -> torch.Tensor:
        """:func:`key_lengths` of the weights, found once for the layer's measures."""
        return key_lengths(self.probs)

    @functools.cached_property
    def f_norms(self) -> torch.Tensor:
        """``(B, H, T)``: ``||f^h(x_j)||`` from each head's ``d x d`` Gram matrix ``W_O^hᵀ W_O^h``, O(T d^2)
        per head instead of the O(T d D) of ``f``."""
        gram = torch.einsum("ehd,ehk->hdk", self.w_o, self.w_o)
        sq = (torch.einsum("bhtd,hdk->bhtk", self.values, gram) * self.values).sum(-1)
        return sq.clamp(min=0).sqrt()


def _find_layers(model: nn.Module) -> Optional[nn.ModuleList]:
    for path in ("encoder.layer", "transformer.layer"):
        obj: Any = model
        for part in path.split("."):
            obj = getattr(obj, part, None)
        if isinstance(obj, nn.ModuleList):
            return obj
    return None


def _bert_like(layer: nn.Module) -> Optional[LayerParts]:
    attn, block = getattr(getattr(layer, "attention", None), "self", None), getattr(layer, "attention", None)
    out = getattr(block, "output", None)
    inter, output = getattr(layer, "intermediate", None), getattr(layer, "output", None)
    if attn is None or out is None or inter is None or output is None:
        return None
    parts = (getattr(attn, "value", None), getattr(out, "dense", None), getattr(out, "LayerNorm", None),
             getattr(output, "dense", None), getattr(output, "LayerNorm", None))
    if not _typed(parts, (nn.Linear, nn.Linear, nn.LayerNorm, nn.Linear, nn.LayerNorm)):
        return None
    value, dense, ln1, dense2, ln2 = parts
    return LayerParts(attn, value, dense, ln1, ln2, lambda h: dense2(inter(h)))


def _distilbert_like(layer: nn.Module) -> Optional[LayerParts]:
    attn = getattr(layer, "attention", None)
    parts = (getattr(attn, "v_lin", None), getattr(attn, "out_lin", None), getattr(layer, "sa_layer_norm", None),
             getattr(layer, "output_layer_norm", None))
    ffn = getattr(layer, "ffn", None)
    if attn is None or ffn is None or not _typed(parts, (nn.Linear, nn.Linear, nn.LayerNorm, nn.LayerNorm)):
        return None
    value, out, ln1, ln2 = parts
    return LayerParts(attn, value, out, ln1, ln2, ffn)


def _typed(parts: tuple, kinds: tuple) -> bool:
    return all(isinstance(p, k) for p, k in zip(parts, kinds))


def layer_parts(model: nn.Module) -> list[LayerParts]:
    """Every layer's parts, or one :class:`LayoutError` line naming the module class that does not fit."""
    layers = _find_layers(model)
    if layers is None:
        raise LayoutError(f"context-mixing measures: {type(model).__name__} has no encoder.layer or "
                          "transformer.layer list; only BERT, RoBERTa, MiniLM and DistilBERT layouts are supported")
    out = []
    for layer in layers:
        parts = _bert_like(layer) or _distilbert_like(layer)
        if parts is None:
            raise LayoutError(f"context-mixing measures cannot decompose {type(layer).__name__}: expected a "
                              "post-LayerNorm BERT layer (attention.self.value, attention.output.dense/LayerNorm, "
                              "intermediate, output) or a DistilBERT block (attention.v_lin/out_lin, "
                              "sa_layer_norm, ffn, output_layer_norm)")
        out.append(parts)
    return out


class Capture:
    """Filled by :func:`capture` during one forward pass; ``pieces()`` turns it into :class:`LayerPieces`."""

    def __init__(self, parts: list[LayerParts]):
        self.parts = parts
        self.x: list[Optional[torch.Tensor]] = [None] * len(parts)
        self.probs: list[Optional[torch.Tensor]] = [None] * len(parts)
        self.values: list[Optional[torch.Tensor]] = [None] * len(parts)
        # the input of each layer's output projection: the heads' context vectors, concatenated
        self.context: list[Optional[torch.Tensor]] = [None] * len(parts)
        self.ln1_in: list[Optional[torch.Tensor]] = [None] * len(parts)

    def heads(self) -> list[torch.Tensor]:
        """Every layer's heads' context vectors ``z^h_i = Σ_j α^h_ij v^h_j`` of the last pass, concatenated over
        heads as the output projection reads them: L tensors ``(B, T, H·d)`` in the model's dtype (``W_O z +
        b_O`` is the attention block's output before the residual)."""
        if any(c is None for c in self.context):
            raise RuntimeError("the forward pass did not reach every layer's attention output projection")
        return list(self.context)  # type: ignore[arg-type]

    def pieces(self, buffers: Optional[Buffers] = None) -> list[LayerPieces]:
        """Per-layer pieces of the last pass (the per-head ``f`` from ``W_O`` reshaped to ``(D, H, d)``);
        ``buffers``: the memory their lent values share (:meth:`LayerPieces.f_lent`), e.g. an extraction's,
        kept across passes (default: fresh, for this pass's layers)."""
        out = []
        scratch = Buffers() if buffers is None else buffers
        for k, p in enumerate(self.parts):
            x, probs, v = self.x[k], self.probs[k], self.values[k]
            if x is None or probs is None or v is None:
                raise RuntimeError(f"layer {k}: the forward pass did not reach its attention (no pass run, or "
                                   "an attention implementation that returns no weights)")
            b, n_heads, t, _ = probs.shape
            w_o = p.out.weight.detach().float()
            values = v.float().view(b, t, n_heads, -1).transpose(1, 2)  # (B, H, T, d)
            out.append(LayerPieces(x.float(), probs.float(), values, w_o.view(w_o.shape[0], n_heads, -1),
                                   p.out.bias.detach().float(), Norm.of(p.ln1), Norm.of(p.ln2),
                                   _float_ffn(p.ffn, x.dtype), _float(self.ln1_in[k]), scratch))
        return out


def _float(t: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    return None if t is None else t.float()


def _float_ffn(ffn: Callable[[torch.Tensor], torch.Tensor], dtype: torch.dtype
               ) -> Callable[[torch.Tensor], torch.Tensor]:
    """The FFN on float32 inputs, whatever dtype the model runs in."""
    if dtype == torch.float32:
        return ffn
    return lambda h: ffn(h.to(dtype)).float()


@contextmanager
def capture(model: nn.Module, heads_only: bool = False) -> Iterator[Capture]:
    """Hooks on every layer's attention module (its input x and weights α), value projection, output
    projection (its input, the heads' context vectors) and first LayerNorm (its input); removed on exit. Run
    the model's forward pass (with eager attention) inside the block. ``heads_only``: the output projections'
    hooks alone, for :meth:`Capture.heads` (the other tensors are then not kept alive past their layer)."""
    cap = Capture(layer_parts(model))
    handles = []
    for k, p in enumerate(cap.parts):
        def on_attention(module: nn.Module, args: tuple, kwargs: dict, output: Any, k: int = k) -> None:
            cap.x[k] = args[0] if args else kwargs["hidden_states"]
            cap.probs[k] = output[1] if isinstance(output, tuple) and len(output) > 1 else None

        def on_value(module: nn.Module, args: tuple, output: torch.Tensor, k: int = k) -> None:
            cap.values[k] = output

        def on_out(module: nn.Module, args: tuple, k: int = k) -> None:
            cap.context[k] = args[0]

        def on_ln1(module: nn.Module, args: tuple, k: int = k) -> None:
            cap.ln1_in[k] = args[0]

        handles.append(p.out.register_forward_pre_hook(on_out))
        if not heads_only:
            handles.append(p.attention.register_forward_hook(on_attention, with_kwargs=True))
            handles.append(p.value.register_forward_hook(on_value))
            handles.append(p.ln1.register_forward_pre_hook(on_ln1))
    try:
        yield cap
    finally:
        for h in handles:
            h.remove()
