"""A tiny synthetic attention store with planted heads whose answers are known, for the analysis tests.

Layer 0 head 0 ("oracle"): every word puts most of its attention on its gold head (dep_to_head = 1.0 on
non-root words). Layer 0 head 1 ("oracle^T"): every head word spreads its attention over its dependents
(head_to_dep = 1.0). Layer 1 head 0 ("previous"): every word looks at the word before it (equals the -1
offset baseline). The rest is small noise. Positions: [CLS] w1..wn [SEP].
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from probing.corpus import Corpus, Sentence
from probing.store import AttentionStore, write_manifest
from probing.store.shards import ShardWriter

RELS = ["det", "nsubj", "obj", "nmod", "nmod:poss", "punct"]


def random_tree(n: int, rng: np.random.Generator) -> np.ndarray:
    """Heads of a random tree over n words (each word hangs from an earlier one or the root word)."""
    order = rng.permutation(n)
    heads = np.full(n, -1)
    for k in range(1, n):
        heads[order[k]] = order[rng.integers(0, k)]
    return heads


def synthetic_corpus(n_sentences: int = 30, seed: int = 0, min_len: int = 3, max_len: int = 9) -> Corpus:
    rng = np.random.default_rng(seed)
    sents = []
    for s in range(n_sentences):
        n = int(rng.integers(min_len, max_len + 1))
        heads = random_tree(n, rng)
        rels = tuple("root" if h < 0 else RELS[int(rng.integers(len(RELS)))] for h in heads)
        upos = tuple("PUNCT" if r == "punct" else "NOUN" for r in rels)
        sents.append(Sentence(f"s{s}", tuple(f"w{i}" for i in range(n)), tuple(int(h) for h in heads), rels, upos))
    return Corpus("synthetic", "dev", tuple(sents))


def planted_maps(sentence: Sentence, layers: int, heads: int, rng: np.random.Generator) -> np.ndarray:
    """``(L, H, n+2, n+2)`` rows summing to 1, with the planted heads described in the module docstring."""
    n = len(sentence)
    m = n + 2
    a = rng.uniform(0, 0.05, size=(layers, heads, m, m)) / m
    gold = np.asarray(sentence.heads)
    for d in range(n):
        # rows without a planted target dump their mass on [CLS]/[SEP] so the noise stays small
        a[0, 0, 1 + d, 1 + gold[d] if gold[d] >= 0 else 0] = 0.7
        deps = np.flatnonzero(gold == d)
        if len(deps):
            a[0, 1, 1 + d, 1 + deps] = 0.6 / len(deps)
        else:
            a[0, 1, 1 + d, m - 1] = 0.6
        a[1, 0, 1 + d, d] = 0.8  # the position before: [CLS] for the first word
    # the first word sees only [CLS]: over words its row is all zero, so it picks itself (never correct),
    # exactly like the -1 offset, which falls outside the sentence
    a[1, 0, 1, :] = 0.0
    a[1, 0, 1, 0] = 1.0
    return a / a.sum(axis=-1, keepdims=True)


def build_store(directory: Path, corpus: Corpus, layers: int = 2, heads: int = 3, dtype: str = "float32",
                seed: int = 0) -> AttentionStore:
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    w = ShardWriter(directory, dtype, shard_mb=0)  # one shard per sentence: exercises shard switching
    for i, s in enumerate(corpus):
        w.add(i, planted_maps(s, layers, heads, rng), len(s), 1)
    w.flush()
    write_manifest(directory, {
        "key": "synthetic", "inputs": {"pooling": "mean_sum"}, "model_name": "planted",
        "corpus_name": corpus.name, "split": corpus.split, "n_sentences": len(corpus), "num_layers": layers,
        "num_heads": heads, "store_dtype": dtype, "special_tokens": ["[CLS]", "[SEP]"], "skipped": []})
    return AttentionStore(directory)
