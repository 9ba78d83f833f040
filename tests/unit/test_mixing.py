"""Context-mixing measures (probing.mixing) on tiny random BERT, RoBERTa and DistilBERT models built here,
against identities of the layer, naive references and hand-worked numbers."""

from __future__ import annotations

import dataclasses
import math

import families
import pytest
import torch
from mixing_oracle import naive_value_zeroing, per_head_values, randomise, run
from torch import nn

from probing.config import Measure
from probing.mixing import LayerPieces, LayoutError, Norm, compute, layer_parts, rollout
from probing.mixing import measures as M

VOCAB = 40


def _bert():
    from transformers import BertConfig, BertModel
    return BertModel(BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                intermediate_size=64, max_position_embeddings=64, attn_implementation="eager"))


def _roberta():
    from transformers import RobertaConfig, RobertaModel
    return RobertaModel(RobertaConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                      intermediate_size=64, max_position_embeddings=70, pad_token_id=1,
                                      attn_implementation="eager"))


def _distilbert():
    from transformers import DistilBertConfig, DistilBertModel
    return DistilBertModel(DistilBertConfig(vocab_size=VOCAB, dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                                            max_position_embeddings=64, attn_implementation="eager"))


BUILDERS = {"bert": _bert, "roberta": _roberta, "distilbert": _distilbert}


@pytest.fixture(scope="module", params=sorted(BUILDERS))
def model(request):
    torch.manual_seed(0)
    return randomise(BUILDERS[request.param](), seed=1)


@pytest.fixture(scope="module")
def bert():
    torch.manual_seed(0)
    return randomise(_bert(), seed=2)


def _batch(lengths=(9, 6)):
    """Random ids for sentences of these lengths, right-padded, with their mask."""
    inputs = families.batch(lengths, VOCAB, seed=3)
    return inputs["input_ids"], inputs["attention_mask"]


def test_decomposition_is_the_ln1_input(model):
    """Σ_h Σ_j α f^h(x_j) + b_O + x_i equals what the model's first LayerNorm receives (its own hook), and the
    captured weights are the model's attentions, on every real position of a padded batch."""
    ids, mask = _batch()
    pieces, attentions, ln_in, ln_out = run(model, ids, mask)
    real = mask.bool()
    for k, p in enumerate(pieces):
        assert torch.equal(p.probs, attentions[k].float())
        err = (M.ln1_input(p) - ln_in[k])[real].abs().max().item()
        assert err < 1e-5, (k, err)
        assert (M.attention_block_output(p) - ln_out[k])[real].abs().max().item() < 1e-5
        assert ln_in[k][real].abs().max().item() > 0.5  # not trivially small


def test_alti_vectors_sum_through_layernorm_to_the_output(model):
    """LN1 as a linear map per token: Σ_j T_i(v_ij) + T_i(b_O) + β is the attention block's output."""
    ids, mask = _batch()
    pieces, _, _, ln_out = run(model, ids, mask)
    for k, p in enumerate(pieces):
        pre = M.ln1_input(p)
        scale = p.ln1.scale(pre)
        vectors = p.ln1.linear(M.mixed_vectors(p, slice(None)), scale[:, :, None])
        total = vectors.sum(2) + p.ln1.linear(p.b_o.expand_as(pre), scale) + p.ln1.bias
        assert (total - ln_out[k])[mask.bool()].abs().max().item() < 1e-5


def test_norm_is_alpha_times_the_value_norm(bert):
    """``norm`` against α · ||f^h(x_j)|| with f from the weight slices head by head, and ``norm_layer`` against
    the materialised sum over heads on the real pieces (padding rows and keys are skipped: 0)."""
    ids, mask = _batch()
    pieces, _, _, _ = run(bert, ids, mask)
    pairs = mask.bool()[:, :, None] & mask.bool()[:, None, :]
    for k, p in enumerate(pieces):
        f = per_head_values(bert, k, p.x, 4)
        torch.testing.assert_close(p.f, f, atol=1e-5, rtol=1e-5)
        expected = p.probs * f.norm(dim=-1).unsqueeze(2)
        torch.testing.assert_close(M.norm(p), expected, atol=1e-6, rtol=1e-5)
        summed = torch.einsum("bhij,bhjd->bijd", p.probs, f).norm(dim=-1)
        got = M.norm_layer(p)[:, 0]
        torch.testing.assert_close(got[pairs], summed[pairs], atol=1e-4, rtol=1e-4)
        assert got[~pairs].abs().max() == 0
        assert expected.max() > 0.1


def test_value_zeroing_matches_rerunning_the_layer(model):
    """Value zeroing against re-running each layer once per token with that token's values zeroed."""
    ids, mask = _batch((8,))
    pieces, _, _, _ = run(model, ids, mask)
    for k, p in enumerate(pieces):
        naive = naive_value_zeroing(model, k, p.x)
        got = M.value_zeroing(p)[0, 0]
        torch.testing.assert_close(got, naive, atol=2e-4, rtol=1e-3)
        assert torch.allclose(got.sum(-1), torch.ones(8), atol=1e-5)


def test_value_zeroing_blocks_give_the_same_maps(bert, monkeypatch):
    """Splitting the zeroed tokens into blocks of one (a small memory budget) changes nothing."""
    ids, mask = _batch()
    pieces, _, _, _ = run(bert, ids, mask)
    whole = [M.value_zeroing(p) for p in pieces]
    ac = [M.alti(p) for p in pieces]
    monkeypatch.setattr(M, "BLOCK_ELEMENTS", 1)
    for p, w, a in zip(pieces, whole, ac):
        torch.testing.assert_close(M.value_zeroing(p), w, atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(M.alti(p), a, atol=1e-6, rtol=1e-5)


def test_padded_batch_equals_one_sentence_at_a_time(bert):
    """Every measure, rollouts included, of a padded batch equals the unpadded sentence's, on real positions."""
    ids, mask = _batch((9, 6))
    batched = compute(list(Measure), run(bert, ids, mask)[0])
    single = compute(list(Measure), run(bert, ids[1:, :6], mask[1:, :6])[0])
    for m in Measure:
        torch.testing.assert_close(batched[m][1, ..., :6, :6], single[m][0], atol=1e-5, rtol=1e-4, msg=str(m))


def _hand_pieces(b_o: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> LayerPieces:
    """One head, three tokens, D = 3, γ = 1, β = 0, eps = 1/3, FFN = 0. Row 0 is built so that
    v_00 = (0.8, -0.6, -0.2), v_01 = (0.4, -0.6, 0.2), v_02 = (-0.2, 0.2, 0) (each zero-mean): LN1's input is
    (1, -1, 0) + b_O, whose variance 2/3 plus eps is 1, so LN1 is the identity on these vectors."""
    probs = torch.tensor([[0.5, 0.25, 0.25], [0.2, 0.6, 0.2], [1 / 3, 1 / 3, 1 / 3]])[None, None]
    f = torch.tensor([[0.4, 0.0, -0.4], [1.6, -2.4, 0.8], [-0.8, 0.8, 0.0]])[None, None]
    x = torch.tensor([[0.6, -0.6, 0.0], [1.0, 0.0, -1.0], [0.0, 1.0, -1.0]])[None]
    ones, zeros = torch.ones(3), torch.zeros(3)
    return _with_f(LayerPieces(x=x, probs=probs, values=f, w_o=torch.eye(3)[:, None], b_o=torch.tensor(b_o),
                               ln1=Norm(ones, zeros, 1 / 3), ln2=Norm(ones, zeros, 1 / 3),
                               ffn=lambda h: torch.zeros_like(h)), f)


def _with_f(p: LayerPieces, f: torch.Tensor) -> LayerPieces:
    """``p`` with transformed values ``f`` (B, H, T, D): ``f`` as the values, the identity as each head's W_O."""
    eye = torch.eye(f.shape[-1])[:, None].expand(-1, f.shape[1], -1)
    return dataclasses.replace(p, values=f, w_o=eye)


def test_alti_hand_worked():
    """y_0 = (1, -1, 0), ||y_0||_1 = 2. ||y_0 - v_00||_1 = ||(0.2, -0.4, 0.2)|| = 0.8 -> 1.2; ||y_0 - v_01||_1 =
    ||(0.6, -0.4, -0.2)|| = 1.2 -> 0.8; ||y_0 - v_02||_1 = ||(1.2, -1.2, 0)|| = 2.4 -> -0.4, clipped to 0.
    Row: (1.2, 0.8, 0) / 2."""
    p = _hand_pieces()
    torch.testing.assert_close(M.ln1_input(p)[0, 0], torch.tensor([1.0, -1.0, 0.0]))
    torch.testing.assert_close(M.alti(p)[0, 0, 0], torch.tensor([0.6, 0.4, 0.0]))


def test_alti_bias_belongs_to_no_token():
    """With v_02 replaced by the output bias b_O = (-0.2, 0.2, 0) (token 2's value zero), y_0 is unchanged, so
    tokens 0 and 1 keep 1.2 and 0.8, and token 2, which now brings nothing, gets 0."""
    p = _hand_pieces(b_o=(-0.2, 0.2, 0.0))
    p = _with_f(p, p.f * torch.tensor([1.0, 1.0, 0.0])[None, None, :, None])
    torch.testing.assert_close(M.ln1_input(p)[0, 0], torch.tensor([1.0, -1.0, 0.0]))
    torch.testing.assert_close(M.alti(p)[0, 0, 0], torch.tensor([0.6, 0.4, 0.0]))


def test_globenc_hand_worked():
    """FFN = 0 and LN2 like LN1, so LN2 is the identity too and GlobEnc is ||v_0j|| normalised:
    sqrt(1.04) : sqrt(0.56) : sqrt(0.08) = sqrt(13) : sqrt(7) : 1."""
    expected = torch.tensor([math.sqrt(13), math.sqrt(7), 1.0]) / (math.sqrt(13) + math.sqrt(7) + 1)
    torch.testing.assert_close(M.globenc(M_pieces := _hand_pieces())[0, 0, 0], expected)
    both = M.contributions(M_pieces, [Measure.alti, Measure.globenc])
    torch.testing.assert_close(both[Measure.globenc][0, 0, 0], expected)
    torch.testing.assert_close(both[Measure.alti][0, 0, 0], torch.tensor([0.6, 0.4, 0.0]))


def test_globenc_against_the_model_second_layernorm(bert):
    """GlobEnc token by token from the model's own modules: T_ij = LN1-linear(v_ij) with v_ij = Σ_h α f^h_j +
    [i=j] x_i, then LN2-linear with the scale of what the model's second LayerNorm received (a hook; the code
    under test leaves that scale out, since it is one factor per row and rows are normalised)."""
    ids, mask = _batch((6,))
    ln2_in, handles = {}, []
    for k, layer in enumerate(bert.encoder.layer):
        handles.append(layer.output.LayerNorm.register_forward_hook(
            lambda mod, args, out, k=k: ln2_in.__setitem__(k, args[0].detach().clone())))
    try:
        pieces = run(bert, ids, mask)[0]
    finally:
        for h in handles:
            h.remove()
    for k, p in enumerate(pieces):
        layer = bert.encoder.layer[k]
        ln1, ln2 = layer.attention.output.LayerNorm, layer.output.LayerNorm
        f = per_head_values(bert, k, p.x, 4)[0]
        pre = M.ln1_input(p)[0]
        expected = torch.zeros(6, 6)
        for i in range(6):
            s1 = 1 / torch.sqrt(pre[i].var(unbiased=False) + ln1.eps)
            s2 = 1 / torch.sqrt(ln2_in[k][0, i].var(unbiased=False) + ln2.eps)
            for j in range(6):
                v = sum(p.probs[0, h, i, j] * f[h, j] for h in range(4)) + (p.x[0, i] if i == j else 0)
                t1 = ln1.weight * (v - v.mean()) * s1
                expected[i, j] = (ln2.weight * (t1 - t1.mean()) * s2).norm()
        expected = expected / expected.sum(-1, keepdim=True)
        torch.testing.assert_close(M.globenc(p)[0, 0], expected.detach(), atol=1e-5, rtol=1e-4)


def test_rollout_is_the_explicit_matrix_product():
    """R_l = Â_l ... Â_0 with Â = rownorm(0.5 A + 0.5 I) for raw attention; no residual for the others."""
    g = torch.Generator().manual_seed(4)
    a = torch.rand(2, 3, 5, 5, generator=g)
    a = a / a.sum(-1, keepdim=True)
    eye = torch.eye(5)
    hat = [(0.5 * a[:, k] + 0.5 * eye) / (0.5 * a[:, k] + 0.5 * eye).sum(-1, keepdim=True) for k in range(3)]
    got = rollout(a, residual=True)
    torch.testing.assert_close(got[:, 0], hat[0])
    torch.testing.assert_close(got[:, 2], torch.matmul(hat[2], torch.matmul(hat[1], hat[0])))
    plain = rollout(a, residual=False)
    torch.testing.assert_close(plain[:, 2], a[:, 2] @ a[:, 1] @ a[:, 0])
    torch.testing.assert_close(got.sum(-1), torch.ones(2, 3, 5))


def test_compute_shapes_and_rollouts(bert):
    """Per-head measures keep the heads, per-layer ones have one; ``rollout`` is that of the head-mean weights
    and ``alti_rollout`` that of ALTI; rows of normalised measures sum to 1 on real positions."""
    ids, mask = _batch((7,))
    pieces = run(bert, ids, mask)[0]
    out = compute(list(Measure), pieces)
    for m, a in out.items():
        assert a.shape == (1, 2, M.heads_of(m, 4), 7, 7), m
        if m not in (Measure.norm, Measure.norm_layer):
            torch.testing.assert_close(a.sum(-1), torch.ones_like(a.sum(-1)), msg=str(m))
    torch.testing.assert_close(out[Measure.rollout][:, :, 0], rollout(out[Measure.attention].mean(2), True))
    torch.testing.assert_close(out[Measure.alti_rollout][:, :, 0], rollout(out[Measure.alti][:, :, 0], False))
    assert not torch.allclose(out[Measure.norm], out[Measure.attention])


def test_per_head_measures_are_made_layer_by_layer_as_they_are_read(bert, monkeypatch):
    """``layer_maps`` hands a per-head measure out as layers made when read (none before, one per read), the
    others at once; stacked, they are ``compute``'s maps."""
    ids, mask = _batch((7, 5))
    pieces = run(bert, ids, mask)[0]
    made = []
    monkeypatch.setitem(M.LAYER_MEASURES, Measure.norm, lambda p: made.append(p) or M.norm(p))
    maps = M.layer_maps([Measure.norm, Measure.alti, Measure.rollout], pieces)
    assert isinstance(maps[Measure.norm], M.LazyLayers) and not made
    assert [len(v) for v in maps.values()] == [2, 2, 2]
    assert torch.equal(maps[Measure.norm][1], M.norm(pieces[1])) and made == [pieces[1]]
    out = compute([Measure.norm, Measure.alti, Measure.rollout], pieces)
    for m, layers in maps.items():
        assert torch.equal(torch.stack(list(layers), dim=1), out[m]), m


def test_unknown_layout_is_one_line_naming_the_class():
    class Odd(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = nn.Linear(4, 4)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Module()
            self.encoder.layer = nn.ModuleList([Odd()])

    with pytest.raises(LayoutError, match=r"^Model \(Odd\): no layout entry; supported families: bert, ") as e:
        layer_parts(Model())
    assert "\n" not in str(e.value) and "probing/mixing/families.py" in str(e.value)
    with pytest.raises(LayoutError, match=r"^Linear \(no layer list\): no layout entry"):
        layer_parts(nn.Linear(2, 2))


@pytest.mark.parametrize("n_heads", [3, 4])  # heads padded to a multiple of four in the kernel, or not
def test_layer_terms_kernel_equals_torch_form(n_heads):
    """The compiled terms (the heads' Gram matrices for norm_layer and GlobEnc, GlobEnc's cross term, ALTI's
    L1 scores) and quadratic forms equal the torch forms on real pieces (sentence 1 has 5 of 7 pieces: its
    padded keys get no weight) and are zero for padding; norm_layer equals the norm of the explicit sum of
    vectors."""
    g = torch.Generator().manual_seed(5)
    b, h, t, d, width = 2, n_heads, 7, 4, 10
    scores = torch.randn(b, h, t, t, generator=g)
    scores[1, :, :, 5:] = float("-inf")
    zeros = torch.zeros(width)
    p = LayerPieces(x=torch.randn(b, t, width, generator=g), probs=scores.softmax(-1),
                    values=torch.randn(b, h, t, d, generator=g), w_o=torch.randn(width, h, d, generator=g) * 0.3,
                    b_o=zeros, ln1=Norm(torch.rand(width, generator=g) + 0.5, zeros, 1e-5),
                    ln2=Norm(torch.rand(width, generator=g) + 0.5, zeros, 1e-5), ffn=torch.zeros_like)
    x2 = M.globenc_residual(p)
    fast, dense = M.layer_terms(p, True, x2, True), M.layer_terms_dense(p, True, x2, True)
    real = {"gram0": (1, slice(0, 5)), "gram2": (1, slice(0, 5)), "fx2": (1, slice(None), slice(0, 5)),
            "alti": (1, slice(0, 5), slice(0, 5))}
    for name in M.Terms._fields:
        a, e = getattr(fast, name), getattr(dense, name)
        torch.testing.assert_close(a[0], e[0], atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(a[real[name]], e[real[name]], atol=1e-4, rtol=1e-4)
    assert fast.gram0[1, 5:].abs().sum() == 0 and dense.gram0[1, 5:].abs().sum() > 0
    assert fast.gram2[1, 5:].abs().sum() == 0 and fast.fx2[1, :, 5:].abs().sum() == 0
    assert fast.alti[1, 5:].abs().sum() == 0 and fast.alti[1, :, 5:].abs().sum() == 0
    assert (dense.alti[0] > 0).float().mean() > 0.1  # a real test: some pairs score above the clip
    only = M.layer_terms(p, False, x2, False)  # GlobEnc alone: the same Gram
    assert only.gram0 is None and only.alti is None
    torch.testing.assert_close(only.gram2, fast.gram2)
    sq, sq2 = M.weighted_sq_norms(p, [fast.gram0, fast.gram2])
    torch.testing.assert_close(sq[1, :5, :5], M._weighted_sq_norms_dense(p.probs, dense.gram0)[1, :5, :5],
                               atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(sq2[0], M._weighted_sq_norms_dense(p.probs, dense.gram2)[0], atol=1e-4, rtol=1e-4)
    assert sq[1, 5:].abs().sum() == 0 and sq[1, :, 5:].abs().sum() == 0
    # norm_layer against the explicit sum of vectors
    mixed = torch.einsum("bhij,bhjd->bijd", p.probs, p.f)
    torch.testing.assert_close(M.norm_layer(p)[:, 0, :5, :5], mixed.norm(dim=-1)[:, :5, :5], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(M.norm_layer(p)[0, 0], mixed.norm(dim=-1)[0], atol=1e-4, rtol=1e-4)


def test_layers_lend_one_buffer_for_their_transformed_values():
    """``f_lent`` equals ``f``; the layers of one pass write it into the same scratch memory (grown when a
    larger layer needs more), and a cached ``f`` is what ``f_lent`` returns, never overwritten."""
    from probing.buffers import Buffers

    g = torch.Generator().manual_seed(3)
    zeros = torch.zeros(6)
    scratch = Buffers()

    def pieces(t: int) -> LayerPieces:
        return LayerPieces(x=torch.randn(2, t, 6, generator=g), probs=torch.rand(2, 3, t, t, generator=g),
                           values=torch.randn(2, 3, t, 4, generator=g), w_o=torch.randn(6, 3, 4, generator=g),
                           b_o=zeros, ln1=Norm(torch.ones(6), zeros, 1e-5), ln2=Norm(torch.ones(6), zeros, 1e-5),
                           ffn=torch.zeros_like, scratch=scratch)

    first, second, longer = pieces(5), pieces(5), pieces(9)
    a = first.f_lent()
    expected = torch.einsum("bhtd,ehd->bhte", first.values, first.w_o)
    torch.testing.assert_close(a, expected)
    b = second.f_lent()
    assert b.data_ptr() == a.data_ptr()  # the second layer reuses the first one's memory
    torch.testing.assert_close(b, torch.einsum("bhtd,ehd->bhte", second.values, second.w_o))
    torch.testing.assert_close(longer.f_lent(), torch.einsum("bhtd,ehd->bhte", longer.values, longer.w_o))
    cached = first.f  # computed into its own memory
    assert cached.data_ptr() != a.data_ptr() and first.f_lent() is cached
    torch.testing.assert_close(cached, expected)
