"""A causal model's heads scored over the arcs they can see: each direction counts only the arcs whose target
is on the query's left (or the query itself), the baseline is taken over the same arcs, and the reachable
shares equal a hand count; no trees are decoded from causal heads. The patterns' ``sink`` of a tiny causal
model's store is the mean attention to its first position (BOS, or the first word without one)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from families import build
from heads_store import build_store
from omegaconf import OmegaConf
from test_heads_task import Recorder
from tokenizers_synth import byte_level_bpe, grammar_sentences, metaspace, save

from probing.config import ExtractConfig, HeadsConfig, ModelConfig
from probing.corpus import Corpus, Sentence
from probing.corpus.grammar import generate_corpus
from probing.encoder import Encoder
from probing.extract import extract
from probing.results import read_table
from probing.store import AttentionStore
from probing.tasks.base import RunOutput
from probing.tasks.heads import analyse

# s1: a->b (head right), b root, c->b (left), d->c (left); s2: x root, y->x (left), z->x (left)
CORPUS = Corpus("toy", "dev", (
    Sentence("s1", ("a", "b", "c", "d"), (1, -1, 1, 2), ("det", "root", "nsubj", "obj")),
    Sentence("s2", ("x", "y", "z"), (-1, 0, 0), ("root", "det", "nsubj")),
))


def causal_store(tmp_path) -> AttentionStore:
    """The planted store (layer 0 head 0 looks at each word's gold head) marked causal in its manifest: what is
    counted depends on the arcs alone, so the planted maps need no mask."""
    build_store(tmp_path / "store", CORPUS, layers=2, heads=3)
    manifest = json.loads((tmp_path / "store" / "manifest.json").read_text())
    manifest["causal"] = True
    (tmp_path / "store" / "manifest.json").write_text(json.dumps(manifest))
    return AttentionStore(tmp_path / "store")


def test_each_direction_counts_only_the_arcs_it_can_see(tmp_path):
    store = causal_store(tmp_path)
    assert store.causal
    h = OmegaConf.structured(HeadsConfig(min_count=1, bootstrap=0, figures=False, distances=False, patterns=False,
                                         label_sets=["as_is"]))
    m = analyse(CORPUS, store, h, 0, RunOutput(tmp_path / "run", Recorder())).metrics
    heads = read_table(tmp_path / "run", "heads")
    every = heads[heads.relation == "all"]
    n = every.groupby("direction")["n"].first().to_dict()
    # dep_to_head: heads on the left, (c,b) (d,c) (y,x) (z,x); head_to_dep: heads on the right, (a,b)
    assert n == {"dep_to_head": 4, "head_to_dep": 1}
    oracle = every[(every.direction == "dep_to_head") & (every.layer == 0) & (every["head"] == 0)]
    assert float(oracle.accuracy.iloc[0]) == 1.0
    assert m["reachable_share"]["dep_to_head"] == {"det": 0.5, "nsubj": 1.0, "obj": 1.0, "root": 0.0,
                                                   "all": round(4 / 7, 4)}
    assert m["reachable_share"]["head_to_dep"]["det"] == 0.5 and m["reachable_share"]["head_to_dep"]["all"] == \
        round(1 / 7, 4)
    base = read_table(tmp_path / "run", "baselines")
    b = base[(base.relation == "all")].set_index(["direction", "offset"])["correct"]
    assert b[("head_to_dep", 1)] == 1 and b[("dep_to_head", -1)] == 3 and b[("dep_to_head", 1)] == 0
    assert not (tmp_path / "run" / "trees.csv").exists() and m["conventions"]["causal"]
    assert set(np.unique(heads.direction)) == {"dep_to_head", "head_to_dep"}


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def lm_store(request, tmp_path_factory):
    """The attention store of 16 grammar sentences from a tiny causal model: GPT-2 with a byte-level BPE (no
    special tokens) or Llama with a SentencePiece-style BPE (BOS only)."""
    family = request.param
    d = tmp_path_factory.mktemp(f"tiny_{family}")
    sentences = grammar_sentences(100)
    tok = byte_level_bpe(sentences) if family == "gpt2" else metaspace(sentences, "bpe")
    build(family, vocab=save(tok, d, "PreTrainedTokenizerFast" if family == "gpt2" else "LlamaTokenizer")
          ).save_pretrained(str(d))
    corpus = generate_corpus(16, 0)
    enc = Encoder.load(ModelConfig(name=f"tiny-{family}", name_or_path=str(d), device="cpu"))
    cfg = ExtractConfig(cache_dir=str(d / "cache"), progress=False, store_dtype="float32")
    return family, corpus, extract(enc, corpus, cfg).store


def test_sink_is_the_mean_attention_to_the_first_position(lm_store, tmp_path):
    family, corpus, store = lm_store
    bos = int(family == "llama")
    assert store.causal and (store.prefix[store.indices] == bos).all() and len(store.indices) == len(corpus)
    h = OmegaConf.structured(HeadsConfig(min_count=1, bootstrap=0, figures=False, distances=False, trees=False))
    metrics = analyse(corpus, store, h, 0, RunOutput(tmp_path / "run", Recorder())).metrics
    patterns = read_table(tmp_path / "run", "patterns").sort_values(["layer", "head"])
    # the tiny llama's 4 query heads share 2 key/value heads; gpt2 has none
    assert store.kv_heads == (2 if family == "llama" else 4)
    assert ("key_value_heads" in metrics) == (family == "llama")
    to_first = np.concatenate([store.maps(i)[:, :, bos:bos + len(corpus[i]), 0] for i in store.indices], axis=-1)
    np.testing.assert_allclose(patterns["sink"], to_first.mean(-1).ravel(), rtol=0, atol=1e-6)
    np.testing.assert_allclose(patterns["sep"], 0.0, atol=1e-7)  # nothing after the words
    if bos:
        np.testing.assert_allclose(patterns["sink"], patterns["cls"], atol=1e-7)  # the BOS is the first position
    else:
        np.testing.assert_allclose(patterns["cls"], 0.0, atol=1e-7)
        assert (patterns["sink"] > 1 / 16).all()  # the first word's row looks at itself only


def test_the_groups_of_query_heads_are_named():
    from types import SimpleNamespace

    from probing.tasks.heads import kv_groups

    store = SimpleNamespace(num_heads=9, kv_heads=3)
    assert kv_groups(store) == ("9 query heads per layer share 3 key/value heads (query head h reads key/value "
                                "head h // 3; query heads 0-2: 0, 3-5: 1, 6-8: 2): heads of a group see the same "
                                "keys and values through their own queries")
    assert kv_groups(SimpleNamespace(num_heads=12, kv_heads=12)) is None
    assert kv_groups(SimpleNamespace(num_heads=4, kv_heads=None)) is None
