"""Identities of head and residual patching on tiny random checkpoints of an encoder (BERT, post-LN), a decoder
(Llama, pre-LN, grouped key/value heads) and GPT-2 (fused query/key/value), against independent computations:
patching everything (every head of every layer at every position, and the first layer's input) is the corrupt
run; a head patched with its own clean output changes nothing; one head's patch is a re-run from the embeddings
with that head's slice replaced by a hook written here; attribution patching is exact on a model made linear."""

from __future__ import annotations

import families
import numpy as np
import pytest
import torch
from mixing_oracle import randomise

from probing.interventions.gates import LayerCache, num_heads
from probing.interventions.patches import patched
from probing.mixing import layer_parts
from probing.patching.batches import ALL, PairBatch
from probing.patching.effects import patch_metrics
from probing.patching.readouts import LogitDiff

VOCAB = 100


@pytest.fixture(scope="module", params=["bert", "llama", "gpt2"])
def model(request):
    return families.build(request.param, seed=2, vocab=VOCAB)


def _pair_batch(lengths=(7, 5, 6), cue=2, seed=5) -> PairBatch:
    """Clean ids, the corrupt side differing at piece ``cue``; read at each sentence's last piece; a random
    good and bad id per pair."""
    inputs = families.batch(lengths, VOCAB, seed=seed)
    g = torch.Generator().manual_seed(seed + 1)
    corrupt = inputs["input_ids"].clone()
    corrupt[:, cue] = (corrupt[:, cue] + torch.randint(1, VOCAB - 5, (len(lengths),), generator=g)) % (VOCAB - 5) + 5
    mask = inputs["attention_mask"]
    n = mask.sum(1)
    read = torch.nn.functional.one_hot(n - 1, mask.shape[1]).float()
    cue_mask = torch.zeros_like(mask, dtype=torch.float)
    cue_mask[:, cue] = 1
    good = torch.randint(5, VOCAB, (len(lengths),), generator=g)
    bad = (good + 7) % VOCAB
    return PairBatch(inputs, {"input_ids": corrupt, "attention_mask": mask}, {ALL: mask.float(), "cue": cue_mask},
                     read, good, bad, np.arange(len(lengths)))


def _readout(model, seed=9) -> LogitDiff:
    torch.manual_seed(seed)
    d = model.config.hidden_size if hasattr(model.config, "hidden_size") else model.config.n_embd
    return LogitDiff(torch.nn.Linear(d, VOCAB))


def test_patching_everything_is_the_corrupt_run(model):
    batch, readout = _pair_batch(), _readout(model)
    clean, corrupt = LayerCache(model, batch.clean), LayerCache(model, batch.corrupt)
    gates = torch.zeros(1, len(clean.parts), num_heads(model))
    with patched(model, corrupt.context, gates, batch.masks[ALL][None]):
        got = readout(clean.run_from(0, 1, start=corrupt.hidden[0]), batch)[0]
    want = readout(corrupt.output, batch)[0]
    assert not torch.allclose(readout(clean.output, batch)[0], want, atol=1e-3)  # the sides differ
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_a_head_patched_with_its_own_clean_output_changes_nothing(model):
    batch, readout = _pair_batch(), _readout(model)
    clean = LayerCache(model, batch.clean)
    m = patch_metrics(model, [batch], readout, [ALL, "cue"], replicas=5, attribution=False)
    assert not np.allclose(m.heads[ALL], m.clean, atol=1e-4)  # patching from the corrupt run does change it
    h = num_heads(model)
    for k in range(len(clean.parts)):
        gates = torch.ones(h, len(clean.parts), h)
        gates[torch.arange(h), k, torch.arange(h)] = 0
        with patched(model, clean.context, gates, batch.masks[ALL][None].expand(h, -1, -1)):
            got = readout(clean.run_from(k, h), batch)
        torch.testing.assert_close(got, readout(clean.output, batch)[0].expand(h, -1, -1), atol=1e-5, rtol=1e-5)


def _naive(model, batch, readout, layer, head, mask):
    """One head's slice of ``layer``'s output-projection input replaced by the corrupt run's at ``mask``, in a
    full pass from the embeddings, with hooks written here."""
    out = layer_parts(model)[layer].out
    h = num_heads(model)
    seen = {}

    def grab(module, args):
        seen["c"] = args[0].detach().clone()

    handle = out.register_forward_pre_hook(grab)
    with torch.no_grad():
        model(**batch.corrupt, use_cache=False) if hasattr(model.config, "use_cache") else model(**batch.corrupt)
    handle.remove()
    d = seen["c"].shape[-1] // h
    cols = slice(head * d, (head + 1) * d)

    def put(module, args):
        x = args[0].clone()
        x[..., cols] = torch.where(mask[..., None] > 0, seen["c"][..., cols], x[..., cols])
        return (x,) + tuple(args[1:])

    handle = out.register_forward_pre_hook(put)
    try:
        with torch.no_grad():
            hidden = model(**batch.clean).last_hidden_state
    finally:
        handle.remove()
    return readout(hidden, batch)[0]


def test_one_head_patch_equals_a_rerun_with_its_slice_replaced_by_hand(model):
    batch, readout = _pair_batch(), _readout(model)
    m = patch_metrics(model, [batch], readout, [ALL, "cue"], replicas=3, residual=False, attribution=False)
    n_layers, h = len(layer_parts(model)), num_heads(model)
    for layer, head in [(0, 1), (n_layers - 1, h - 1)]:
        for name in (ALL, "cue"):
            want = _naive(model, batch, readout, layer, head, batch.masks[name]).numpy()
            np.testing.assert_allclose(m.heads[name][layer, head], want, atol=1e-5, rtol=1e-5)


def test_the_residual_patch_at_all_positions_of_the_first_layer_is_the_corrupt_run(model):
    batch, readout = _pair_batch(), _readout(model)
    m = patch_metrics(model, [batch], readout, [ALL, "cue"], replicas=4, attribution=False)
    np.testing.assert_allclose(m.residual[ALL][0], m.corrupt, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(m.residual["cue"][0], m.corrupt, atol=1e-5, rtol=1e-5)  # only the cue differs


def _linear_bert():
    """One BERT layer with every LayerNorm an identity and a linear feed-forward activation: the readout is then
    linear in the layer's context vectors."""
    import transformers as T

    cfg = T.BertConfig(**{**families.SMALL, "num_hidden_layers": 1}, vocab_size=VOCAB, hidden_act="linear")
    torch.manual_seed(3)
    model = randomise(T.BertModel(cfg, add_pooling_layer=False), seed=3).eval()
    model.config._attn_implementation = "eager"
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, torch.nn.LayerNorm):
                setattr(module, child_name, torch.nn.Identity())
    return model


def test_attribution_is_the_exact_effect_on_a_model_made_linear():
    model = _linear_bert()
    batch, readout = _pair_batch(), _readout(model)
    batch.masks["read"] = batch.read  # with one layer only the read piece's own patch reaches the readout
    m = patch_metrics(model, [batch], readout, [ALL, "read"], replicas=4, residual=False)
    for name in (ALL, "read"):
        exact = m.heads[name] - m.clean
        assert np.abs(exact).max() > 1e-3
        np.testing.assert_allclose(m.attribution[name], exact, atol=1e-4, rtol=1e-4)


def _frozen_rerun(model, batch, readout, layer, head, mask):
    """The direct path by hand on a pre-LN Llama: the head's slice patched as in :func:`_naive`, and every block
    after it (layer ``layer``'s MLP, every later layer's attention and MLP) returning its clean output."""
    layers = model.layers
    clean_out = {}

    def keep(name):
        def hook(module, args, output):
            clean_out[name] = output
        return hook

    handles = [layers[j].self_attn.register_forward_hook(keep(("attn", j))) for j in range(len(layers))]
    handles += [layers[j].mlp.register_forward_hook(keep(("mlp", j))) for j in range(len(layers))]
    with torch.no_grad():
        model(**batch.clean, use_cache=False)
    for hd in handles:
        hd.remove()

    def frozen(name):
        return lambda module, args, output: clean_out[name]

    handles = [layers[j].self_attn.register_forward_hook(frozen(("attn", j))) for j in range(layer + 1, len(layers))]
    handles += [layers[j].mlp.register_forward_hook(frozen(("mlp", j))) for j in range(layer, len(layers))]
    try:
        return _naive(model, batch, readout, layer, head, mask)
    finally:
        for hd in handles:
            hd.remove()


def test_the_direct_path_freezes_every_later_block():
    from probing.patching.paths import direct_metrics

    model = families.build("llama", seed=2, vocab=VOCAB)
    batch, readout = _pair_batch(), _readout(model)
    n_layers = len(layer_parts(model))
    heads = [(0, 1), (n_layers - 1, 2)]
    got = direct_metrics(model, [batch], readout, heads, "cue")
    for (layer, head), row in zip(heads, got):
        want = _frozen_rerun(model, batch, readout, layer, head, batch.masks["cue"]).numpy()
        np.testing.assert_allclose(row, want, atol=1e-5, rtol=1e-5)
    total = patch_metrics(model, [batch], readout, ["cue"], replicas=4, residual=False, attribution=False)
    np.testing.assert_allclose(got[1], total.heads["cue"][n_layers - 1, 2], atol=1e-5)  # last layer: all is direct
    assert not np.allclose(got[0], total.heads["cue"][0, 1], atol=1e-4)  # the first layer's is not


def test_a_post_ln_direct_path_passes_each_norm_at_its_clean_statistics():
    """One BERT layer by hand: the head's output change through LN1 and LN2 linearised at their clean inputs
    (the feed-forward block frozen), added to the clean output."""
    import transformers as T

    from probing.patching.paths import direct_metrics

    cfg = T.BertConfig(**{**families.SMALL, "num_hidden_layers": 1}, vocab_size=VOCAB)
    torch.manual_seed(5)
    model = randomise(T.BertModel(cfg, add_pooling_layer=False), seed=5).eval()
    batch, readout = _pair_batch(), _readout(model)
    layer = model.encoder.layer[0]
    ln1, ln2, dense = layer.attention.output.LayerNorm, layer.output.LayerNorm, layer.attention.output.dense
    seen = {}
    hooks = [m.register_forward_pre_hook(lambda mod, args, k=k: seen.__setitem__(k, args[0]))
             for k, m in (("c", dense), ("x1", ln1), ("x2", ln2))]
    with torch.no_grad():
        out = model(**batch.clean).last_hidden_state
        c = seen["c"].clone()
        model(**batch.corrupt)
        src = seen["c"]
        model(**batch.clean)
    for hd in hooks:
        hd.remove()
    head, w = 2, c.shape[-1] // 4
    patched = c.clone()
    m = batch.masks[ALL][..., None]  # one layer: only the read piece's own change reaches the readout
    patched[..., head * w:(head + 1) * w] += m * (src - c)[..., head * w:(head + 1) * w]
    delta = (dense(patched) - dense(c)).detach()
    for ln, x in ((ln1, seen["x1"]), (ln2, seen["x2"])):
        sd = torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + ln.eps)
        delta = ln.weight * (delta - delta.mean(-1, keepdim=True)) / sd
    want = readout(out + delta, batch)[0].detach().numpy()
    got = direct_metrics(model, [batch], readout, [(0, head)], ALL)[0]
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)
    assert not np.allclose(got, readout(out, batch)[0].detach().numpy(), atol=1e-4)
