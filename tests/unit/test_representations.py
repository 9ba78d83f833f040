"""Representations in the store: hidden states and head context vectors pooled to words, stored
beside the maps from the same pass, keyed apart, resumable; and the random-init model as its own identity."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from representations_oracle import check_heads_identity
from test_store_extract import TEXTS, cfg, corpus

from probing.alignment import pool_layers
from probing.config import Measure, ModelConfig, Pooling, Representation
from probing.encoder import Encoder, model_identity
from probing.errors import StoreError
from probing.extract import extract, store_dir, store_key
from probing.store import AttentionStore, VectorStore

REPS = [Representation.hidden, Representation.heads]
SPLIT = 5  # "a dog saw the cat on the mat , running happily": two words of two pieces


def test_pool_layers_hand_worked():
    # [CLS] w0 w1a w1b w2 [SEP] pad: positions 0 1 2 2 3 4 -1
    x = torch.arange(7, dtype=torch.float32).view(1, 7, 1) * torch.tensor([1.0, 10.0])  # (1, T=7, D=2)
    pos = torch.tensor([[0, 1, 2, 2, 3, 4, -1]])
    mean = pool_layers([x], pos, 5, Pooling.mean_sum, torch.float32)[:, 0]
    first = pool_layers([x], pos, 5, Pooling.first, torch.float32)[:, 0]
    np.testing.assert_allclose(mean[0, :, 0], [0, 1, 2.5, 4, 5])
    np.testing.assert_allclose(first[0, :, 0], [0, 1, 2, 4, 5])
    np.testing.assert_allclose(mean[0, :, 1], [0, 10, 25, 40, 50])
    # one output per layer, heads split off the width: 3 layers of (B, T, 2 heads x 4) -> (B, 3, 2, M, 4)
    assert pool_layers([torch.zeros(1, 7, 8)] * 3, pos, 5, Pooling.first, torch.float32, 2).shape == (1, 3, 2, 5, 4)


def test_pool_layers_splits_heads_and_matches_a_loop():
    """Per-layer pooling straight into the store dtype, heads split off the width: against a loop over
    positions in numpy (batch of two, padding, a three-piece word, a second sentence one position short)."""
    pos = torch.tensor([[0, 1, 1, 1, 2, 3], [0, 1, 2, -1, -1, -1]])
    layers = [torch.randn(2, 6, 6) for _ in range(3)]  # 3 layers, width 6 = 2 heads x 3
    for pooling in (Pooling.mean_sum, Pooling.first):
        out = pool_layers(layers, pos, 4, pooling, torch.float16, heads=2)
        assert out.shape == (2, 3, 2, 4, 3) and out.dtype == torch.float16
        for b in range(2):
            for k, x in enumerate(layers):
                for p in range(4):
                    pieces = np.flatnonzero(pos[b].numpy() == p)
                    want = np.zeros(6) if not len(pieces) else (
                        x[b, pieces].numpy().mean(0) if pooling is Pooling.mean_sum else x[b, pieces[0]].numpy())
                    np.testing.assert_allclose(out[b, k, :, p].float().numpy(), want.reshape(2, 3), atol=2e-3)
    assert pool_layers(layers, pos, 4, Pooling.mean_sum, torch.float32).shape == (2, 3, 4, 6)


def test_keys_dirs_and_the_attention_store_unchanged(tiny_encoder, tmp_path):
    c, conf = corpus(), cfg(tmp_path)
    att_key, _ = store_key(tiny_encoder.identity, c, conf, Measure.attention)
    key, inputs = store_key(tiny_encoder.identity, c, cfg(tmp_path, representations=REPS), Representation.hidden)
    heads_key, _ = store_key(tiny_encoder.identity, c, conf, Representation.heads)
    assert inputs["representation"] == "hidden" and "measure" not in inputs
    assert len({att_key, key, heads_key}) == 3
    # asking for representations does not move the attention store
    assert store_key(tiny_encoder.identity, c, cfg(tmp_path, representations=REPS), Measure.attention)[0] == att_key
    assert store_dir("tiny", c, conf, key, Representation.hidden).name == f"tiny-tiny-x-hidden-{key}"


def test_one_pass_stores_word_vectors(tiny_encoder, tmp_path):
    c = corpus()
    alone = extract(tiny_encoder, c, cfg(tmp_path / "alone"))
    r = extract(tiny_encoder, c, cfg(tmp_path / "all", representations=REPS))
    assert list(r.stores) == [Measure.attention, *REPS]
    hid, heads = r.stores[Representation.hidden], r.stores[Representation.heads]
    assert isinstance(hid, VectorStore) and hid.representation == "hidden" and not hid.per_head
    assert (hid.num_layers, hid.num_heads, hid.dim) == (3, 1, 32)
    assert (heads.num_layers, heads.num_heads, heads.dim, heads.per_head) == (2, 4, 8, True)
    for i in alone.store.indices:  # the maps are those of an attention-only extraction
        np.testing.assert_array_equal(r.store.maps(i), alone.store.maps(i))
    n = len(c[SPLIT])
    assert hid.vectors(SPLIT).shape == (3, n + 2, 32) and hid.words(SPLIT).shape == (3, n, 32)
    assert heads.vectors(SPLIT).shape == (2, 4, n + 2, 8) and heads.words(SPLIT).shape == (2, 4, n, 8)
    assert heads.words(SPLIT, layer=1).shape == (4, n, 8) and heads.words(SPLIT, 1, 3).shape == (n, 8)
    assert heads.words(SPLIT, head=2).shape == (2, n, 8)
    np.testing.assert_array_equal(heads.words(SPLIT, 1, 3), heads.vectors(SPLIT)[1, 3, 1:-1])
    assert hid.words(SPLIT).dtype == np.float32 and hid.words(SPLIT, dtype=None).dtype == np.float32
    with pytest.raises(ValueError, match="hidden has no heads"):
        hid.words(SPLIT, 0, 0)
    with pytest.raises(StoreError, match="not an attention store .it holds hidden vectors"):
        AttentionStore(hid.dir)
    with pytest.raises(StoreError, match="not a representation store"):
        VectorStore(r.store.dir)
    again = extract(tiny_encoder, c, cfg(tmp_path / "all", representations=REPS), reads=Representation.heads)
    assert again.reused and again.store.dir == heads.dir


def _independent_hidden(model_dir, encoder, words):
    """Every layer's hidden states of the full model, loaded afresh (no skipped block), pooled by hand."""
    from transformers import BertModel

    model = BertModel.from_pretrained(str(model_dir), attn_implementation="eager").eval()
    tok = encoder.tokenize([words])[0]
    with torch.no_grad():
        out = model(input_ids=torch.tensor([tok.input_ids]), output_hidden_states=True)
    states = torch.stack(out.hidden_states, 1)[0]  # (L+1, T, D)
    assert torch.equal(states[-1], out.last_hidden_state[0])
    pos = np.asarray(tok.piece_position)
    return np.stack([states[:, pos == p].mean(1).numpy() for p in range(tok.n_positions)], 1)  # (L+1, M, D)


def test_hidden_is_the_full_models_and_last_ffn_is_computed(tiny_model_dir, tiny_encoder, tmp_path):
    """extract.skip_last_ffn=true (the default) still stores the last layer's output after its FFN; and an
    attention-only extraction after it skips the block again (its maps are the same either way)."""
    c = corpus()
    r = extract(tiny_encoder, c, cfg(tmp_path, representations=[Representation.hidden], skip_last_ffn=True))
    expected = _independent_hidden(tiny_model_dir, tiny_encoder, c[SPLIT].words)
    np.testing.assert_allclose(r.stores[Representation.hidden].vectors(SPLIT), expected, atol=2e-5, rtol=1e-5)
    assert not tiny_encoder._ffn_skipped
    extract(tiny_encoder, corpus(TEXTS[:3]), cfg(tmp_path))
    assert tiny_encoder._ffn_skipped


def test_first_pooling_takes_the_first_piece(tiny_model_dir, tiny_encoder, tmp_path):
    c = corpus()
    r = extract(tiny_encoder, c, cfg(tmp_path, representations=[Representation.hidden], pooling="first"))
    tok = tiny_encoder.tokenize([c[SPLIT].words])[0]
    _, _, _, states = tiny_encoder.forward([tok], hidden=True)
    pos = np.asarray(tok.piece_position)
    firsts = [int(np.flatnonzero(pos == p)[0]) for p in range(tok.n_positions)]
    assert len(set(firsts)) < len(pos)
    pieces = torch.stack(states, 1)[0]  # (L+1, T, D): forward hands out one tensor per layer
    np.testing.assert_allclose(r.stores[Representation.hidden].vectors(SPLIT), pieces[:, firsts].numpy(),
                               atol=1e-6)


def test_head_context_vectors_times_w_o_are_the_attention_output(tiny_encoder, tmp_path):
    """Σ_h W_O^h z^h + b_O of the stored word vectors equals the attention block's projection output
    (captured by a hook on the dense layer), pooled the same way: the store holds what each head writes."""
    c = corpus()
    r = extract(tiny_encoder, c, cfg(tmp_path, representations=[Representation.heads]))
    check_heads_identity(tiny_encoder, r.stores[Representation.heads], c, [SPLIT, 1])


def test_resume_and_extend_vector_stores(tiny_encoder, tmp_path, monkeypatch):
    import probing.extract as ex

    c = corpus()
    clean = extract(tiny_encoder, c, cfg(tmp_path / "clean", representations=REPS))
    real, asked = ex.batch_maps, []

    def crashing(encoder, batch, pooling, measures, *args):
        asked.append(list(measures))
        if len(asked) == 2:
            raise KeyboardInterrupt("simulated crash")
        return real(encoder, batch, pooling, measures, *args)

    extract(tiny_encoder, c, cfg(tmp_path / "crash", shard_mb=0))  # attention first; the vectors join it
    monkeypatch.setattr(ex, "batch_maps", crashing)
    conf = cfg(tmp_path / "crash", shard_mb=0, representations=REPS)
    with pytest.raises(KeyboardInterrupt):
        extract(tiny_encoder, c, conf)
    asked.clear()
    monkeypatch.setattr(ex, "batch_maps", lambda *a: asked.append(list(a[3])) or real(*a))
    r = extract(tiny_encoder, c, conf)
    assert r.resumed_from == 4 and r.extracted == len(c) - 4
    assert asked and all(a == REPS for a in asked)  # the attention store was not extracted again
    for rep in REPS:
        for i in clean.store.indices:
            np.testing.assert_allclose(r.stores[rep].vectors(i), clean.stores[rep].vectors(i), atol=1e-6)


def test_float16_on_disk_and_a_damaged_shard_is_refused(tiny_encoder, tmp_path):
    r = extract(tiny_encoder, corpus(), cfg(tmp_path, representations=REPS, store_dtype="float16", shard_mb=0))
    heads = r.stores[Representation.heads]
    m = int(heads.m[SPLIT])
    assert (heads.dir / f"shard-{int(heads.shard[SPLIT]):05d}.bin").stat().st_size == 2 * 4 * m * 8 * 2
    assert heads.vectors(SPLIT).dtype == np.float16 and heads.words(SPLIT).dtype == np.float32
    path = heads.dir / "shard-00000.bin"
    data = bytearray(path.read_bytes())
    data[0] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError, match=r"shard-00000\.bin does not match its checksum"):
        VectorStore(heads.dir).vectors(int(np.flatnonzero(heads.shard == 0)[0]))


def test_random_init_is_seeded_and_its_own_identity(tiny_model_dir):
    path = str(tiny_model_dir)
    trained = ModelConfig(name="tiny", name_or_path=path)
    rand = ModelConfig(name="tiny", name_or_path=path, random_init=True, init_seed=3)
    ids = [model_identity(x) for x in (trained, rand, ModelConfig(name="tiny", name_or_path=path,
                                                                   random_init=True, init_seed=4))]
    assert "random_init" not in ids[0] and ids[1]["random_init"] == {"seed": 3}
    assert len({str(x) for x in ids}) == 3
    before = torch.random.get_rng_state()
    a, b = Encoder.load(rand), Encoder.load(rand)
    assert torch.equal(torch.random.get_rng_state(), before)  # the caller's generator is left alone
    other, real = Encoder.load(ModelConfig(name="tiny", name_or_path=path, random_init=True, init_seed=4)), \
        Encoder.load(trained)
    w = [e.model.encoder.layer[0].attention.self.query.weight for e in (a, b, other, real)]
    assert torch.equal(w[0], w[1]) and not torch.equal(w[0], w[2]) and not torch.equal(w[0], w[3])
    assert a.name == "tiny-random3" and a.model.config._attn_implementation == "eager"
