"""Head gates (probing.interventions.gates) on tiny random BERT, RoBERTa and DistilBERT models, against models whose
weights were edited by hand: a zero gate is the head's columns of the output projection zeroed, a mean gate
is those columns folded into the bias, the gradient is a finite difference."""

from __future__ import annotations

import copy

import pytest
import torch
from mixing_oracle import randomise
from test_mixing import BUILDERS, _batch

from probing.interventions.gates import LayerCache, gated, head_means, num_heads
from probing.mixing import layer_parts


@pytest.fixture(scope="module", params=sorted(BUILDERS))
def model(request):
    torch.manual_seed(0)
    return randomise(BUILDERS[request.param](), seed=4)


def _inputs(lengths=(9, 6)):
    ids, mask = _batch(lengths)
    return {"input_ids": ids, "attention_mask": mask}


def _out(model, inputs):
    with torch.no_grad():
        return model(**inputs).last_hidden_state


def _ones(model, replicas=1):
    return torch.ones(replicas, len(layer_parts(model)), num_heads(model))


def _edited(model, layer, head, mean=None):
    """A copy with head ``head``'s columns of layer ``layer``'s output projection zeroed and, for a mean
    ablation, their product with the mean vector added to the bias."""
    m = copy.deepcopy(model)
    out = layer_parts(m)[layer].out
    d = out.weight.shape[1] // num_heads(m)
    cols = slice(head * d, (head + 1) * d)
    with torch.no_grad():
        if mean is not None:
            out.bias += out.weight[:, cols] @ mean
        out.weight[:, cols] = 0
    return m


def _contexts(model, inputs, gates=None, mean=None):
    """Every layer's output-projection input as the module receives it (after the gates, when given)."""
    seen = {}
    handles = []
    ctx = gated(model, gates, mean) if gates is not None else None
    if ctx is not None:
        ctx.__enter__()
    try:
        for k, p in enumerate(layer_parts(model)):
            handles.append(p.out.register_forward_pre_hook(lambda mod, a, k=k: seen.__setitem__(k, a[0].clone())))
        _out(model, inputs)
    finally:
        for h in handles:
            h.remove()
        if ctx is not None:
            ctx.__exit__(None, None, None)
    return seen


def test_zero_gate_is_the_output_projection_slice_zeroed(model):
    inputs = _inputs()
    gates = _ones(model)
    gates[0, 1, 2] = 0
    with gated(model, gates):
        got = _out(model, inputs)
    want = _out(_edited(model, 1, 2), inputs)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
    assert not torch.allclose(got, _out(model, inputs), atol=1e-3)  # the head mattered


def test_zero_gate_leaves_every_other_head_untouched(model):
    inputs = _inputs()
    gates = _ones(model)
    gates[0, 0, 1] = 0
    clean, ablated = _contexts(model, inputs), _contexts(model, inputs, gates)
    d = clean[0].shape[-1] // num_heads(model)
    c, a = clean[0].view(*clean[0].shape[:2], -1, d), ablated[0].view(*ablated[0].shape[:2], -1, d)
    assert torch.equal(a[:, :, 1], torch.zeros_like(a[:, :, 1]))
    keep = [h for h in range(num_heads(model)) if h != 1]
    assert torch.equal(a[:, :, keep], c[:, :, keep])


def test_unit_gates_are_bit_identical(model):
    inputs = _inputs()
    clean = _out(model, inputs)
    with gated(model, _ones(model)):
        assert torch.equal(_out(model, inputs), clean)
    xi = _ones(model).requires_grad_(True)  # the hook runs (a gradient is wanted) and multiplies by 1
    with gated(model, xi, torch.randn(len(layer_parts(model)), num_heads(model), 8)):
        assert torch.equal(model(**inputs).last_hidden_state, clean)


def _naive_context_mean(model, inputs):
    """Each head's context vector recomputed from the weights (softmax(QKᵀ/√d + mask) V), averaged over the
    unpadded positions of the batch. BERT-layout models only (query/key/value of attention.self)."""
    with torch.no_grad():
        hidden = model(**inputs, output_hidden_states=True).hidden_states
    mask = inputs["attention_mask"].bool()
    out = []
    for k, layer in enumerate(model.encoder.layer):
        sa = layer.attention.self
        x, h = hidden[k], num_heads(model)
        b, t, dm = x.shape
        d = dm // h
        q, kk, v = (lin(x).view(b, t, h, d).transpose(1, 2) for lin in (sa.query, sa.key, sa.value))
        scores = q @ kk.transpose(-1, -2) / d ** 0.5
        scores = scores.masked_fill(~mask[:, None, None, :], float("-inf"))
        ctx = (scores.softmax(-1) @ v).transpose(1, 2)  # (B, T, H, d)
        out.append(ctx[mask].mean(0))
    return torch.stack(out)


def test_mean_ablation_uses_the_corpus_mean(model):
    corpus = [_inputs((9, 6)), _inputs((4, 7, 5))]
    means = head_means(model, corpus)
    if hasattr(model, "encoder"):  # BERT, RoBERTa: the mean recomputed from the weights, all batches pooled
        ids = torch.nn.utils.rnn.pad_sequence(
            [r[m.bool()] for c in corpus for r, m in zip(c["input_ids"], c["attention_mask"])], batch_first=True)
        lengths = [int(m.sum()) for c in corpus for m in c["attention_mask"]]
        mask = (torch.arange(ids.shape[1])[None] < torch.tensor(lengths)[:, None]).long()
        torch.testing.assert_close(means, _naive_context_mean(model, {"input_ids": ids, "attention_mask": mask}),
                                   rtol=1e-4, atol=1e-5)
    inputs = corpus[0]
    gates = _ones(model)
    gates[0, 1, 3] = 0
    with gated(model, gates, means):
        got = _out(model, inputs)
    torch.testing.assert_close(got, _out(_edited(model, 1, 3, means[1, 3]), inputs), rtol=0, atol=1e-5)


def test_replicas_and_the_layer_cache_equal_separate_passes(model):
    inputs = _inputs()
    n_layers, h = len(layer_parts(model)), num_heads(model)
    means = head_means(model, [inputs])
    cache = LayerCache(model, inputs)
    assert torch.equal(cache.output, _out(model, inputs))
    for k in range(n_layers):
        gates = _ones(model, h)
        gates[torch.arange(h), k, torch.arange(h)] = 0  # replica r ablates head r of layer k
        with gated(model, gates, means):
            fast = cache.run_from(k, h)
        for r in (0, h - 1):
            with gated(model, gates[r:r + 1], means):
                one = _out(model, inputs)
            torch.testing.assert_close(fast.view(h, *one.shape)[r], one, rtol=0, atol=1e-5)


@pytest.mark.parametrize("mean", [False, True])
def test_gradient_is_the_finite_difference(mean):
    torch.manual_seed(0)
    model = randomise(BUILDERS["bert"](), seed=5).double()
    inputs = _inputs()
    weight = torch.randn(*_out(model, inputs).shape, generator=torch.Generator().manual_seed(6),
                         dtype=torch.float64)
    means = head_means(model, [inputs]).double() if mean else None

    def loss(xi):
        with gated(model, xi, means):
            return (model(**inputs).last_hidden_state * weight).sum()

    xi = _ones(model).double().requires_grad_(True)
    loss(xi).backward()
    eps = 1e-6
    for layer, head in ((0, 0), (1, 3)):
        up, down = _ones(model).double(), _ones(model).double()
        up[0, layer, head] += eps
        down[0, layer, head] -= eps
        with torch.no_grad():
            fd = (loss(up) - loss(down)) / (2 * eps)
        assert abs(fd.item()) > 1e-3
        assert xi.grad[0, layer, head].item() == pytest.approx(fd.item(), rel=1e-6)


def test_gates_of_the_wrong_shape_are_refused():
    model = BUILDERS["bert"]()
    with pytest.raises(ValueError, match=r"expected \(replicas, 2, 4\)"):
        with gated(model, torch.ones(1, 3, 4)):
            pass
