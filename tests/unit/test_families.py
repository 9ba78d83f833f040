"""Every family's layout entry, on a tiny random checkpoint of it: the per-head decomposition reproduces the
attention block's output, the captured head vectors are the weights times the values, a gated head equals
the model with that head's slice of the output projection zeroed, a pass cached from layer k equals a full
gated pass, ALTI decomposes the residual stream after the attention block and value zeroing equals re-running
the model with a token's values zeroed (pre-LN and parallel blocks), and what a layout cannot give is refused
in one line."""

from __future__ import annotations

import pytest
import torch
from families import FAMILY, batch, build, configs

from probing.config import Measure
from probing.interventions.gates import LayerCache, gated, num_heads
from probing.mixing import capture, compute, layer_parts, needs
from probing.mixing import measures as M
from probing.mixing.families import (
    FAMILIES,
    LayoutError,
    QkvSplit,
    Wiring,
    block_parts,
    family_of,
    projection_weight,
)

NAMES = sorted(configs())


@pytest.fixture(scope="module", params=NAMES)
def tiny(request):
    return request.param, build(request.param)


def _outputs_of(parts, inputs, model):
    """Each layer's output projection output (call order) and the model's attentions, from hooks of their own."""
    got = []
    handles = [m.register_forward_hook(lambda mod, a, out: got.append(out.detach().clone()))
               for m in {id(p.out): p.out for p in parts}.values()]
    try:
        with torch.no_grad(), capture(model, "norm") as cap:
            out = model(**inputs, output_attentions=True)
    finally:
        for h in handles:
            h.remove()
    return cap, got, out.attentions


def test_every_config_finds_its_family(tiny):
    name, model = tiny
    fam, layers = family_of(model)
    assert fam.name == FAMILY.get(name, name) and len(layers) == 2
    assert fam.causal == (name in ("gpt2", "gpt-neox", "llama", "qwen2", "mistral"))


def test_per_head_decomposition_reproduces_the_attention_output(tiny):
    """Σ_h Σ_j α^h_ij f^h(x_j) + b_O equals the output projection's output, every real position, every layer
    (fused query-key-value projections split, grouped key/value heads repeated, Conv1D transposed)."""
    name, model = tiny
    inputs = batch()
    cap, outs, attentions = _outputs_of(block_parts(model, "norm"), inputs, model)
    real = inputs["attention_mask"].bool()
    pieces = cap.pieces(probs=attentions)
    assert len(outs) == len(pieces) == 2
    for k, p in enumerate(pieces):
        mixed = torch.einsum("bhij,bhjd->bid", p.probs, p.f) + p.b_o
        err = (mixed - outs[k])[real].abs().max().item()
        assert err < 1e-5, (name, k, err)
        # the head vectors z^h_i = Σ_j α^h_ij v^h_j are what the output projection reads
        z = torch.einsum("bhij,bhjd->bihd", p.probs, p.values).flatten(2)
        assert (z - cap.heads()[k])[real].abs().max().item() < 1e-5


def test_norm_alone_keeps_only_each_layers_value_norms(tiny):
    """``norm`` alone is captured as its norms, taken in the pass (no values, residuals or head vectors
    outlive their layer), and they are the bits the norms of the captured values give."""
    name, model = tiny
    inputs = batch()
    assert needs([Measure.attention, Measure.norm, Measure.rollout]) == "value_norms"
    with torch.no_grad(), capture(model, "value_norms", heads=False) as cap:
        out = model(**inputs, output_attentions=True)
    with torch.no_grad(), capture(model, "norm") as full:
        model(**inputs, output_attentions=True)
    assert all(v is None for v in cap.values + cap.x + cap.ln1_in + cap.context), name
    kept = cap.pieces(probs=out.attentions)
    for k, (p, q) in enumerate(zip(kept, full.pieces(probs=out.attentions))):
        assert p.values is None and p.norms.shape == q.probs.shape[:3]
        assert torch.equal(p.f_norms, q.f_norms), (name, k)
        assert torch.equal(M.norm(p), M.norm(q)), (name, k)


def test_a_zero_gated_head_equals_its_output_columns_zeroed(tiny):
    """Zero ablation of head 1 in every layer through the gates equals the model whose output projections
    have that head's input columns set to 0 (a shared layer's one module gated at each of its calls)."""
    name, model = tiny
    inputs = batch()
    parts = block_parts(model, "heads")
    h, d = num_heads(model), parts[0].out.weight.numel() // parts[0].out.weight.shape[0] // num_heads(model)
    gates = torch.ones(1, len(parts), h)
    gates[0, :, 1] = 0
    with torch.no_grad(), gated(model, gates):
        got = model(**inputs).last_hidden_state
    saved = {id(p.out): p.out.weight.detach().clone() for p in parts}
    try:
        with torch.no_grad():
            for p in parts:
                w = p.out.weight
                cols = slice(d, 2 * d)
                (w[cols, :] if type(p.out).__name__ == "Conv1D" else w[:, cols]).zero_()
            want = model(**inputs).last_hidden_state
    finally:
        with torch.no_grad():
            for p in parts:
                p.out.weight.copy_(saved[id(p.out)])
    real = inputs["attention_mask"].bool()
    assert (got - want)[real].abs().max().item() < 1e-5


def test_a_pass_cached_from_a_layer_equals_a_full_gated_pass(tiny):
    name, model = tiny
    inputs = batch()
    gates = torch.ones(2, 2, num_heads(model))
    gates[:, 1, 2] = torch.tensor([0.0, 0.5])  # two replicas, layer 1 gated
    extra = {"use_cache": False} if getattr(model.config, "use_cache", False) else {}
    with torch.no_grad(), gated(model, gates[:1]):
        first = model(**inputs, **extra).last_hidden_state
    cache = LayerCache(model, inputs)
    with gated(model, gates):
        both = cache.run_from(1, 2)
    real = inputs["attention_mask"].bool()
    b = inputs["input_ids"].shape[0]
    assert (both[:b] - first)[real].abs().max().item() < 1e-5


GLOBENC_REFUSED = (r"^GlobEnc is defined for post-LayerNorm blocks only: it folds both LayerNorms of the block into "
                   r"its decomposition, and the output of a (pre_ln|parallel) block \((.+)\) is not normalised; "
                   r"alti and value_zeroing work on every wiring$")


def test_block_measures_resolve_on_every_family_globenc_on_post_layernorm_ones(tiny):
    name, model = tiny
    fam = family_of(model)[0]
    assert len(layer_parts(model, "block")) == 2
    if fam.wiring is Wiring.post_ln:
        assert len(layer_parts(model, "globenc")) == 2
    else:
        with pytest.raises(LayoutError, match=GLOBENC_REFUSED) as e:
            layer_parts(model, "globenc")
        assert f"({fam.name})" in str(e.value) and "\n" not in str(e.value)


def test_every_entry_has_a_tiny_checkpoint():
    assert {f.name for f in FAMILIES} == {FAMILY.get(n, n) for n in NAMES}
    w = torch.nn.Linear(3, 2).weight
    assert projection_weight(torch.nn.Linear(3, 2)).shape == w.shape


def test_the_documented_support_matrix_is_what_runs():
    from pathlib import Path

    from families import readme_block, support_matrix

    page = (Path(__file__).resolve().parents[2] / "docs" / "models.md").read_text()
    assert readme_block(page) == support_matrix(), "regenerate it: python tests/families.py --write"


def _wiring(name: str) -> Wiring:
    return next(f for f in FAMILIES if f.name == FAMILY.get(name, name)).wiring


POST_LN = [n for n in NAMES if _wiring(n) is Wiring.post_ln]
# pre-LN and parallel blocks, and GPT-NeoX with its parallel residual off (a pre-LN block)
RESIDUAL = [n for n in NAMES if _wiring(n) is not Wiring.post_ln] + ["gpt-neox-sequential"]


def _residual_model(name: str) -> torch.nn.Module:
    if name != "gpt-neox-sequential":
        return build(name)
    from mixing_oracle import randomise
    from transformers import AutoModel

    cfg = configs()["gpt-neox"]
    cfg.use_parallel_residual = False
    torch.manual_seed(0)
    model = randomise(AutoModel.from_config(cfg, attn_implementation="eager"), seed=1)
    assert family_of(model)[0].wiring is Wiring.pre_ln
    return model


@pytest.mark.parametrize("name", POST_LN)
def test_block_measures_decompose_every_post_layernorm_family(name):
    """Where ALTI, GlobEnc and value zeroing are offered, the decomposition they rest on holds: Σ_h Σ_j α f + b_O
    + x equals what the model's first LayerNorm receives, and value zeroing gives a row-stochastic map."""
    from mixing_oracle import run

    model = build(name)
    inputs = batch()
    pieces, _, ln_in, _ = run(model, inputs["input_ids"], inputs["attention_mask"])
    real = inputs["attention_mask"].bool()
    for k, p in enumerate(pieces):
        assert (M.ln1_input(p) - ln_in[k])[real].abs().max().item() < 1e-4, (name, k)
    vz = compute([Measure.value_zeroing], pieces)[Measure.value_zeroing]
    rows = vz.sum(-1)[:, :, 0][real[:, None, :].expand(-1, vz.shape[1], -1)]
    assert torch.allclose(rows, torch.ones_like(rows), atol=1e-5)


def _residual_pass(model, inputs):
    """A pass under the block capture, and from hooks of the test's own each layer's residual stream after its
    attention block: the second norm's input (pre-LN), the layer's input plus the attention module's output
    (parallel, where no module reads that sum)."""
    parts = block_parts(model, "block")
    xs, attn, mid, handles = [], [], [], []
    for p in parts:
        handles.append(p.norm1.register_forward_pre_hook(lambda m, a: xs.append(a[0].detach().clone())))
        handles.append(p.attention.register_forward_hook(lambda m, a, out: attn.append(out[0].detach().clone())))
        handles.append(p.norm2.register_forward_pre_hook(lambda m, a: mid.append(a[0].detach().clone())))
    try:
        with torch.no_grad(), capture(model, needs([Measure.alti, Measure.value_zeroing])) as cap:
            out = model(**inputs, output_attentions=True)
    finally:
        for h in handles:
            h.remove()
    parallel = parts[0].family.wiring is Wiring.parallel
    return cap.pieces(probs=out.attentions), [x + a for x, a in zip(xs, attn)] if parallel else mid


@pytest.mark.parametrize("name", RESIDUAL)
def test_alti_decomposes_the_residual_stream_after_attention(name):
    """Σ_j z_ij + b_O, z_ij = Σ_h α^h_ij f^h_j + [i = j] x_i, is the residual stream after the attention block
    as the model computes it (ModernBERT's layer 0, whose attention norm is an Identity, included), and ALTI is
    the L1 proximity of each z_ij to it, rows normalised; causal models give no weight right of the query."""
    model = _residual_model(name)
    inputs = batch()
    real = inputs["attention_mask"].bool()
    pairs = real[:, :, None] & real[:, None, :]
    pieces, mids = _residual_pass(model, inputs)
    if name == "modernbert":
        assert isinstance(block_parts(model)[0].norm1, torch.nn.Identity)
    for k, (p, y) in enumerate(zip(pieces, mids)):
        z = M.mixed_vectors(p, slice(None))  # (B, T, T, D)
        err = (z.sum(2) + p.b_o - y)[real].abs().max().item()
        assert err < 1e-5 and y[real].abs().max().item() > 0.5, (name, k, err)
        near = (y.abs().sum(-1)[..., None] - (y[:, :, None] - z).abs().sum(-1)).clamp(min=0) * pairs
        got = M.alti(p)[:, 0]
        torch.testing.assert_close(got * pairs, near / near.sum(-1, keepdim=True).clamp(min=1e-30),
                                   atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(got.sum(-1)[real], torch.ones(int(real.sum())), atol=1e-5, rtol=0)
        if family_of(model)[0].causal:
            assert torch.triu(got, 1).abs().max().item() == 0


def _value_zeroed(p, out: torch.Tensor, j: int) -> torch.Tensor:
    """The value projection's output with token j's values zeroed in every head (a grouped key/value head
    once, for all the query heads it serves; the value third of a fused projection)."""
    out = out.clone()
    if p.qkv is None:
        out[:, j] = 0
    elif p.family.qkv_split is QkvSplit.per_head:
        out.view(*out.shape[:2], p.n_heads, 3, -1)[:, j, :, 2] = 0
    else:
        out[:, j, 2 * out.shape[-1] // 3:] = 0
    return out


def _layer_output(model, inputs, k: int, zero=None) -> torch.Tensor:
    """Layer k's output in a pass of the whole model, with token ``zero``'s values zeroed in that layer."""
    p = block_parts(model, "block")[k]
    got = []
    handles = [p.layer.register_forward_hook(
        lambda m, a, out: got.append((out[0] if isinstance(out, tuple) else out).detach().clone()))]
    if zero is not None:
        handles.append(p.value_module.register_forward_hook(lambda m, a, out: _value_zeroed(p, out, zero)))
    try:
        with torch.no_grad():
            model(**inputs)
    finally:
        for h in handles:
            h.remove()
    return got[0].double()


@pytest.mark.parametrize("name", RESIDUAL)
def test_value_zeroing_equals_rerunning_the_model_with_a_token_zeroed(name):
    """Value zeroing of pre-LN and parallel blocks against the model itself run once per token j with j's
    values zeroed in layer k (cosine distance of layer k's outputs, rows normalised over the real tokens)."""
    model = _residual_model(name)
    inputs = batch()
    real = inputs["attention_mask"].bool()
    lengths = real.sum(-1).tolist()
    pieces, _ = _residual_pass(model, inputs)
    got = compute([Measure.value_zeroing], pieces)[Measure.value_zeroing][:, :, 0]  # (B, L, T, T)
    t = real.shape[1]
    for k in range(len(pieces)):
        clean = _layer_output(model, inputs, k)
        dist = torch.zeros(len(lengths), t, t, dtype=torch.float64)
        for j in range(t):
            zeroed = _layer_output(model, inputs, k, zero=j)
            dist[:, :, j] = 1 - torch.nn.functional.cosine_similarity(zeroed, clean, dim=-1)
        for b, n in enumerate(lengths):
            naive = dist[b, :n, :n] / dist[b, :n, :n].sum(-1, keepdim=True)
            torch.testing.assert_close(got[b, k, :n, :n], naive.float(), atol=2e-4, rtol=1e-3)
            assert got[b, k, :n, n:].abs().sum().item() == 0  # padding
            torch.testing.assert_close(got[b, k, :n].sum(-1), torch.ones(n), atol=1e-5, rtol=0)
            if family_of(model)[0].causal:
                assert torch.triu(got[b, k], 1).abs().max().item() == 0
        assert dist.max().item() > 1e-3  # zeroing moves the output


def test_globenc_off_post_layernorm_is_one_line_before_any_pass():
    model = build("llama")
    assert needs([Measure.alti, Measure.globenc_rollout]) == "globenc"
    with pytest.raises(LayoutError, match=GLOBENC_REFUSED) as e:
        with capture(model, needs([Measure.globenc])):
            pass
    assert "(llama)" in str(e.value)
    pieces, _ = _residual_pass(model, batch())
    with pytest.raises(LayoutError, match=GLOBENC_REFUSED):
        compute([Measure.globenc], pieces)


@pytest.mark.parametrize("name", ["llama", "modernbert"])
def test_block_measures_extract_on_a_decoder_and_on_modernbert(name, tmp_path):
    """``extract.measures=[alti, value_zeroing, alti_rollout]`` on a saved tiny checkpoint: every sentence
    stored, rows of words summing to 1, nothing right of the word in the causal model."""
    import numpy as np
    from conftest import TINY_VOCAB, load
    from test_store_extract import TEXTS, cfg, corpus
    from transformers import BertTokenizerFast

    from probing.extract import extract

    d = tmp_path / name
    d.mkdir()
    (d / "vocab.txt").write_text("\n".join(TINY_VOCAB) + "\n")
    BertTokenizerFast.from_pretrained(str(d), do_lower_case=True).save_pretrained(str(d))
    build(name, vocab=len(TINY_VOCAB)).save_pretrained(str(d))
    wanted = [Measure.alti, Measure.value_zeroing, Measure.alti_rollout]
    report = extract(load(str(d), f"tiny-{name}"), corpus(), cfg(tmp_path, measures=wanted))
    for m in wanted:
        store = report.stores[m]
        assert len(store) == len(TEXTS) and store.num_heads == 1
        for i in store.indices:
            maps = store.maps(i)  # (L, 1, n, n)
            assert maps.shape[:2] == (2, 1)
            np.testing.assert_allclose(maps.sum(-1), 1.0, atol=1e-5)
            if name == "llama":
                assert np.abs(np.triu(maps, 1)).max() == 0
