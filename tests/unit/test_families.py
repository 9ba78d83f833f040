"""Every family's layout entry, on a tiny random checkpoint of it: the per-head decomposition reproduces the
attention block's output, the captured head vectors are the weights times the values, a gated head equals
the model with that head's slice of the output projection zeroed, a pass cached from layer k equals a full
gated pass, and what a layout cannot give is refused in one line."""

from __future__ import annotations

import pytest
import torch
from families import FAMILY, batch, build, configs

from probing.importance.gates import LayerCache, gated, num_heads
from probing.mixing import capture, layer_parts
from probing.mixing.families import FAMILIES, LayoutError, Wiring, block_parts, family_of, projection_weight

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


def test_block_measures_need_a_post_layernorm_block(tiny):
    name, model = tiny
    fam = family_of(model)[0]
    if fam.wiring is Wiring.post_ln:
        assert len(layer_parts(model, "block")) == 2
    else:
        with pytest.raises(LayoutError, match=rf"defined here for post-LayerNorm blocks; {fam.name} is "):
            layer_parts(model, "block")


def test_every_entry_has_a_tiny_checkpoint():
    assert {f.name for f in FAMILIES} == {FAMILY.get(n, n) for n in NAMES}
    w = torch.nn.Linear(3, 2).weight
    assert projection_weight(torch.nn.Linear(3, 2)).shape == w.shape


def test_the_readme_support_matrix_is_what_runs():
    from pathlib import Path

    from families import readme_block, support_matrix

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert readme_block(readme) == support_matrix(), "regenerate it: python tests/families.py --readme"


POST_LN = [n for n in NAMES if next(f for f in FAMILIES if f.name == FAMILY.get(n, n)).wiring is Wiring.post_ln]


@pytest.mark.parametrize("name", POST_LN)
def test_block_measures_decompose_every_post_layernorm_family(name):
    """Where ALTI, GlobEnc and value zeroing are offered, the decomposition they rest on holds: Σ_h Σ_j α f + b_O
    + x equals what the model's first LayerNorm receives, and value zeroing gives a row-stochastic map."""
    from mixing_oracle import run

    from probing.config import Measure
    from probing.mixing import compute
    from probing.mixing import measures as M

    model = build(name)
    inputs = batch()
    pieces, _, ln_in, _ = run(model, inputs["input_ids"], inputs["attention_mask"])
    real = inputs["attention_mask"].bool()
    for k, p in enumerate(pieces):
        assert (M.ln1_input(p) - ln_in[k])[real].abs().max().item() < 1e-4, (name, k)
    vz = compute([Measure.value_zeroing], pieces)[Measure.value_zeroing]
    rows = vz.sum(-1)[:, :, 0][real[:, None, :].expand(-1, vz.shape[1], -1)]
    assert torch.allclose(rows, torch.ones_like(rows), atol=1e-5)
