"""Context-mixing measures from one layer's :class:`~probing.mixing.layout.LayerPieces` (pure torch).

Per-head measures give ``(B, H, T, T)``, per-layer measures ``(B, 1, T, T)`` (one "head" per layer, so every
analysis reads them like attention); rows are where query i's representation comes from. Work on
``(B, T, T, D)`` vectors is done in blocks of rows (or of zeroed tokens) so memory stays bounded for long
batches; no loop runs over single tokens or heads.
"""

from __future__ import annotations

from typing import Callable, Iterator, NamedTuple, Optional, Sequence, overload

import torch

from probing.config import Measure
from probing.mixing.families import Wiring
from probing.mixing.kernels import key_terms, quad_forms
from probing.mixing.layout import LayerPieces, globenc_refused

# elements of one (B, rows, T, D) block of token vectors; 2**25 float32 = 128 MiB
BLOCK_ELEMENTS = 2**25

# rollout measure -> (the per-layer measure it multiplies, whether the residual is added as 0.5·A + 0.5·I)
ROLLOUTS: dict[Measure, tuple[Measure, bool]] = {
    Measure.rollout: (Measure.attention, True),
    Measure.alti_rollout: (Measure.alti, False),
    Measure.globenc_rollout: (Measure.globenc, False),
    Measure.value_zeroing_rollout: (Measure.value_zeroing, False),
}
PER_HEAD = frozenset(m for m in Measure if m.per_head)


def heads_of(measure: Measure, num_heads: int) -> int:
    """How many maps per layer a measure stores: the model's heads, or 1 for per-layer measures."""
    return num_heads if Measure(measure) in PER_HEAD else 1


def normalise_rows(a: torch.Tensor) -> torch.Tensor:
    """Rows scaled to sum to 1; an all-zero row (padding) stays zero."""
    return a / a.sum(-1, keepdim=True).clamp(min=1e-30)


def _blocks(n: int, per_item: int) -> Iterator[slice]:
    """Slices of ``range(n)`` with at most ``BLOCK_ELEMENTS // per_item`` items each (at least one)."""
    step = max(1, BLOCK_ELEMENTS // max(per_item, 1))
    for start in range(0, n, step):
        yield slice(start, min(n, start + step))


# ---- per head -------------------------------------------------------------------------------------------
def attention(p: LayerPieces) -> torch.Tensor:
    """The weights themselves."""
    return p.probs


def norm(p: LayerPieces) -> torch.Tensor:
    """``||α^h_ij f^h(x_j)|| = α^h_ij ||f^h(x_j)||`` (α is a non-negative scalar): one norm per piece and head,
    so this costs O(T D) per head on top of the weights, not O(T^2 D)."""
    return p.probs * p.f_norms[:, :, None, :]


# ---- per layer ------------------------------------------------------------------------------------------
class Terms(NamedTuple):
    """What ``norm_layer``, ALTI and GlobEnc read from one pass over the heads' transformed values ``f``
    (:func:`~probing.mixing.kernels.key_terms`); a term nobody asked for is None."""

    gram0: Optional[torch.Tensor]  # (B, T, H, H) <f^h_j, f^k_j>: norm_layer
    gram2: Optional[torch.Tensor]  # (B, T, H, H) <u^h_j, u^k_j>, u = γ2 ⊙ centred f1: GlobEnc
    fx2: Optional[torch.Tensor]  # (B, H, T) <u^h_j, x2_j>: GlobEnc's cross term with the residual
    alti: Optional[torch.Tensor]  # (B, T, T) ALTI's scores before rows are normalised


def layer_terms(p: LayerPieces, gram0: bool, x2: Optional[torch.Tensor], alti: bool) -> Terms:
    """The wanted terms from ``f`` (one GEMM per head), compiled on CPU (padding skipped, left at 0),
    :func:`layer_terms_dense` elsewhere: ``gram0`` for norm_layer; GlobEnc's ``gram2`` and ``fx2`` when given
    its residual term ``x2`` (:func:`globenc_residual`); ALTI's scores. Centring and gains are linear, so
    ``f1 = γ1 ⊙ centred f`` and ``u`` are ``f`` through LN1's (and LN2's) maps, as :func:`contributions`
    describes."""
    if p.values.device.type != "cpu":
        return layer_terms_dense(p, gram0, x2, alti)
    f = p.f_lent()  # (B, H, T, D), head-major underneath; read once, by the kernel
    b, n_heads, t, _ = f.shape
    gram2 = x2 is not None
    grams = torch.zeros(int(gram0) + int(gram2), b, t, n_heads, n_heads)
    none = torch.empty(0, t, n_heads, n_heads)
    g0, g2 = (grams[0] if gram0 else none), (grams[-1] if gram2 else none)
    fx2 = torch.zeros(b, n_heads, t) if gram2 else torch.empty(0, n_heads, t)
    scores = torch.zeros(b, t, t) if alti else torch.empty(0, t, t)
    x1, target = _alti_inputs(p) if alti else (p.x, p.x)
    key_terms(p.probs.contiguous().numpy(), f.transpose(0, 1).contiguous().numpy(),
              p.ln1.weight.contiguous().numpy(), p.ln2.weight.contiguous().numpy(), x1.contiguous().numpy(),
              (x2 if gram2 else p.x).contiguous().numpy(), target.contiguous().numpy(), p.key_lengths.numpy(),
              g0.numpy(), g2.numpy(), fx2.numpy(), scores.numpy())
    return Terms(g0 if gram0 else None, g2 if gram2 else None, fx2 if gram2 else None, scores if alti else None)


def layer_terms_dense(p: LayerPieces, gram0: bool, x2: Optional[torch.Tensor], alti: bool) -> Terms:
    """:func:`layer_terms` in torch, on any device (padding included)."""
    f = p.f
    f1 = p.ln1.centred(f)
    u = p.ln2.centred(f1) if x2 is not None else None
    return Terms(torch.einsum("bhjd,bkjd->bjhk", f, f) if gram0 else None,
                 torch.einsum("bhjd,bkjd->bjhk", u, u) if u is not None else None,
                 (u * x2[:, None]).sum(-1) if u is not None else None,
                 alti_l1_scores_dense(p.probs, f1, *_alti_inputs(p)) if alti else None)


def _alti_inputs(p: LayerPieces) -> tuple[torch.Tensor, torch.Tensor]:
    """ALTI's residual and target, both divided by LN1's scale ``s_i``: ``x1 = γ1 ⊙ centred x`` (so that
    ``T_i(v_ij) = s_i (Σ_h α f1 + [i = j] x1)``) and ``h_i / s_i`` (B, T, D)."""
    centred, s1 = p.ln1.split(_pre_ln1(p))
    return p.x1, centred + p.ln1.bias / s1  # (LN1(pre) = centred · s1 + β) / s1


def globenc_residual(p: LayerPieces) -> torch.Tensor:
    """The residual ``x`` through LN1's and LN2's centring and gains (GlobEnc's ``[i = j]`` term, ``x2``)."""
    return p.ln2.centred(p.x1)


def weighted_sq_norms(p: LayerPieces, grams: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """``||Σ_h α^h_ij u^h_j||^2`` (B, T, T) for each Gram matrix per piece (``<u^h_j, u^k_j>``, (B, T, H, H)),
    ``Σ_{h,k} α^h α^k <u^h_j, u^k_j>``: O(T^2 H^2) instead of materialising the (B, T, T, D) sums. Compiled on
    CPU (all Grams in one pass over the weights; padding left at 0)."""
    if p.probs.device.type != "cpu" or not grams:
        return [_weighted_sq_norms_dense(p.probs, g) for g in grams]
    b, _, t, _ = p.probs.shape
    out = torch.zeros(len(grams), b, t, t)
    quad_forms(p.probs.contiguous().numpy(), torch.stack(list(grams)).numpy(), p.key_lengths.numpy(), out.numpy())
    return list(out)


def _weighted_sq_norms_dense(probs: torch.Tensor, gram: torch.Tensor) -> torch.Tensor:
    left = torch.einsum("bhij,bjhk->bijk", probs, gram)  # (B, T, T, H)
    return (left * probs.permute(0, 2, 3, 1)).sum(-1)


def norm_layer(p: LayerPieces) -> torch.Tensor:
    """``||Σ_h α^h_ij f^h(x_j)||``, the heads' output for piece j seen from query i (from the block's shared
    decomposition where the block was captured, else from the Gram matrices of ``f`` alone)."""
    if p.post_ln_block:
        return contributions(p, [Measure.norm_layer])[Measure.norm_layer]
    gram = torch.einsum("bhtd,bktd->bthk", p.f, p.f)  # (B, T, H, H): <f^h_j, f^k_j>
    return weighted_sq_norms(p, [gram])[0].clamp(min=0).sqrt()[:, None]


def mixed_vectors(p: LayerPieces, rows: slice) -> torch.Tensor:
    """``v_ij = Σ_h α^h_ij f^h(x_j) + [i = j] x_i`` for query rows ``rows``: ``(B, I, T, D)``; summed over j,
    plus ``b_O``, it is the input of the first LayerNorm."""
    return _mix(p.probs, p.f, p.x, rows)


def _mix(probs: torch.Tensor, f: torch.Tensor, x: torch.Tensor, rows: slice) -> torch.Tensor:
    """``Σ_h α^h_ij f^h_j + [i = j] x_i`` for rows ``rows`` (one batched matmul over (b, j), K = H)."""
    v = (probs[:, :, rows].permute(0, 3, 2, 1) @ f.transpose(1, 2)).transpose(1, 2)  # (B, I, T, D)
    idx = torch.arange(x.shape[1], device=v.device)[rows]
    v[:, torch.arange(len(idx), device=v.device), idx] += x[:, rows]
    return v


def ln1_input(p: LayerPieces) -> torch.Tensor:
    """``Σ_h Σ_j α^h_ij f^h_j + b_O + x_i`` (B, T, D), without the (B, T, T, D) vectors: LN1's input in a
    post-LN block, the residual stream after the attention block in a pre-LN or parallel one."""
    return torch.einsum("bhij,bhjd->bid", p.probs, p.f) + p.b_o + p.x


def _pre_ln1(p: LayerPieces) -> torch.Tensor:
    """LN1's input as hooked in the forward pass, else as the decomposition sums it (equal within float
    rounding; the identity tests check :func:`ln1_input` against the hook)."""
    return p.ln1_in if p.ln1_in is not None else ln1_input(p)


def attention_block_output(p: LayerPieces) -> torch.Tensor:
    """``h = LN1(ln1_input)`` (B, T, D), the input of the feed-forward block."""
    return p.ln1(ln1_input(p))


SHARED = (Measure.norm_layer, Measure.alti, Measure.globenc)  # computed together by contributions()


def contributions(p: LayerPieces, wanted: Sequence[Measure]) -> dict[Measure, torch.Tensor]:
    """``norm_layer``, ALTI and GlobEnc (those of ``wanted``) from one decomposition of LN1's input into the
    vectors ``v_ij``, with one pass over the heads' transformed values (:func:`layer_terms`).

    LN1 is linear once its input's scale ``s_i`` is fixed: ``T_i(v) = γ ⊙ (v - mean v) s_i``, so
    ``h_i = Σ_j T_i(v_ij) + T_i(b_O) + β``; the bias terms belong to no token, as in Ferrando et al.'s code.
    ALTI (Ferrando et al. 2022): ``max(0, ||h_i||_1 - ||h_i - T_i(v_ij)||_1)``, rows normalised.
    GlobEnc (Modarressi et al. 2022): ``T_ij`` carried through LN2 the same way, scored by its norm, rows
    normalised. Centring and gains are linear, so they are applied to ``f`` and ``x`` (O(T D)) rather than to
    the (B, T, T, D) vectors; a row's common factor (``s_i``, and LN2's scale, which the FFN sets) cancels
    when the row is normalised, so GlobEnc's norms (like ``norm_layer``'s) come from Gram matrices and never
    need the vectors.
    """
    wanted = {Measure(m) for m in wanted}
    x2 = globenc_residual(p) if Measure.globenc in wanted else None
    terms = layer_terms(p, Measure.norm_layer in wanted, x2, Measure.alti in wanted)
    grams = [g for g in (terms.gram0, terms.gram2) if g is not None]
    sq = dict(zip([m for m in (Measure.norm_layer, Measure.globenc) if m in wanted], weighted_sq_norms(p, grams)))
    out = {}
    if Measure.norm_layer in wanted:
        out[Measure.norm_layer] = sq[Measure.norm_layer].clamp(min=0).sqrt()[:, None]
    if Measure.alti in wanted:
        out[Measure.alti] = normalise_rows(terms.alti)[:, None]
    if Measure.globenc in wanted:
        g = sq[Measure.globenc]
        diag = torch.diagonal(p.probs, dim1=-2, dim2=-1)  # (B, H, T): α^h_ii
        cross = 2 * (diag * terms.fx2).sum(1) + x2.square().sum(-1)  # the residual, at i = j
        g.diagonal(dim1=-2, dim2=-1).add_(cross)
        out[Measure.globenc] = normalise_rows(g.clamp(min=0).sqrt())[:, None]
    return out


def alti_l1_scores_dense(probs: torch.Tensor, f1: torch.Tensor, x1: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """``max(0, ||h_i||_1 - ||h_i - u_ij||_1)`` (B, T, T) for ``u_ij = Σ_h α^h_ij f1^h_j + [i = j] x1_i``, in
    torch, on any device, through blocks of (B, rows, T, D) vectors (the compiled kernel forms each vector
    in cache instead)."""
    b, t, d = x1.shape
    scores = torch.zeros(b, t, t, device=probs.device)
    for rows in _blocks(t, b * t * d):
        u = _mix(probs, f1, x1, rows)  # (B, I, T, D) = T_i(v_ij) / s_i
        dist = (u - h[:, rows, None]).abs().sum(-1)
        scores[:, rows] = (h[:, rows].abs().sum(-1, keepdim=True) - dist).clamp(min=0)
    return scores


def alti(p: LayerPieces) -> torch.Tensor:
    """ALTI (B, 1, T, T): through LN1 in a post-LN block (:func:`contributions`), on the residual stream in a
    pre-LN or parallel one (:func:`alti_residual_stream`)."""
    if p.wiring is Wiring.post_ln:
        return contributions(p, [Measure.alti])[Measure.alti]
    return alti_residual_stream(p)


def alti_residual_stream(p: LayerPieces) -> torch.Tensor:
    """ALTI of a pre-LN or parallel block (B, 1, T, T), as Ferrando et al. (2023, "Explaining How Transformers
    Use Context to Build Predictions", the section on ALTI in decoder language models) define it for the
    attention block; the authors' encoder ALTI code takes the same decomposition for pre-LayerNorm models.

    The residual stream after the attention block is ``y_i = x_i + Σ_j Σ_h α^h_ij f^h_j + b_O``, x the layer's
    input; ``f^h_j = v^h_j W_O^h`` with ``v_j`` computed from ``LN1(x_j)``: LN1 acts on each token alone, so
    it is inside the values the model computed, not a map to fold in as in a post-LN block. Token j's
    contribution is ``z_ij = Σ_h α^h_ij f^h_j + [i = j] x_i`` (the residual is token i's own); ``b_O`` is in
    y and in no ``z``. Scores are the L1 proximity ``max(0, ||y_i||_1 - ||y_i - z_ij||_1)``, rows normalised;
    a key that no head of query i attends to (right of a causal query, padding) adds the zero vector and
    scores 0. Ferrando & Voita (2024, "Information Flow Routes", the method section on the importance of
    edges) score with the same proximity but take each head's ``α^h_ij f^h_j`` and the residual as parts of
    their own; here the heads are summed per token, as ALTI does, to give one map per layer.

    A parallel block adds ``FFN(LN2(x_i))`` to the same sum: it reads token i alone, so the map covers
    ``x + attn`` and leaves the FFN term out, as a pre-LN block's FFN (which follows ``y``) is left out.
    """
    scores = alti_l1_scores_dense(p.probs, p.f, p.x, ln1_input(p))
    eye = torch.eye(scores.shape[-1], dtype=torch.bool, device=scores.device)
    return normalise_rows(scores * (attended(p) | eye))[:, None]


def attended(p: LayerPieces) -> torch.Tensor:
    """``(B, T, T)`` bool: some head of query i gives key j a weight above 0."""
    return p.probs.amax(dim=1) > 0


def globenc(p: LayerPieces) -> torch.Tensor:
    """GlobEnc (B, 1, T, T), post-LN blocks only (:func:`contributions`)."""
    if p.wiring is not Wiring.post_ln:
        raise globenc_refused(p.wiring)
    return contributions(p, [Measure.globenc])[Measure.globenc]


def cosine_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``1 - cos(a, b)`` over the last axis as ``||a/|a| - b/|b|||^2 / 2``: the same number, but accurate when
    it is tiny (1 - cos in float32 is noise below ~1e-7, and a row of value zeroing can be that small)."""
    unit = torch.nn.functional.normalize
    return 0.5 * (unit(a, dim=-1) - unit(b, dim=-1)).square().sum(-1)


def value_zeroing(p: LayerPieces) -> torch.Tensor:
    """Mohebbi et al. (2023): the cosine distance between piece i's layer output and its output when piece
    j's value vectors are zeroed in every head (a shared key/value head once for all the heads it serves),
    rows normalised; keys no query attends to (padding) score 0.

    Zeroing j's values changes no weight and removes exactly ``g_ij = Σ_h α^h_ij f^h_j`` from the attention
    block's sum, so each "extra pass" re-runs only what follows that sum, for a block of zeroed tokens at once:
    LN1 -> FFN -> LN2 on ``pre_i - g_ij`` (post-LN), ``h' + FFN(LN2(h'))`` on ``h' = h_i - g_ij`` (pre-LN),
    ``h' + FFN(LN2(x_i))`` (parallel, whose FFN reads the layer's input and so does not change)."""
    if p.wiring is Wiring.post_ln:
        return _value_zeroing_post_ln(p)
    return _value_zeroing_residual(p)


def _value_zeroing_post_ln(p: LayerPieces) -> torch.Tensor:
    b, t, d = p.x.shape
    pre = _pre_ln1(p)
    h = p.ln1(pre)
    y = p.ln2(h + p.ffn(h))  # (B, T, D)
    dist = torch.zeros(b, t, t, device=p.x.device)
    for cols in _blocks(t, 8 * b * t * d):  # the FFN's inner width is ~4 D: room for it
        g = torch.einsum("bhij,bhjd->bijd", p.probs[..., cols], p.f[:, :, cols])  # (B, T, J, D)
        h_zero = p.ln1(pre[:, :, None] - g)
        y_zero = p.ln2(h_zero + p.ffn(h_zero))
        dist[:, :, cols] = cosine_distance(y_zero, y[:, :, None])
    used = p.probs.amax(dim=(1, 2)) > 0  # (B, T): keys that receive any weight
    return normalise_rows(dist * used[:, None, :])[:, None]


def _value_zeroing_residual(p: LayerPieces) -> torch.Tensor:
    """:func:`value_zeroing` of a pre-LN or parallel block; a key no head of query i attends to leaves i's
    output as it was and scores 0."""
    b, t, d = p.x.shape
    h = ln1_input(p)  # the residual stream after the attention block
    parallel = p.wiring is Wiring.parallel
    mlp = p.ffn(p.ln2(p.x if parallel else h))
    y = h + mlp
    dist = torch.zeros(b, t, t, device=p.x.device)
    for cols in _blocks(t, 8 * b * t * d):
        g = torch.einsum("bhij,bhjd->bijd", p.probs[..., cols], p.f[:, :, cols])  # (B, T, J, D)
        h_zero = h[:, :, None] - g
        # contiguous: a Conv1D (GPT-2) views its input flat
        y_zero = h_zero + (mlp[:, :, None] if parallel else p.ffn(p.ln2(h_zero).contiguous()))
        dist[:, :, cols] = cosine_distance(y_zero, y[:, :, None])
    return normalise_rows(dist * attended(p))[:, None]


LAYER_MEASURES: dict[Measure, Callable[[LayerPieces], torch.Tensor]] = {
    Measure.attention: attention,
    Measure.norm: norm,
    Measure.norm_layer: norm_layer,
    Measure.alti: alti,
    Measure.globenc: globenc,
    Measure.value_zeroing: value_zeroing,
}


# ---- across layers --------------------------------------------------------------------------------------
def rollout(maps: torch.Tensor, residual: bool) -> torch.Tensor:
    """Abnar and Zuidema (2020): ``R_0 = A_0``, ``R_l = A_l R_{l-1}`` for per-layer maps ``(B, L, T, T)``.

    ``residual``: each ``A_l`` is first ``0.5·A_l + 0.5·I`` with rows renormalised (for raw attention; ALTI,
    GlobEnc and value zeroing count the residual already)."""
    if residual:
        eye = torch.eye(maps.shape[-1], device=maps.device, dtype=maps.dtype)
        maps = normalise_rows(0.5 * maps + 0.5 * eye)
    out = [maps[:, 0]]
    for layer in range(1, maps.shape[1]):
        out.append(maps[:, layer] @ out[-1])
    return torch.stack(out, dim=1)


# What of a layer each measure reads (probing.mixing.families.NEEDS): per-head value vectors and the output
# projection, or the whole block (GlobEnc: a post-LayerNorm one).
BLOCK_MEASURES = frozenset({Measure.alti, Measure.globenc, Measure.value_zeroing, Measure.alti_rollout,
                            Measure.globenc_rollout, Measure.value_zeroing_rollout})
GLOBENC = frozenset({Measure.globenc, Measure.globenc_rollout})


def needs(measures: Sequence[Measure]) -> str:
    """The capture a list of measures needs (:func:`~probing.mixing.layout.capture`): ``globenc`` (the block,
    refused off post-LN before any pass), ``block``, ``norm`` (the values: ``norm_layer``), ``value_norms``
    (their norms alone: ``norm`` and nothing beyond it) or (no measure beyond the weights) ``heads``."""
    wanted = {Measure(m) for m in measures} - {Measure.attention, Measure.rollout}
    if wanted & GLOBENC:
        return "globenc"
    if wanted & BLOCK_MEASURES:
        return "block"
    return "value_norms" if wanted == {Measure.norm} else "norm" if wanted else "heads"


class LazyLayers(Sequence[torch.Tensor]):
    """A per-head measure's L maps ``(B, H, T, T)``, layer k computed from ``pieces[k]`` each time it is read:
    read in order and let go (as pooling does, :func:`~probing.alignment.pool_attention`), a few layers' maps
    exist at a time, where a list would hold all L (and stacking them, twice that)."""

    def __init__(self, measure: Callable[[LayerPieces], torch.Tensor], pieces: Sequence[LayerPieces]):
        self.measure, self.pieces = measure, pieces

    def __len__(self) -> int:
        return len(self.pieces)

    @overload
    def __getitem__(self, k: int) -> torch.Tensor: ...

    @overload
    def __getitem__(self, k: slice) -> list[torch.Tensor]: ...

    def __getitem__(self, k: "int | slice") -> "torch.Tensor | list[torch.Tensor]":
        if isinstance(k, slice):
            return [self[i] for i in range(len(self))[k]]
        return self.measure(self.pieces[k])


def layer_maps(measures: Sequence[Measure], pieces: Sequence[LayerPieces]) -> dict[Measure, Sequence[torch.Tensor]]:
    """Every requested measure for one batch, as L maps ``(B, heads_of(m), T, T)`` float32 each: per-head
    measures as :class:`LazyLayers` (computed as they are read), the others at once (``norm_layer``, ALTI and
    GlobEnc share one decomposition; rollouts use the per-layer maps of their base measure, head-mean
    weights for ``rollout``)."""
    wanted = [Measure(m) for m in measures]
    rolled = {ROLLOUTS[m][0] for m in wanted if m in ROLLOUTS}
    eager = [m for m in LAYER_MEASURES if m in rolled or (m in wanted and m not in PER_HEAD)]
    shared = [m for m in SHARED if m in eager] if pieces and pieces[0].post_ln_block else []
    per_layer: dict[Measure, list[torch.Tensor]] = {m: [] for m in eager}
    for p in pieces:
        got = contributions(p, shared) if shared else {}
        for m in eager:
            per_layer[m].append(got[m] if m in got else LAYER_MEASURES[m](p))
    out: dict[Measure, Sequence[torch.Tensor]] = {}
    for m in wanted:
        if m in ROLLOUTS:
            base, residual = ROLLOUTS[m]
            out[m] = rollout(torch.stack(per_layer[base], dim=1).mean(dim=2), residual)[:, :, None].unbind(1)
        else:
            out[m] = LazyLayers(LAYER_MEASURES[m], pieces) if m in PER_HEAD else per_layer[m]
    return out


def compute(measures: Sequence[Measure], pieces: Sequence[LayerPieces]) -> dict[Measure, torch.Tensor]:
    """Every requested measure for one batch: ``(B, L, heads_of(m), T, T)`` float32 each, over pieces
    (:func:`layer_maps`, stacked)."""
    return {m: torch.stack(list(maps), dim=1) for m, maps in layer_maps(measures, pieces).items()}
