"""The attention store and extraction with a tiny random BERT: round trip, fingerprints, resume, concurrency,
batching, and an oracle recomputation of one layer's attention from its weights."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from probing.config import ExtractConfig
from probing.corpus import Corpus, Sentence
from probing.extract import extract
from probing.io import write_json
from probing.store import AttentionStore, write_manifest
from probing.store.shards import ShardWriter

TEXTS = [
    "the cat sat on the mat .", "i am going to deposit my money at the bank .", "the dog saw a big red house",
    "unbelievably happy", "the cat", "a dog saw the cat on the mat , running happily", "my money", "the bank",
    "i saw the big red dog", "the mat sat on the cat .", "going to the bank", "happy cat",
]


def corpus(texts=TEXTS, name="tiny") -> Corpus:
    return Corpus(name, "x", tuple(Sentence(f"s{i}", tuple(t.split())) for i, t in enumerate(texts)))


def cfg(tmp_path, **kw) -> ExtractConfig:
    base = ExtractConfig(cache_dir=str(tmp_path / "cache"), progress=False, store_dtype="float32", batch_size=4)
    return replace(base, **kw)


def test_fixture_tokenizer_has_no_unk(tiny_encoder):
    enc = tiny_encoder.tokenizer(TEXTS[5].split(), is_split_into_words=True)
    assert tiny_encoder.tokenizer.unk_token_id not in enc["input_ids"]
    pieces = tiny_encoder.tokenizer.convert_ids_to_tokens(enc["input_ids"])
    assert "##ning" in pieces and "##ily" in pieces


def test_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    arrays = {i: rng.random((2, 3, m, m), dtype=np.float32) for i, m in [(0, 4), (1, 7), (3, 5)]}
    w = ShardWriter(tmp_path, "float32", shard_mb=0)  # every sentence its own shard
    for i, a in arrays.items():
        w.add(i, a, n_words=a.shape[-1] - 2, prefix=1)
    w.flush()
    write_manifest(tmp_path, {"key": "k", "num_layers": 2, "num_heads": 3, "n_sentences": 4,
                              "store_dtype": "float32"})
    store = AttentionStore(tmp_path)
    assert list(store.indices) == [0, 1, 3] and 2 not in store and len(store) == 3
    for i, a in arrays.items():
        np.testing.assert_array_equal(store.maps(i), a)
        np.testing.assert_array_equal(store.words(i), a[..., 1:-1, 1:-1])
        np.testing.assert_array_equal(store.words(i, 1, 2), a[1, 2, 1:-1, 1:-1])
        np.testing.assert_array_equal(store.words(i, head=0), a[:, 0, 1:-1, 1:-1])
    with pytest.raises(KeyError, match="sentence 2 has no maps"):
        store.maps(2)
    assert [i for i, _ in store.iter_maps()] == [0, 1, 3]


def test_extract_rows_sum_to_one_and_reuse(tiny_encoder, tmp_path):
    c = corpus()
    r1 = extract(tiny_encoder, c, cfg(tmp_path))
    assert not r1.reused and r1.extracted == len(c) and len(r1.store) == len(c)
    for i in r1.store.indices:
        maps = r1.store.maps(i)
        assert maps.shape == (2, 4, len(c[i]) + 2, len(c[i]) + 2)
        np.testing.assert_allclose(maps.sum(-1), 1.0, atol=1e-5)
    r2 = extract(tiny_encoder, c, cfg(tmp_path))
    assert r2.reused and r2.store.dir == r1.store.dir


def test_fingerprint_changes_with_inputs(tiny_encoder, tmp_path):
    base = extract(tiny_encoder, corpus(), cfg(tmp_path)).store.dir
    assert extract(tiny_encoder, corpus(), cfg(tmp_path, pooling="first")).store.dir != base
    assert extract(tiny_encoder, corpus(TEXTS[:-1]), cfg(tmp_path)).store.dir != base
    changed = list(TEXTS)
    changed[3] = "unbelievably sad"
    assert extract(tiny_encoder, corpus(changed), cfg(tmp_path)).store.dir != base
    # batch size is not part of the key
    assert extract(tiny_encoder, corpus(), cfg(tmp_path, batch_size=1)).store.dir == base


def test_batched_equals_one_at_a_time(tiny_encoder, tmp_path):
    a = extract(tiny_encoder, corpus(), cfg(tmp_path / "a", batch_size=8)).store
    b = extract(tiny_encoder, corpus(), cfg(tmp_path / "b", batch_size=1)).store
    for i in a.indices:
        np.testing.assert_allclose(a.maps(i), b.maps(i), atol=1e-5)


def test_too_long_sentence_is_skipped_and_counted(tiny_encoder, tmp_path):
    r = extract(tiny_encoder, corpus(), cfg(tmp_path, max_length=8))
    long_ones = [i for i, t in enumerate(TEXTS) if len(tiny_encoder.tokenize([t.split()])[0].input_ids) > 8]
    assert long_ones and sorted(s["index"] for s in r.store.skipped) == long_ones
    assert all("too long" in s["reason"] for s in r.store.skipped)
    assert len(r.store) == len(TEXTS) - len(long_ones)


def test_resume_after_crash(tiny_encoder, tmp_path, monkeypatch):
    c = corpus()
    clean = extract(tiny_encoder, c, cfg(tmp_path / "clean")).store
    undo = crash_at(monkeypatch, 3)
    c_cfg = cfg(tmp_path / "crash", shard_mb=0)
    with pytest.raises(KeyboardInterrupt):
        extract(tiny_encoder, c, c_cfg)
    directory = next((tmp_path / "crash" / "cache").glob("tiny-*[!k]"))
    assert not (directory / "manifest.json").exists()
    with pytest.raises(FileNotFoundError, match="not a complete attention store"):
        AttentionStore(directory)
    # a torn shard: data shorter than its index says; and a stray temporary file
    (directory / "shard-00099.bin").write_bytes(b"\0" * 8)
    write_json(directory / "shard-00099.json", {"shard": 99, "elements": 1000, "bytes": 4000, "xxh3_64": "0",
                                                "sentences": [{"index": 0, "offset": 0, "m": 3, "n_words": 1,
                                                               "prefix": 1}]})
    (directory / ".shard-00100.bin.1.tmp").write_bytes(b"junk")
    undo()
    r = extract(tiny_encoder, c, c_cfg)
    assert r.resumed_from == 8 and r.extracted == len(c) - 8
    for i in clean.indices:
        np.testing.assert_allclose(r.store.maps(i), clean.maps(i), atol=1e-6)


def crash_at(monkeypatch, batch: int):
    """Extraction's ``batch``-th batch raises KeyboardInterrupt (a process killed mid-way); returns the undo."""
    import probing.extract as ex

    real, calls = ex.batch_maps, {"n": 0}

    def crashing(*args, **kw):
        calls["n"] += 1
        if calls["n"] == batch:
            raise KeyboardInterrupt("killed mid-way")
        return real(*args, **kw)

    monkeypatch.setattr(ex, "batch_maps", crashing)
    return lambda: monkeypatch.setattr(ex, "batch_maps", real)


CONCURRENT = """
import json, sys
from dataclasses import replace
sys.path.insert(0, {tests!r})
from probing.config import ModelConfig
from probing.encoder import Encoder
from probing.extract import extract
from test_store_extract import corpus, cfg
from pathlib import Path
enc = Encoder.load(ModelConfig(name="tiny", name_or_path={model!r}))
r = extract(enc, corpus(), replace(cfg(Path({tmp!r})), shard_mb=0))
print(json.dumps({{"reused": r.reused, "dir": str(r.store.dir), "n": len(r.store)}}))
"""


def test_two_concurrent_writers_build_once(tiny_model_dir, tmp_path):
    code = CONCURRENT.format(tests=str(Path(__file__).parent), model=str(tiny_model_dir), tmp=str(tmp_path))
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        outs.append(json.loads(out.strip().splitlines()[-1]))
    assert sorted(o["reused"] for o in outs) == [False, True]
    assert outs[0]["dir"] == outs[1]["dir"] and outs[0]["n"] == len(TEXTS)


def test_oracle_layer0_attention_from_weights(tiny_encoder):
    """Recompute softmax(QK^T / sqrt(d)) of layer 0 from the embeddings and weights."""
    model = tiny_encoder.model
    tok = tiny_encoder.tokenize([TEXTS[1].split()])[0]
    attn, _, _ = tiny_encoder.attention([tok])
    ids = torch.tensor([tok.input_ids])
    with torch.no_grad():
        h = model.embeddings(input_ids=ids)
        sa = model.encoder.layer[0].attention.self
        n_heads = model.config.num_attention_heads
        d = model.config.hidden_size // n_heads
        q = sa.query(h).view(1, -1, n_heads, d).transpose(1, 2)
        k = sa.key(h).view(1, -1, n_heads, d).transpose(1, 2)
        expected = torch.softmax(q @ k.transpose(-1, -2) / d**0.5, dim=-1)
    torch.testing.assert_close(attn[0, 0], expected[0], atol=1e-5, rtol=1e-4)
