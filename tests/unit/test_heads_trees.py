"""Spanning trees: hand-worked Chu-Liu-Edmonds, networkx as an independent check, Prim, baselines."""

import numpy as np
import pytest
from heads_store import build_store, synthetic_corpus
from scipy.sparse.csgraph import minimum_spanning_tree

from probing.heads.trees import chain_heads, max_arborescence, sentence_trees, tree_scores, undirected_mst


def test_cle_contracts_a_cycle_hand_worked():
    # scores[head, dep]; root 0. Greedy: 1 <- 2 (11 > 5), 2 <- 1 (10 > 1): the cycle 1 <-> 2.
    # Entering at 1 from 0 costs 5 - 11 = -6, at 2: 1 - 10 = -9 -> break at 1: 0 -> 1 -> 2 (15 > 12).
    s = np.array([[0, 5, 1],
                  [0, 0, 10],
                  [0, 11, 0]], dtype=float)
    assert max_arborescence(s, 0).tolist() == [-1, 0, 1]


def test_cle_without_cycles_is_the_greedy_choice_and_rejects_bad_input():
    s = np.array([[0, 3, 1], [1, 0, 4], [2, 2, 0]], dtype=float)
    assert max_arborescence(s, 0).tolist() == [-1, 0, 1]
    with pytest.raises(ValueError):
        max_arborescence(np.zeros((2, 3)), 0)


def test_cle_matches_networkx_on_random_graphs():
    nx = pytest.importorskip("networkx")
    rng = np.random.default_rng(7)
    for trial in range(120):
        n = int(rng.integers(2, 9 if trial < 60 else 26))
        s, root = rng.random((n, n)), int(rng.integers(n))
        if trial % 2:  # peaked, with mutual pairs, like attention: many cycles, contracted inside each other
            s = s ** 8 + 2 * np.eye(n)[rng.permutation(n)]
        heads = max_arborescence(s, root)
        got = sum(s[heads[v], v] for v in range(n) if v != root)
        g = nx.DiGraph()
        g.add_weighted_edges_from((a, b, s[a, b]) for a in range(n) for b in range(n) if a != b and b != root)
        ref = sum(w for _, _, w in nx.maximum_spanning_arborescence(g).edges(data="weight"))
        assert got == pytest.approx(ref)
        assert heads[root] == -1 and sorted(set(range(n)) - {root}) == [v for v in range(n) if heads[v] >= 0]


def test_prim_matches_scipy_total_weight():
    rng = np.random.default_rng(3)
    w = rng.random((4, 7, 7))
    w = w + w.transpose(0, 2, 1)
    edges = undirected_mst(w)
    assert edges.shape == (4, 6, 2)
    for k in range(4):
        got = w[k][edges[k, :, 0], edges[k, :, 1]].sum()
        ref = -minimum_spanning_tree(-np.triu(w[k], 1)).sum()  # max tree = min tree of the negated weights
        assert got == pytest.approx(ref)


def test_chains_and_gold_tree_head_scores():
    assert chain_heads(4, "right_branching").tolist() == [-1, 0, 1, 2]
    assert chain_heads(4, "left_branching").tolist() == [1, 2, 3, -1]
    gold = np.array([1, -1, 1, 2])  # w0 <- w1 -> w2 -> w3
    a = np.full((2, 4, 4), 0.01)
    for d, h in enumerate(gold):  # head 0: each word's attention on its gold head; head 1: uniform noise
        if h >= 0:
            a[0, d, h] = 1.0
    res = sentence_trees(a, gold, ["dep_to_head", "head_to_dep"])
    assert res["dep_to_head_uas"][0] == 3 and res["dep_to_head_uuas"][0] == 3
    assert res["undirected_uuas"][0] == 3
    # right-branching w0 -> w1 -> w2 -> w3 as heads [-1, 0, 1, 2]: w2 (head 1) and w3 (head 2) right: UAS 2
    assert int(res["right_branching_uas"]) == 2 and int(res["left_branching_uas"]) == 1
    # both chains have the edges {0,1}, {1,2}, {2,3}: all three are gold edges
    assert int(res["right_branching_uuas"]) == int(res["left_branching_uuas"]) == 3


def test_tree_scores_over_a_store(tmp_path):
    corpus = synthetic_corpus(8, seed=2)
    store = build_store(tmp_path / "s", corpus)
    t = tree_scores(store, corpus, store.indices, ["dep_to_head"])
    oracle = t[(t.method == "mst_directed") & (t.layer == 0) & (t["head"] == 0)].iloc[0]
    assert oracle["uas"] == 1.0 and oracle["uuas"] == 1.0
    assert len(t) == 2 * 2 * 3 and t["arcs"].iloc[0] == sum(len(s) - 1 for s in corpus)
