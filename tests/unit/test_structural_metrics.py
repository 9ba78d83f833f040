"""Structural-probe metrics: tree distances and depths, the MST, UUAS, DSpr, root accuracy and NSpr against
hand-worked examples and independent implementations."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from probing.probes.structural.metrics import (
    dspr,
    gold_edges,
    length_averaged,
    many,
    mst_edges,
    nspr,
    padded_tree_depths,
    padded_tree_distances,
    root_accuracy,
    spearman_rows,
    tree_depths,
    tree_distances,
    uuas,
    uuas_counts,
)

# a <- b -> c -> d: b is the root, d hangs from c
HEADS = [1, -1, 1, 2]


def random_tree(rng: np.random.Generator, n: int) -> np.ndarray:
    """Heads of a random tree: word order shuffled, each word attached to an earlier one in that order."""
    order = rng.permutation(n)
    heads = np.full(n, -1)
    for k in range(1, n):
        heads[order[k]] = order[rng.integers(0, k)]
    return heads


def bfs_distances(heads) -> np.ndarray:
    n = len(heads)
    nbrs = [[] for _ in range(n)]
    for d, h in enumerate(heads):
        if h >= 0:
            nbrs[d].append(h)
            nbrs[h].append(d)
    out = np.zeros((n, n), dtype=int)
    for s in range(n):
        seen, frontier, k = {s}, [s], 0
        while frontier:
            for v in frontier:
                out[s, v] = k
            nxt = [w for v in frontier for w in nbrs[v] if w not in seen]
            seen.update(nxt)
            frontier, k = nxt, k + 1
    return out


def prim(dist: np.ndarray, nodes: list[int]) -> set[tuple[int, int]]:
    """Textbook Prim on the listed nodes (plain Python): the independent MST."""
    if len(nodes) < 2:
        return set()
    inside, edges = {nodes[0]}, set()
    while len(inside) < len(nodes):
        best = min(((dist[a][b], a, b) for a in inside for b in nodes if b not in inside))
        _, a, b = best
        inside.add(b)
        edges.add((min(a, b), max(a, b)))
    return edges


def test_tree_distances_and_depths_hand_worked():
    assert tree_distances(HEADS).tolist() == [[0, 1, 2, 3], [1, 0, 1, 2], [2, 1, 0, 1], [3, 2, 1, 0]]
    assert tree_depths(HEADS).tolist() == [1, 0, 1, 2]


def test_tree_distances_match_bfs_on_random_trees():
    rng = np.random.default_rng(3)
    for n in (1, 2, 7, 30):
        heads = random_tree(rng, n)
        np.testing.assert_array_equal(tree_distances(heads), bfs_distances(heads))


def test_padded_batches_match_bfs_for_every_length():
    rng = np.random.default_rng(4)
    trees = [random_tree(rng, int(n)) for n in rng.integers(1, 40, size=150)]
    dists = many(padded_tree_distances, trees, chunk=16)  # chunks mix lengths: padding must not leak
    depths = many(padded_tree_depths, trees, chunk=16)
    for h, d, dep in zip(trees, dists, depths):
        want = bfs_distances(h)
        np.testing.assert_array_equal(d, want)
        np.testing.assert_array_equal(dep, want[int(np.flatnonzero(h == -1)[0])])


@pytest.mark.parametrize("heads", [[-1, -1], [1, 0], [0, -1, 5], [-1, 2, 1]])
def test_tree_distances_reject_non_trees(heads):
    with pytest.raises(ValueError, match="not a tree"):
        tree_distances(heads)


def test_mst_matches_prim_with_and_without_masks():
    rng = np.random.default_rng(0)
    for n in (2, 5, 12, 25):
        a = rng.normal(size=(n, n))
        d = a + a.T  # symmetric, negative weights included (the shift must not matter)
        keep = rng.random(n) > 0.3
        for mask in (None, keep):
            nodes = list(range(n)) if mask is None else [int(i) for i in np.flatnonzero(mask)]
            got = {tuple(e) for e in mst_edges(d, mask).tolist()}
            assert got == prim(d, nodes)


def test_mst_keeps_zero_distance_edges():
    # two identical vectors have distance 0; scipy would read the zero as "no edge"
    d = np.array([[0.0, 0.0, 2.0], [0.0, 0.0, 1.0], [2.0, 1.0, 0.0]])
    assert {tuple(e) for e in mst_edges(d).tolist()} == {(0, 1), (1, 2)}


def test_uuas_hand_worked_pooled_over_sentences():
    pred = np.array([[0, 1, 5, 6], [1, 0, 2, 3], [5, 2, 0, 4], [6, 3, 4, 0]], dtype=float)
    # MST: (0,1) w1, (1,2) w2, (1,3) w3; gold: (0,1), (1,2), (2,3) -> 2 of 3
    assert uuas_counts(pred, HEADS, None) == (2, 3)
    # word 3 as punctuation leaves both trees: the MST on {0,1,2} is (0,1), (1,2), both gold
    assert uuas_counts(pred, HEADS, np.array([0, 0, 0, 1], bool)) == (2, 2)
    two = np.array([[0.0, 1.0], [1.0, 0.0]])
    # pooled: (2 + 1) / (3 + 1), not the mean of per-sentence scores (0.833)
    assert uuas([pred, two], [HEADS, [-1, 0]], [None, None]) == pytest.approx(0.75)


def test_gold_edges_drop_arcs_touching_punctuation():
    assert gold_edges(HEADS).tolist() == [[0, 1], [1, 2], [2, 3]]
    assert gold_edges(HEADS, np.array([1, 1, 0, 1], bool)).tolist() == [[0, 1]]


def test_spearman_rows_hand_worked_and_against_scipy():
    # ranks (1,2,4,3) vs (1,2,3,4): 1 - 6*2/(4*15) = 0.8
    assert spearman_rows(np.array([[0, 1, 3, 2]]), np.array([[0, 1, 2, 3]]))[0] == pytest.approx(0.8)
    rng = np.random.default_rng(1)
    p, g = rng.normal(size=(6, 9)), rng.integers(0, 4, size=(6, 9))  # gold with ties
    want = [spearmanr(a, b).correlation for a, b in zip(p, g)]
    np.testing.assert_allclose(spearman_rows(p, g), want, rtol=1e-12)
    assert spearman_rows(np.ones((1, 4)), np.array([[0, 1, 2, 3]]))[0] == 0.0  # constant row: 0


def test_length_averaged_hand_worked():
    avg, per = length_averaged(np.array([5, 5, 6, 60, 4]), np.array([1.0, 0.5, 0.2, 0.9, 0.1]))
    assert per == {4: 0.1, 5: 0.75, 6: 0.2, 60: 0.9}
    assert avg == pytest.approx((0.75 + 0.2) / 2)  # lengths 4 and 60 are outside 5-50


def test_dspr_averages_per_length_then_over_lengths():
    chain5 = tree_distances([-1, 0, 1, 2, 3]).astype(float)
    chain6 = tree_distances([-1, 0, 1, 2, 3, 4]).astype(float)
    # length 5: one perfect (+1 every row), one reversed (-1 every row) -> 0; length 6 perfect -> 1
    value, per = dspr([chain5 ** 2, -chain5, chain6], [chain5, chain5, chain6])
    assert per == {5: pytest.approx(0.0), 6: pytest.approx(1.0)}
    assert value == pytest.approx(0.5)  # a mean over all rows would give (5 - 5 + 6) / 16


def test_root_accuracy_skips_punctuation():
    punct = np.array([0, 0, 0, 1], bool)
    preds = [np.array([0.3, 0.2, 0.9, 0.1]), np.array([0.3, 0.5, 0.9, 0.1])]
    assert root_accuracy(preds, [HEADS, HEADS], [punct, punct]) == pytest.approx(0.5)
    assert root_accuracy(preds[:1], [HEADS], [None]) == 0.0  # word 3 (0.1) is least deep


def test_nspr_hand_worked():
    gold5 = tree_depths([-1, 0, 1, 2, 3])  # 0 1 2 3 4
    gold6 = tree_depths([1, -1, 1, 2, 3, 4])  # 1 0 1 2 3 4
    pred6 = np.array([2.0, 0.0, 1.0, 3.0, 4.0, 5.0])
    value, per = nspr([gold5 * 2.0, pred6, gold6 * 1.0], [gold5, gold6, gold6])
    want6 = (spearmanr(pred6, gold6).correlation + 1.0) / 2
    assert per == {5: pytest.approx(1.0), 6: pytest.approx(want6)}
    assert value == pytest.approx((1.0 + want6) / 2)


def test_resampled_terms_equal_the_metrics_of_the_resampled_sentences():
    """A bootstrap resample scored through per-sentence terms equals UUAS, DSpr, NSpr and root accuracy
    computed from scratch on the list of drawn sentences (each repeated as often as drawn)."""
    from probing.probes.structural.metrics import (
        dspr_terms,
        nspr_terms,
        ratio_of_groups,
        root_accuracy,
        root_terms,
        uuas_terms,
    )
    from probing.stats.bootstrap import resample_counts

    rng = np.random.default_rng(4)
    heads, punct, dists, depths = [], [], [], []
    for n in (1, 3, 5, 5, 6, 7, 9, 12, 5, 8):
        h = [-1] + [int(rng.integers(0, k)) for k in range(1, n)]  # word k attaches to an earlier word
        heads.append(np.array(h))
        punct.append(rng.random(n) < 0.2)
        x = rng.normal(size=(n, 3))
        dists.append(((x[:, None] - x[None]) ** 2).sum(-1))
        depths.append(rng.random(n))
    gold_d, gold_n = many(padded_tree_distances, heads), many(padded_tree_depths, heads)
    weights = resample_counts(len(heads), 6, seed=1).astype(float)
    terms = {"uuas": uuas_terms(dists, heads, punct), "dspr": dspr_terms(dists, gold_d),
             "nspr": nspr_terms(depths, gold_n), "root": root_terms(depths, heads, punct)}
    got = {k: ratio_of_groups(t, weights) for k, t in terms.items()}
    for b, w in enumerate(weights):
        idx = np.repeat(np.arange(len(heads)), w.astype(int))
        pick = lambda xs: [xs[i] for i in idx]  # noqa: E731
        assert got["uuas"][b] == pytest.approx(uuas(pick(dists), pick(heads), pick(punct)))
        assert got["dspr"][b] == pytest.approx(dspr(pick(dists), pick(gold_d))[0])
        assert got["nspr"][b] == pytest.approx(nspr(pick(depths), pick(gold_n))[0])
        assert got["root"][b] == pytest.approx(root_accuracy(pick(depths), pick(heads), pick(punct)))
    # each sentence once: the headline numbers themselves
    assert ratio_of_groups(terms["dspr"]) == pytest.approx(dspr(dists, gold_d)[0])
