"""Control tasks: labels are a deterministic function of word types and the seed."""

from __future__ import annotations

import numpy as np

from probing.probes.control import (
    ARC_RULES,
    control_arc_rules,
    control_edges,
    control_heads,
    control_relations,
    draw_from,
    type_uniform,
)


def test_type_uniform_is_a_function_of_types_and_seed():
    a = type_uniform(0, ["the", "cat", "the", "sat"], ["x", "y", "x", "y"])
    assert a[0] == a[2] and len(set(a)) == 3 and ((0 <= a) & (a < 1)).all()
    np.testing.assert_array_equal(a, type_uniform(0, ["the", "cat", "the", "sat"], ["x", "y", "x", "y"]))
    assert not np.array_equal(a, type_uniform(1, ["the", "cat", "the", "sat"], ["x", "y", "x", "y"]))
    # order of the rows does not matter: each row's number depends on its own types only
    b = type_uniform(0, ["sat", "the"], ["y", "x"])
    assert b[0] == a[3] and b[1] == a[0]


def test_draw_from_inverse_cdf():
    out = draw_from(np.array([0.0, 0.49, 0.5, 0.74, 0.75, 0.999]), ["a", "b", "c"], [2, 1, 1])
    assert list(out) == ["a", "a", "b", "b", "c", "c"]


def test_control_relations_depend_on_the_dependent_type_alone_and_follow_the_task_distribution():
    rng = np.random.default_rng(0)
    dep = np.array([f"d{i}" for i in rng.integers(0, 1000, 20000)], dtype=object)
    train = np.array(["nsubj"] * 600 + ["obj"] * 300 + ["det"] * 100, dtype=object)
    c1 = control_relations(dep, train, seed=3)
    np.testing.assert_array_equal(c1, control_relations(dep, train, seed=3))
    # a function of the dependent's type (Hewitt and Liang 2019): one label per type, wherever it occurs
    for k in np.unique(dep)[:50]:
        assert len(set(c1[dep == k])) == 1
    # drawn from the task's label distribution (over distinct types)
    _, first = np.unique(dep, return_index=True)
    share = {lab: np.mean(c1[first] == lab) for lab in ("nsubj", "obj", "det")}
    assert abs(share["nsubj"] - 0.6) < 0.04 and abs(share["obj"] - 0.3) < 0.04
    assert abs(share["det"] - 0.1) < 0.03
    c2 = control_relations(dep, train, seed=4)
    assert 0.3 < np.mean(c1 != c2) < 0.8  # another seed is another function


def test_control_heads_rules():
    words = np.array(["a", "b", "c", "a"], dtype=object)
    rules = control_arc_rules(words, seed=0)
    assert rules[0] == rules[3] and set(rules) <= set(ARC_RULES)
    pos, n = np.array([0, 1, 2, 3]), np.array([4, 4, 4, 4])
    heads = control_heads(words, pos, n, seed=0)
    for r, p, h in zip(rules, pos, heads):
        target = {"root": -1, "first": 0, "last": 3}[r]
        assert h == (-1 if target == p else target)  # a word never heads itself: ROOT instead
    many = np.array([f"t{i}" for i in range(3000)], dtype=object)
    counts = {r: np.mean(control_arc_rules(many, 5) == r) for r in ARC_RULES}
    assert all(abs(v - 1 / 3) < 0.04 for v in counts.values())


def test_control_edges_follow_the_attachment_rules_in_either_order():
    words = np.array(["a", "b", "c", "d"], dtype=object)
    pos, n = np.arange(4), np.full(4, 4)
    heads = control_heads(words, pos, n, seed=1)
    i, j = np.meshgrid(pos, pos, indexing="ij")
    i, j = i.ravel(), j.ravel()
    got = control_edges(words[i], words[j], i, j, n[i], seed=1)
    # a pair is a control arc exactly when one word's rule attaches it to the other
    np.testing.assert_array_equal(got, ((heads[i] == j) | (heads[j] == i)).astype(int))
    np.testing.assert_array_equal(got, control_edges(words[j], words[i], j, i, n[i], seed=1))
