"""What the context-mixing measures read of each layer, and forward hooks that capture it in the pass that
gives the attention weights.

The parts are found through the model's family entry (:mod:`probing.mixing.families`), so this module needs
only torch, never transformers. Every family gives the heads' context vectors and values. The block measures
read the layer's input x (the residual) and its second norm and FFN as the wiring places them: post-LN
``h = LN1(x + Σ_h α^h f^h(x) + b_O)`` then ``LN2(h + FFN(h))`` (ALTI, GlobEnc, value zeroing); pre-LN
``h = x + Σ_h α^h f^h(LN1(x)) + b_O`` then ``h + FFN(LN2(h))`` and parallel ``h + FFN(LN2(x))`` (ALTI, value
zeroing; GlobEnc is refused, :func:`layer_parts`). The FFN is called from its own modules, so
``Encoder.skip_last_ffn`` (which bypasses the layer's ``feed_forward_chunk``, or zeroes its ``mlp`` in the
model's pass only) does not change what the measures see.
"""

from __future__ import annotations

import functools
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional, Sequence

import torch
from torch import nn

from probing.buffers import Buffers
from probing.mixing.families import (
    BlockParts,
    CallOrder,
    LayoutError,
    Wiring,
    block_parts,
    distinct,
    family_of,
    projection_bias,
    projection_weight,
)


@dataclass(frozen=True)
class Norm:
    """A norm's parameters over the last axis: a LayerNorm's ``γ ⊙ (z - mean z) / sqrt(var z + eps) + β``, or
    with ``centre`` False an RMSNorm's ``γ ⊙ z / sqrt(mean z^2 + eps)`` (β zero, as for a bias-free LayerNorm)."""

    weight: torch.Tensor  # (D,)
    bias: torch.Tensor  # (D,)
    eps: float
    centre: bool = True

    @classmethod
    def of(cls, norm: nn.Module) -> "Norm":
        """From an ``nn.LayerNorm`` or an RMSNorm (:func:`norm_kind`), in float32."""
        weight = norm.weight.detach().float()
        bias = getattr(norm, "bias", None)
        bias = torch.zeros_like(weight) if bias is None else bias.detach().float()
        if isinstance(norm, nn.LayerNorm):
            return cls(weight, bias, float(norm.eps))
        eps = getattr(norm, "variance_epsilon", getattr(norm, "eps", None))
        return cls(weight, bias, torch.finfo(torch.float32).eps if eps is None else float(eps), centre=False)

    def scale(self, z: torch.Tensor) -> torch.Tensor:
        """``1 / sqrt(var z + eps)`` per vector, keepdim: the factor that makes LN linear in fixed context."""
        return self.split(z)[1]

    def split(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(γ ⊙ (z - mean z), scale(z))``, so that ``LN(z) = first · scale + β``; the variance from the
        centred values (torch's ``var`` is 2.5x slower on (B, T, D)); an RMSNorm's ``(γ ⊙ z, scale(z))``."""
        c = z - z.mean(-1, keepdim=True) if self.centre else z
        return self.weight * c, torch.rsqrt(c.square().mean(-1, keepdim=True) + self.eps)

    def centred(self, v: torch.Tensor) -> torch.Tensor:
        """``γ ⊙ (v - mean v)``: LN's centring and gain, the linear part before the scale."""
        return self.weight * (v - v.mean(-1, keepdim=True) if self.centre else v)

    def linear(self, v: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        """LN as a linear map of a part ``v`` of the normalised sum, given that sum's ``scale`` (no β)."""
        return self.centred(v) * scale

    def __call__(self, z: torch.Tensor) -> torch.Tensor:
        c, scale = self.split(z)
        return c * scale + self.bias


def norm_kind(norm: Optional[nn.Module]) -> Optional[str]:
    """``layer_norm`` (an ``nn.LayerNorm`` with a gain), ``rms_norm`` (a module named ``...RMSNorm`` with a
    ``weight``: transformers' Llama, Qwen2 and Mistral norms, torch's ``nn.RMSNorm``), else None."""
    if getattr(norm, "weight", None) is None:
        return None
    if isinstance(norm, nn.LayerNorm):
        return "layer_norm"
    return "rms_norm" if type(norm).__name__.endswith("RMSNorm") else None


def key_lengths(probs: torch.Tensor) -> torch.Tensor:
    """(B,) pieces up to the last key that some query attends to in ``probs`` (B, H, T, T) (padding gets
    weight exactly 0): the compiled kernels skip the rest."""
    used = probs.amax(dim=(1, 2)) > 0
    return (used * torch.arange(1, probs.shape[-1] + 1, device=probs.device)).amax(-1)


@dataclass(frozen=True)
class LayerPieces:
    """What one layer computed in a forward pass, in float32, ``B`` sentences of ``T`` pieces, ``H`` heads.

    ``f[b, h, j]`` is ``(x_j W_V^h + b_V^h) W_O^h``, head h's transformed value of piece j (Kobayashi et al.
    2020; ``LN1(x_j)`` in place of ``x_j`` in pre-LN and parallel blocks), so that the attention block's output
    with its residual is ``Σ_h Σ_j α^h_ij f^h_j + b_O + x_i`` (post-LN: LN1's input). ``f`` is
    computed on first use (``(B, H, T, D)``, as much work as the layer's value projection times ``D / d``);
    measures that need less (``norm``: only ``||f||``; ALTI: ``f`` after a linear map) read ``values`` and
    ``w_o`` through :meth:`transformed` and :meth:`f_norms`. A capture that kept only the norms (``value_norms``,
    :func:`capture`) has ``norms`` and no ``values``: enough for ``norm``, nothing else.
    """

    # (B, T, D) the layer's input, the residual (None where not captured): the attention module's input in a
    # post-LN block, the first norm's input in a pre-LN or parallel one
    x: Optional[torch.Tensor]
    probs: torch.Tensor  # (B, H, T, T) attention weights, rows = queries
    values: Optional[torch.Tensor]  # (B, H, T, d) value vectors x_j W_V^h + b_V^h (None: only norms kept)
    w_o: torch.Tensor  # (D, H, d) the output projection, one (D, d) slice per head
    b_o: torch.Tensor  # (D,)
    # the block's norms and FFN (None: only the per-head parts were captured; ln1 also None in a pre-LN or
    # parallel block, whose values already come from LN1(x))
    ln1: Optional[Norm]
    ln2: Optional[Norm]
    ffn: Optional[Callable[[torch.Tensor], torch.Tensor]]  # (..., D) -> (..., D), no residual
    # (B, T, D) LN1's input as the model computed it (hooked); the measures' decomposition sums to it
    ln1_in: Optional[torch.Tensor] = None
    scratch: Optional[Buffers] = None  # shared by the layers of a pass, and by passes (:meth:`f_lent`)
    wiring: Wiring = Wiring.post_ln
    norms: Optional[torch.Tensor] = None  # (B, H, T) :attr:`f_norms`, when the capture computed them in the pass

    @property
    def post_ln_block(self) -> bool:
        """A post-LN block was captured: norm_layer, ALTI and GlobEnc share its decomposition through LN1."""
        return self.ln1 is not None and self.wiring is Wiring.post_ln

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
        """``(B, H, T)``: ``||f^h(x_j)||`` (:func:`value_norms`), or the norms the capture kept."""
        return self.norms if self.norms is not None else value_norms(self.values, head_grams(self.w_o))


def head_grams(w_o: torch.Tensor) -> torch.Tensor:
    """``(H, d, d)``: each head's Gram matrix ``W_O^hᵀ W_O^h`` of an output projection ``w_o`` (D, H, d)."""
    return torch.einsum("ehd,ehk->hdk", w_o, w_o)


def value_norms(values: torch.Tensor, grams: torch.Tensor) -> torch.Tensor:
    """``(B, H, T)``: ``||f^h(x_j)|| = sqrt(v^h_j G^h v^h_jᵀ)`` from the values (B, H, T, d) and each head's
    Gram matrix ``G^h`` (:func:`head_grams`): O(T d^2) per head instead of the O(T d D) of ``f``."""
    sq = (torch.einsum("bhtd,hdk->bhtk", values, grams) * values).sum(-1)
    return sq.clamp(min=0).sqrt()


# Each output projection's head Gram matrices, kept while the module lives: the weights do not change
# between batches, and the Gram matrices cost as much as a (D x d) product per head and layer.
_GRAMS: "weakref.WeakKeyDictionary[nn.Module, tuple[tuple, torch.Tensor]]" = weakref.WeakKeyDictionary()


def projection_grams(out: nn.Module, n_heads: int) -> torch.Tensor:
    """:func:`head_grams` of an output projection module (float32), computed once per module and weights
    (recomputed when its weight is replaced or changed in place)."""
    weight = projection_weight(out)
    key = (weight.data_ptr(), weight._version, weight.dtype, tuple(weight.shape), n_heads)
    held = _GRAMS.get(out)
    if held is None or held[0] != key:
        w_o = weight.float()
        held = _GRAMS[out] = (key, head_grams(w_o.view(w_o.shape[0], n_heads, -1)))
    return held[1]


def layer_parts(model: nn.Module, capability: str = "block") -> list[BlockParts]:
    """Every layer's parts in call order (:mod:`probing.mixing.families`); ``capability``: ``heads``, ``norm``,
    ``block`` (ALTI and value zeroing: the whole block, any wiring) or ``globenc`` (the block, post-LN only),
    refused in one line where the model's layout lacks what it needs."""
    block = capability in ("block", "globenc")
    parts = block_parts(model, "block" if block else capability)
    if block and parts:
        _check_block(parts, capability)
    return parts


def _check_block(parts: list[BlockParts], capability: str) -> None:
    """The norms the block measures read: a post-LN block's two LayerNorms (folded into the decomposition), a
    pre-LN or parallel block's second norm (value zeroing re-runs it; the first may be anything, even
    ``nn.Identity``, since only its input, the residual, is read). GlobEnc: post-LN only."""
    fam = parts[0].family
    post = fam.wiring is Wiring.post_ln
    if capability == "globenc" and not post:
        raise globenc_refused(fam.wiring, fam.name)
    for p in parts:
        if post and not (isinstance(p.norm1, nn.LayerNorm) and isinstance(p.norm2, nn.LayerNorm)):
            raise LayoutError(f"{fam.name} layer {p.index}: the block measures need LayerNorms, found "
                              f"{type(p.norm1).__name__} and {type(p.norm2).__name__}")
        if not post and norm_kind(p.norm2) is None:
            raise LayoutError(f"{fam.name} layer {p.index}: value zeroing needs a LayerNorm or an RMSNorm before "
                              f"the feed-forward block, found {type(p.norm2).__name__}")


def globenc_refused(wiring: Wiring, family: str = "this model") -> LayoutError:
    """The one line that refuses GlobEnc off post-LN blocks."""
    return LayoutError(f"GlobEnc is defined for post-LayerNorm blocks only: it folds both LayerNorms of the block "
                       f"into its decomposition, and the output of a {wiring} block ({family}) is not normalised; "
                       "alti and value_zeroing work on every wiring")


class Capture:
    """Filled by :func:`capture` during one forward pass, each tensor by the layer whose module produced it
    (in call order, so a shared layer's calls are its L layers); ``pieces()`` turns it into
    :class:`LayerPieces`."""

    def __init__(self, parts: list[BlockParts]):
        self.parts = parts
        n = len(parts)
        self.x: list[Optional[torch.Tensor]] = [None] * n
        self.probs: list[Optional[torch.Tensor]] = [None] * n
        self.values: list[Optional[torch.Tensor]] = [None] * n
        self.norms: list[Optional[torch.Tensor]] = [None] * n  # (B, H, T) ||f^h(x_j)||, ``value_norms`` only
        # the input of each layer's output projection: the heads' context vectors, concatenated
        self.context: list[Optional[torch.Tensor]] = [None] * n
        self.ln1_in: list[Optional[torch.Tensor]] = [None] * n

    def heads(self) -> list[torch.Tensor]:
        """Every layer's heads' context vectors ``z^h_i = Σ_j α^h_ij v^h_j`` of the last pass, concatenated over
        heads as the output projection reads them: L tensors ``(B, T, H·d)`` in the model's dtype (``W_O z +
        b_O`` is the attention block's output before the residual)."""
        if any(c is None for c in self.context):
            raise RuntimeError("the forward pass did not reach every layer's attention output projection (or "
                               "the capture was made with heads=False)")
        return list(self.context)  # type: ignore[arg-type]

    def pieces(self, buffers: Optional[Buffers] = None, probs: Optional[Sequence[torch.Tensor]] = None
               ) -> list[LayerPieces]:
        """Per-layer pieces of the last pass (the per-head ``f`` from ``W_O`` reshaped to ``(D, H, d)``);
        ``probs``: the model's returned attention weights (default: those the attention modules returned);
        ``buffers``: the memory their lent values share (:meth:`LayerPieces.f_lent`), e.g. an extraction's,
        kept across passes (default: fresh, for this pass's layers)."""
        out = []
        scratch = Buffers() if buffers is None else buffers
        for k, p in enumerate(self.parts):
            a = probs[k] if probs is not None else self.probs[k]
            if a is None or (self.values[k] is None and self.norms[k] is None):
                raise RuntimeError(f"layer {k}: the forward pass did not reach its attention (no pass run, or "
                                   "an attention implementation that returns no weights)")
            out.append(self._layer(k, p, a, scratch))
        return out

    def _layer(self, k: int, p: BlockParts, probs: torch.Tensor, scratch: Buffers) -> LayerPieces:
        """Layer k's pieces in float32; the norms and FFN where the block was captured (``x`` filed)."""
        w_o = projection_weight(p.out).float()
        x = self.x[k]
        wiring = p.family.wiring
        ln1 = Norm.of(p.norm1) if x is not None and wiring is Wiring.post_ln else None
        ln2 = Norm.of(p.norm2) if x is not None else None
        ffn = _float_ffn(p.ffn, x.dtype) if x is not None else None
        return LayerPieces(_float(x), probs.float(), _float(self.values[k]),
                           w_o.view(w_o.shape[0], probs.shape[1], -1),
                           projection_bias(p.out, w_o.shape[0], w_o).float(), ln1, ln2, ffn,
                           _float(self.ln1_in[k]), scratch, wiring, self.norms[k])


def _float(t: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    return None if t is None else t.float()


def _float_ffn(ffn: Callable[[torch.Tensor], torch.Tensor], dtype: torch.dtype
               ) -> Callable[[torch.Tensor], torch.Tensor]:
    """The FFN on float32 inputs, whatever dtype the model runs in."""
    if dtype == torch.float32:
        return ffn
    return lambda h: ffn(h.to(dtype)).float()


@contextmanager
def capture(model: nn.Module, need: str = "block", heads: bool = True) -> Iterator[Capture]:
    """Hooks on what ``need`` reads, removed on exit: ``heads``: nothing more; ``value_norms``: each value's
    norm through its head's output projection, ``||f^h(x_j)||`` (B, H, T), computed in the hook so that no
    layer's values outlive it (all the per-head ``norm`` reads); ``norm``: the value projections' outputs;
    ``block``: also every layer's input x, its weights α and, post-LN, the first norm's input; ``globenc``:
    ``block``, refused off post-LN. ``heads``: the output projections' inputs too, the heads' context vectors
    (:meth:`Capture.heads`), which are L tensors as large as the values. Run the model's forward pass (with
    eager attention) inside the block; each hook files its tensor under the layer it was called for
    (:class:`CallOrder`)."""
    if need == "norm" and family_of(model)[0].wiring is Wiring.post_ln:
        need = "block"  # the block's shared decomposition gives norm_layer as it gives ALTI and GlobEnc
    cap = Capture(layer_parts(model, "norm" if need == "value_norms" else need))
    need = "block" if need == "globenc" else need
    handles = _hooks(cap, need, heads)
    try:
        yield cap
    finally:
        for h in handles:
            h.remove()


def _hooks(cap: Capture, need: str, heads: bool) -> list[Any]:
    """Register :func:`capture`'s hooks on the parts of ``cap``; their handles."""
    n = len(cap.parts)
    handles: list[Any] = []

    def hooked(modules: list[nn.Module], file: Callable[..., None], pre: bool, kwargs: bool = False) -> None:
        order = CallOrder(n)

        def hook(*args: Any) -> None:
            file(order.take(), *args)

        for m in distinct(modules):
            handles.append(m.register_forward_pre_hook(hook) if pre else
                           m.register_forward_hook(hook, with_kwargs=kwargs))

    if heads:
        hooked([p.out for p in cap.parts], lambda k, m, args: cap.context.__setitem__(k, args[0]), pre=True)
    if need == "value_norms":
        hooked([p.value_module for p in cap.parts], lambda k, m, args, out: cap.norms.__setitem__(
            k, _norms_of(cap.parts[k], out)), pre=False)
    elif need != "heads":
        hooked([p.value_module for p in cap.parts],
               lambda k, m, args, out: cap.values.__setitem__(k, cap.parts[k].values_of(out)), pre=False)
    if need == "block":
        # the residual x: the attention module's input in a post-LN layer, the first norm's input in a pre-LN
        # or parallel one (whose attention reads LN1(x)); a post-LN first norm's input is LN1's input
        post = not cap.parts or cap.parts[0].family.wiring is Wiring.post_ln

        def on_attention(k: int, module: nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
            if post:
                cap.x[k] = args[0] if args else kwargs["hidden_states"]
            cap.probs[k] = output[1] if isinstance(output, tuple) and len(output) > 1 else None

        hooked([p.attention for p in cap.parts], on_attention, pre=False, kwargs=True)
        hooked([p.norm1 for p in cap.parts], lambda k, m, args: (cap.ln1_in if post else cap.x).__setitem__(
            k, args[0]), pre=True)
    return handles


def _norms_of(part: BlockParts, projected: torch.Tensor) -> torch.Tensor:
    """``||f^h(x_j)||`` (B, H, T) of one layer from its value (or fused) projection's output, in float32, as
    :attr:`LayerPieces.f_norms` computes it from the values."""
    return value_norms(part.values_of(projected).float(), projection_grams(part.out, part.n_heads))
