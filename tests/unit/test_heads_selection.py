"""Held-out selection of the best head: on a planted store where the in-sample best head is noise (right on
every arc of half the sentences, wrong on the others), cross-fitting chooses it on one half and finds it wrong
on the other; a head that is right everywhere keeps its accuracy held out; a second split can choose instead."""

from __future__ import annotations

import numpy as np
from omegaconf import OmegaConf
from test_heads_task import Recorder

from probing.config import HeadsConfig
from probing.corpus import Corpus, Sentence
from probing.results import read_table
from probing.store import AttentionStore, write_manifest
from probing.store.shards import ShardWriter
from probing.tasks.base import RunOutput
from probing.tasks.heads import analyse


def corpus(n_sentences: int = 40, n: int = 5) -> Corpus:
    """Chains: word w hangs from word w - 1, word 0 is the root; every arc is ``det``."""
    heads = tuple([-1] + list(range(n - 1)))
    rels = ("root",) + ("det",) * (n - 1)
    return Corpus("planted", "dev", tuple(Sentence(f"s{i}", tuple(f"w{k}" for k in range(n)), heads, rels)
                                          for i in range(n_sentences)))


def store(tmp_path, c: Corpus, right) -> AttentionStore:
    """One layer of three heads; ``right(head, sentence)`` says whether that head looks at each word's gold head
    in that sentence (else at the word after it, never the gold head of a chain)."""
    d = tmp_path / "store"
    d.mkdir(parents=True, exist_ok=True)
    w = ShardWriter(d, "float32", shard_mb=0)
    for i, s in enumerate(c):
        m = len(s) + 2
        a = np.full((1, 3, m, m), 0.01, dtype=np.float32)
        for h in range(3):
            for k, g in enumerate(s.heads):
                target = g if right(h, i) and g >= 0 else (k + 1) % len(s)
                a[0, h, 1 + k, 1 + target] = 1.0
        w.add(i, a / a.sum(-1, keepdims=True), len(s), 1)
    w.flush()
    write_manifest(d, {"key": "planted", "inputs": {"pooling": "mean_sum"}, "model_name": "planted",
                       "corpus_name": c.name, "split": c.split, "n_sentences": len(c), "num_layers": 1,
                       "num_heads": 3, "store_dtype": "float32", "special_tokens": ["[CLS]", "[SEP]"],
                       "skipped": []})
    return AttentionStore(d)


def run(tmp_path, c, st, select=None):
    h = OmegaConf.structured(HeadsConfig(min_count=1, bootstrap=50, figures=False, distances=False,
                                         patterns=False, trees=False, label_sets=["as_is"],
                                         directions=["dep_to_head"]))
    m = analyse(c, st, h, 0, RunOutput(tmp_path / "run", Recorder()), select).metrics
    best = read_table(tmp_path / "run", "best_heads").set_index("relation")
    return m, best.loc["det"]


def test_a_noise_head_that_wins_in_sample_loses_held_out(tmp_path):
    c = corpus()
    # head 0 right on the even sentences (the first cross-fitting half), head 1 on the odd ones, head 2 on none
    det = run(tmp_path, c, store(tmp_path, c, lambda h, i: (h == 0 and i % 2 == 0) or (h == 1 and i % 2 == 1)))[1]
    assert (det["head"], det["accuracy"]) == (0, 0.5)  # the in-sample maximum: the first of two noise heads
    # chosen on one half (where it is always right), scored on the other (where it never is), both ways
    assert det["held_out_accuracy"] == 0.0 and det["held_out_heads"] == "0-0 dep_to_head (-1), 0-1 dep_to_head (-1)"
    assert det["held_out_n"] == det["n"]


def test_a_head_right_everywhere_keeps_its_accuracy_held_out(tmp_path):
    c = corpus()
    m, det = run(tmp_path, c, store(tmp_path, c, lambda h, i: h == 2))
    assert (det["head"], det["accuracy"], det["held_out_accuracy"]) == (2, 1.0, 1.0)
    assert det["held_out_ci_low"] == det["held_out_ci_high"] == 1.0
    # a chain: the -1 offset baseline is right everywhere too, so nothing is gained over it
    assert (det["held_out_baseline_accuracy"], det["held_out_gain"]) == (1.0, 0.0)
    assert "cross-fitting" in m["held_out_selection"]


def test_a_second_split_chooses_and_this_one_scores(tmp_path):
    c = corpus()
    st = store(tmp_path, c, lambda h, i: (h == 0 and i % 2 == 0) or (h == 1 and i % 2 == 1))
    other = corpus(10)
    sel = store(tmp_path / "sel", other, lambda h, i: h == 1)  # head 1 is the best head on the other split
    m, det = run(tmp_path, c, st, (other, sel))
    assert det["held_out_accuracy"] == 0.5 and det["held_out_heads"].startswith("0-1 ")
    assert "chosen on planted dev (10 sentences)" in m["held_out_selection"]


def test_beats_the_baseline_is_decided_on_adjusted_p_values(tmp_path):
    c = corpus()
    m, det = run(tmp_path, c, store(tmp_path, c, lambda h, i: (h == 0 and i % 2 == 0) or (h == 1 and i % 2 == 1)))
    # held out, the noise heads are never right where the -1 offset always is: no resample gains
    assert det["held_out_p"] == 1.0 and det["p_adjusted"] == 1.0 and not det["beats_baseline"]
    assert m["best_heads"]["det"]["beats_baseline"] is False and m["multiplicity"]["method"] == "bh"


def test_a_causal_direction_with_a_handful_of_arcs_is_not_chosen():
    """A causal model's directions count different arcs: head_to_dep sees 3 of a relation's arcs, all right
    (1.0), dep_to_head 100 at 0.6. The choice ranges over the directions kept at min_count only."""
    from probing.config import Direction, LabelSet
    from probing.heads.head_accuracy import RelationCounts
    from probing.heads.selection import Part, choose

    lh = 2  # one layer, two heads; columns: hits of head 0, head 1, the arc count, one offset's hits
    dep = RelationCounts(LabelSet.as_is, ["case", "all"], np.array([[60, 10, 100, 40], [60, 10, 100, 40]]), None)
    head = RelationCounts(LabelSet.as_is, ["case", "all"], np.array([[0, 3, 3, 1], [0, 3, 3, 1]]), None)
    part = Part([([Direction.dep_to_head], dep), ([Direction.head_to_dep], head)])
    assert choose(part, "case", lh) == (1, 1, 0)  # 3 of 3 wins by chance
    assert choose(part, "case", lh, {"dep_to_head"}) == (0, 0, 0)
    assert choose(part, "case", lh, set()) is None
