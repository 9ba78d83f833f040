"""Synthetic treebanks and attention stores for the probe tests (no model).

Layer 0, head 0 plants the arcs: each word's row puts ``strength`` on its gold head ([CLS] for the root).
Layer 1, head k plants the relations: a dependent whose relation is ``LABELS[k]`` puts ``strength`` on its
head in head k. Every other head (layer 0 heads 1..3, and layer 1 head k for the other arcs) is random.
Rows are Dirichlet noise scaled to the remaining mass, so every row sums to 1.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from probing.config import LinearFit, ProbeConfig
from probing.corpus import Corpus, Sentence
from probing.probes.data import ProbeSplit
from probing.store import AttentionStore, write_manifest
from probing.store.shards import ShardWriter

LABELS = ("nsubj", "obj", "det", "amod")
LABEL_P = (0.55, 0.25, 0.12, 0.08)
VOCAB = tuple(f"w{i}" for i in range(25)) + (".",)


def tree_corpus(n_sentences: int, seed: int) -> Corpus:
    """Random trees: word 0 is the root; word i>0 attaches to a random earlier word; the last word is '.'."""
    rng = np.random.default_rng(seed)
    sents = []
    for s in range(n_sentences):
        n = int(rng.integers(3, 10))
        heads = [-1] + [int(rng.integers(0, i)) for i in range(1, n)]
        words = [VOCAB[int(rng.integers(0, len(VOCAB) - 1))] for _ in range(n - 1)] + ["."]
        rels = ["root"] + [str(rng.choice(LABELS, p=LABEL_P)) for _ in range(1, n - 1)] + ["punct"]
        upos = ["NOUN"] * (n - 1) + ["PUNCT"]
        sents.append(Sentence(f"s{s}", tuple(words), tuple(heads), tuple(rels), tuple(upos)))
    return Corpus("synth", "all", tuple(sents))


def write_store(corpus: Corpus, directory: Path, seed: int = 0, strength: float = 0.8,
                plant: bool = True, dtype: str = "float32", shard_mb: int = 0, causal: bool = False
                ) -> AttentionStore:
    """A store of (2 layers, 4 heads) maps with [CLS] + words + [SEP] (float32 unless ``dtype``; one shard
    per sentence unless ``shard_mb``); ``causal``: each row keeps only the positions up to its own,
    renormalised, and the manifest says ``causal``."""
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    w = ShardWriter(directory, dtype, shard_mb=shard_mb)
    for i, s in enumerate(corpus):
        n = len(s)
        m = n + 2
        maps = rng.dirichlet(np.ones(m), size=(2, 4, m)).astype(np.float64)
        if plant:
            for d in range(n):
                target = 0 if s.heads[d] < 0 else 1 + s.heads[d]
                rows = [(0, 0)]
                if s.relations[d] in LABELS:
                    rows.append((1, LABELS.index(s.relations[d])))
                for layer, head in rows:
                    row = rng.dirichlet(np.ones(m)) * (1 - strength)
                    row[target] += strength
                    maps[layer, head, 1 + d] = row
        if causal:
            maps = np.tril(maps)
            maps /= maps.sum(-1, keepdims=True)
        w.add(i, maps.astype(np.float32), n_words=n, prefix=1)
    w.flush()
    write_manifest(directory, {"key": "synth", "num_layers": 2, "num_heads": 4, "n_sentences": len(corpus),
                               "store_dtype": dtype, "causal": causal})
    return AttentionStore(directory)


def splits(corpus: Corpus, store: AttentionStore, train_share: float = 0.8) -> tuple[ProbeSplit, ProbeSplit]:
    idx = store.indices
    cut = int(len(idx) * train_share)
    return (ProbeSplit("train", corpus, store, idx[:cut]), ProbeSplit("eval", corpus, store, idx[cut:]))


def probe_cfg(**kw) -> ProbeConfig:
    kw.setdefault("linear", LinearFit())
    return ProbeConfig(**kw)
