"""Model families as data: where each part of a transformer block lives and how the block is wired.

One :class:`Family` entry per family names the module paths of a layer (relative to the layer module), the
container of the layers (relative to the base model), the kind of norm, the wiring and whether attention is
causal. Measures, head vectors and gates read the parts through :func:`block_parts`; each capability asks only
for the parts it needs (:data:`NEEDS`), so ``heads`` vectors and gates work wherever the output projection is
known. A new family is one entry here plus its tiny-config test (``tests/unit/test_families.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Optional, Sequence

import torch
from torch import nn

from probing.config import Choice
from probing.errors import ProbingError


class LayoutError(ProbingError):
    """A model, or a capability, whose parts no layout entry names."""


class Wiring(Choice):
    """Where the norms sit: ``post_ln`` ``LN1(x + attn(x))`` then ``LN2(h + mlp(h))`` (BERT); ``pre_ln``
    ``x + attn(LN1(x))`` then ``h + mlp(LN2(h))`` (GPT-2, Llama, ModernBERT); ``parallel``
    ``x + attn(LN1(x)) + mlp(LN2(x))`` (GPT-NeoX)."""

    post_ln = "post_ln"
    pre_ln = "pre_ln"
    parallel = "parallel"


class NormKind(Choice):
    layer_norm = "layer_norm"
    rms_norm = "rms_norm"


class QkvSplit(Choice):
    """How a fused query-key-value projection orders its output: ``blocks`` ``[q | k | v]`` each ``H·d`` wide
    (GPT-2's ``c_attn``, ModernBERT's ``Wqkv``); ``per_head`` ``[q k v]`` per head (GPT-NeoX)."""

    blocks = "blocks"
    per_head = "per_head"


@dataclass(frozen=True)
class Family:
    """One family's layout. Paths are dotted attribute paths; ``mlp`` is the modules applied in turn to give
    the feed-forward block's output without the residual."""

    name: str
    layer_classes: tuple[str, ...]
    layers: str  # the layers' ModuleList, from the base model
    attention: str  # the attention module (its input is the residual stream of a post-LN layer)
    out: str  # the output projection, whose input is the heads' context vectors side by side
    value: Optional[str] = None  # the value projection (None: sliced from ``qkv``)
    qkv: Optional[str] = None  # a fused query-key-value projection
    qkv_split: QkvSplit = QkvSplit.blocks
    norm1: Optional[str] = None  # the attention's norm
    norm2: Optional[str] = None  # the feed-forward block's norm
    norm: NormKind = NormKind.layer_norm
    wiring: Wiring = Wiring.post_ln
    mlp: tuple[str, ...] = ()
    gated_mlp: bool = False
    causal: bool = False
    kv_heads: Optional[str] = None  # config attribute of the key/value heads (grouped-query attention)
    shared_layers: bool = False  # one layer module called for every layer (ALBERT)
    final_norm: Optional[str] = None  # the norm after the last layer, from the base model (pre-LN models)


_BERT = Family("bert", ("BertLayer", "ElectraLayer"), "encoder.layer", "attention.self", "attention.output.dense",
               value="attention.self.value", norm1="attention.output.LayerNorm", norm2="output.LayerNorm",
               mlp=("intermediate", "output.dense"))
_LLAMA = Family("llama", ("LlamaDecoderLayer",), "layers", "self_attn", "self_attn.o_proj", value="self_attn.v_proj",
                norm1="input_layernorm", norm2="post_attention_layernorm", norm=NormKind.rms_norm,
                wiring=Wiring.pre_ln, mlp=("mlp",), gated_mlp=True, causal=True, kv_heads="num_key_value_heads",
                final_norm="norm")

FAMILIES: tuple[Family, ...] = (
    _BERT,
    replace(_BERT, name="roberta", layer_classes=("RobertaLayer", "CamembertLayer")),
    replace(_BERT, name="xlm-roberta", layer_classes=("XLMRobertaLayer",)),
    Family("distilbert", ("TransformerBlock",), "transformer.layer", "attention", "attention.out_lin",
           value="attention.v_lin", norm1="sa_layer_norm", norm2="output_layer_norm", mlp=("ffn",)),
    Family("albert", ("AlbertLayer",), "encoder.albert_layer_groups.0.albert_layers", "attention", "attention.dense",
           value="attention.value", norm1="attention.LayerNorm", norm2="full_layer_layer_norm",
           mlp=("ffn", "activation", "ffn_output"), shared_layers=True),
    replace(_BERT, name="deberta-v2", layer_classes=("DebertaV2Layer",), value="attention.self.value_proj"),
    Family("mpnet", ("MPNetLayer",), "encoder.layer", "attention.attn", "attention.attn.o", value="attention.attn.v",
           norm1="attention.LayerNorm", norm2="output.LayerNorm", mlp=("intermediate", "output.dense")),
    Family("modernbert", ("ModernBertEncoderLayer",), "layers", "attn", "attn.Wo", qkv="attn.Wqkv",
           norm1="attn_norm", norm2="mlp_norm", wiring=Wiring.pre_ln, mlp=("mlp",), gated_mlp=True,
           final_norm="final_norm"),
    Family("gpt2", ("GPT2Block",), "h", "attn", "attn.c_proj", qkv="attn.c_attn", norm1="ln_1", norm2="ln_2",
           wiring=Wiring.pre_ln, mlp=("mlp",), causal=True, final_norm="ln_f"),
    Family("gpt-neox", ("GPTNeoXLayer",), "layers", "attention", "attention.dense", qkv="attention.query_key_value",
           qkv_split=QkvSplit.per_head, norm1="input_layernorm", norm2="post_attention_layernorm",
           wiring=Wiring.parallel, mlp=("mlp",), causal=True, final_norm="final_layer_norm"),
    _LLAMA,
    replace(_LLAMA, name="qwen2", layer_classes=("Qwen2DecoderLayer",)),
    replace(_LLAMA, name="mistral", layer_classes=("MistralDecoderLayer",)),
)

# The parts each capability reads (the others may be missing from an entry).
NEEDS: dict[str, tuple[str, ...]] = {
    "heads": ("out",),  # head context vectors, gates, head means
    "norm": ("out", "values"),  # α·||f^h(x_j)|| and its per-layer sum
    "block": ("out", "values", "norm1", "norm2", "mlp"),  # ALTI, GlobEnc, value zeroing
}


def get_path(root: Any, path: str) -> Any:
    """``root.a.b.0.c`` (digits index a sequence); None where any step is missing."""
    obj = root
    for part in path.split("."):
        obj = obj[int(part)] if part.isdigit() and isinstance(obj, (nn.ModuleList, list, tuple)) else \
            getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def family_of(model: nn.Module) -> tuple[Family, list[nn.Module]]:
    """The model's family and its layer modules in call order (a shared layer repeated), or one
    :class:`LayoutError` line naming the layer class and the supported families."""
    seen = []
    for fam in FAMILIES:
        layers = get_path(model, fam.layers)
        if isinstance(layers, nn.ModuleList) and len(layers):
            cls = type(layers[0]).__name__
            if cls in fam.layer_classes:
                return _wired(model, fam), _called(model, fam, list(layers))
            seen.append(cls)
    found = seen[0] if seen else "no layer list"
    names = ", ".join(f.name for f in FAMILIES)
    raise LayoutError(f"{type(model).__name__} ({found}): no layout entry; supported families: {names}. Add one "
                      "Family entry (its module paths and wiring) to probing/mixing/families.py, with its "
                      "tiny-config test")


def _wired(model: nn.Module, fam: Family) -> Family:
    """The entry as this checkpoint wires its blocks: a GPT-NeoX config with ``use_parallel_residual`` off is
    pre-LN (``h = x + attn(LN1(x))``, then ``h + mlp(LN2(h))``)."""
    parallel = getattr(getattr(model, "config", None), "use_parallel_residual", True)
    return replace(fam, wiring=Wiring.pre_ln) if fam.wiring is Wiring.parallel and parallel is False else fam


def _called(model: nn.Module, fam: Family, layers: list[nn.Module]) -> list[nn.Module]:
    """The layer modules in the order the forward pass calls them."""
    if not fam.shared_layers:
        return layers
    cfg = model.config
    if getattr(cfg, "num_hidden_groups", 1) != 1 or len(layers) != 1:
        raise LayoutError(f"{type(model).__name__}: shared layers in {getattr(cfg, 'num_hidden_groups', '?')} "
                          "groups of several layers are not supported (one group of one layer is)")
    return layers * int(cfg.num_hidden_layers)


def projection_weight(module: nn.Module) -> torch.Tensor:
    """A projection's weight as ``(out, in)`` (a Linear's own layout; GPT-2's Conv1D stores ``(in, out)``)."""
    w = module.weight.detach()
    return w.t() if type(module).__name__ == "Conv1D" else w


def projection_bias(module: nn.Module, width: int, like: torch.Tensor) -> torch.Tensor:
    """A projection's bias, zeros for a bias-free one (Llama, ModernBERT)."""
    b = getattr(module, "bias", None)
    return like.new_zeros(width) if b is None else b.detach()


@dataclass(frozen=True)
class BlockParts:
    """One layer's modules as the family names them (None: the entry names no such part) and the model's
    head counts; :meth:`require` refuses a capability whose parts are missing."""

    family: Family
    index: int
    layer: nn.Module
    attention: Optional[nn.Module]
    out: Optional[nn.Module]
    value: Optional[nn.Module]
    qkv: Optional[nn.Module]
    norm1: Optional[nn.Module]
    norm2: Optional[nn.Module]
    mlp: tuple[nn.Module, ...]
    n_heads: int
    kv_heads: int

    def require(self, capability: str) -> None:
        missing = [p for p in NEEDS[capability] if not self._has(p)]
        if missing:
            raise LayoutError(f"{self.family.name} layer {self.index}: {capability} needs {', '.join(missing)}, "
                              f"which the {self.family.name} layout entry does not name")

    def _has(self, part: str) -> bool:
        if part == "values":
            return self.value is not None or self.qkv is not None
        if part == "mlp":
            return bool(self.mlp)
        return getattr(self, part) is not None

    def ffn(self, h: torch.Tensor) -> torch.Tensor:
        """The feed-forward block without its residual."""
        for module in self.mlp:
            h = module(h)
        return h

    def values_of(self, projected: torch.Tensor) -> torch.Tensor:
        """``(B, H, T, d)`` value vectors from the value (or fused) projection's output ``(B, T, ·)``, a
        key/value head repeated for each query head it serves."""
        b, t, _ = projected.shape
        if self.qkv is not None:
            if self.family.qkv_split is QkvSplit.per_head:
                v = projected.view(b, t, self.n_heads, 3, -1)[..., 2, :]
            else:
                v = projected.view(b, t, 3, self.n_heads, -1)[:, :, 2]
            return v.transpose(1, 2)
        v = projected.view(b, t, self.kv_heads, -1).transpose(1, 2)
        return v.repeat_interleave(self.n_heads // self.kv_heads, dim=1) if self.kv_heads != self.n_heads else v

    @property
    def value_module(self) -> nn.Module:
        return self.value if self.value is not None else self.qkv


def head_counts(model: nn.Module, fam: Family) -> tuple[int, int]:
    """``(query heads, key/value heads)`` from the model's config."""
    cfg = model.config
    heads = int(getattr(cfg, "num_attention_heads", None) or getattr(cfg, "n_heads", None) or cfg.n_head)
    kv = getattr(cfg, fam.kv_heads, None) if fam.kv_heads else None
    return heads, int(kv or heads)


def block_parts(model: nn.Module, capability: Optional[str] = None) -> list[BlockParts]:
    """Every layer's parts in call order; ``capability`` (a key of :data:`NEEDS`): refused in one line where
    its parts are missing."""
    fam, layers = family_of(model)
    heads, kv = head_counts(model, fam)

    def part(layer: nn.Module, path: Optional[str]) -> Optional[nn.Module]:
        return None if path is None else get_path(layer, path)

    out = []
    for k, layer in enumerate(layers):
        mlp = tuple(m for m in (part(layer, p) for p in fam.mlp) if m is not None)
        parts = BlockParts(fam, k, layer, part(layer, fam.attention), part(layer, fam.out), part(layer, fam.value),
                           part(layer, fam.qkv), part(layer, fam.norm1), part(layer, fam.norm2),
                           mlp if len(mlp) == len(fam.mlp) else (), heads, kv)
        if capability is not None:
            parts.require(capability)
        out.append(parts)
    return out


def distinct(modules: Sequence[nn.Module]) -> list[nn.Module]:
    """Modules once each, in first-seen order (a shared layer's parts are one module called L times)."""
    seen: dict[int, nn.Module] = {}
    for m in modules:
        seen.setdefault(id(m), m)
    return list(seen.values())


class CallOrder:
    """Which layer a hook on a (possibly shared) module is called for: the modules of L layers are called in
    layer order in every pass, so the k-th call of a pass is layer k (``start`` sets where a pass that begins at
    a later layer starts)."""

    def __init__(self, n_layers: int):
        self.n, self.next = n_layers, 0

    def take(self) -> int:
        k = self.next
        self.next = (k + 1) % self.n
        return k

    def start(self, k: int = 0) -> None:
        self.next = k
