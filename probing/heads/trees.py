"""Trees from single heads (Htut et al. 2019): maximum spanning trees of word-level attention, scored
against the gold tree, beside left- and right-branching chains.

- directed: Chu-Liu-Edmonds maximum arborescence rooted at the gold root word, arc weight ``head -> dep`` =
  ``A[dep, head]`` (``dep_to_head``: the dependent's attention to its head) or ``A[head, dep]``
  (``head_to_dep``); scored by UAS over the non-root words (the root is given) and by UUAS.
- undirected: maximum spanning tree (Prim) of ``A + A.T``, scored by UUAS (the share of gold edges found).
- right_branching: every word's head is the word before it; left_branching: the word after it.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from probing.config import Direction
from probing.corpus import Corpus
from probing.heads.spanning import chu_liu_edmonds_batch, prim_batch
from probing.progress import progress
from probing.store import AttentionStore


def max_arborescence(scores: np.ndarray, root: int) -> np.ndarray:
    """Chu-Liu-Edmonds: the maximum spanning arborescence of ``scores[head, dep]`` rooted at ``root``.

    Returns heads ``(n,)`` with ``heads[root] = -1``. Self-loops and arcs into the root are excluded.
    """
    s = np.array(scores, dtype=np.float64)
    n = s.shape[0]
    if s.shape != (n, n) or not 0 <= root < n:
        raise ValueError(f"scores must be square and root in range, got {s.shape} and root {root}")
    return max_arborescences(s[None], root)[0]


def max_arborescences(scores: np.ndarray, root: int) -> np.ndarray:
    """:func:`max_arborescence` of a batch ``(G, n, n)`` of ``scores[g, head, dep]`` -> ``(G, n)`` heads, in one
    compiled call (self-loops and arcs into the root are excluded here)."""
    s = np.array(scores, dtype=np.float64)
    n = s.shape[-1]
    s[:, np.arange(n), np.arange(n)] = -np.inf
    s[:, :, root] = -np.inf
    return chu_liu_edmonds_batch(s, root)


def undirected_mst(weights: np.ndarray) -> np.ndarray:
    """Prim's maximum spanning tree for a batch of symmetric ``(G, n, n)`` weights -> ``(G, n-1, 2)`` edges
    (parent, node) in the order they join the tree from node 0, ties to the leftmost node."""
    return prim_batch(np.ascontiguousarray(weights, dtype=np.float64))


def edge_keys(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """Undirected edge ids ``min * n + max``."""
    return np.minimum(a, b) * n + np.maximum(a, b)


def chain_heads(n: int, kind: str) -> np.ndarray:
    """Heads of the branching baselines: ``right_branching`` (word before), ``left_branching`` (word after)."""
    if kind == "right_branching":
        return np.arange(n) - 1
    if kind == "left_branching":
        h = np.arange(n) + 1
        h[-1] = -1
        return h
    raise ValueError(f"unknown baseline {kind!r}")


def sentence_trees(words: np.ndarray, gold: np.ndarray, directions: Sequence[Direction]) -> dict[str, np.ndarray]:
    """Correct counts of every head's trees for one sentence.

    ``words``: ``(G, n, n)`` word-level maps, ``gold``: ``(n,)`` heads (-1 root, exactly one root).
    Returns ``{"<direction>_uas": (G,), "<direction>_uuas": (G,), "undirected_uuas": (G,)}`` counts of
    correct arcs (UAS over the n-1 non-root words; UUAS over the n-1 gold edges).
    """
    g, n, _ = words.shape
    roots = np.flatnonzero(gold < 0)
    if len(roots) != 1:
        raise ValueError(f"a gold tree needs exactly one root, got {len(roots)}")
    root = int(roots[0])
    deps = np.flatnonzero(gold >= 0)
    gold_keys = np.sort(edge_keys(deps, gold[deps], n))
    out: dict[str, np.ndarray] = {}
    a = np.asarray(words, dtype=np.float64)
    for d in map(Direction, directions):
        scores = a.transpose(0, 2, 1) if d is Direction.dep_to_head else a  # scores[g, head, dep]
        pred = max_arborescences(scores, root)
        uas = (pred[:, deps] == gold[deps]).sum(axis=1)
        uuas = np.isin(edge_keys(deps[None, :], pred[:, deps], n), gold_keys).sum(axis=1)
        out[f"{d}_uas"], out[f"{d}_uuas"] = uas, uuas
    e = undirected_mst(a + a.transpose(0, 2, 1))
    out["undirected_uuas"] = np.isin(edge_keys(e[..., 0], e[..., 1], n), gold_keys).sum(axis=1)
    for kind in ("left_branching", "right_branching"):
        h = chain_heads(n, kind)
        out[f"{kind}_uas"] = np.array(int((h[deps] == gold[deps]).sum()))
        words = np.flatnonzero(h >= 0)  # the chain's own n-1 edges (the same set for both chains)
        out[f"{kind}_uuas"] = np.array(int(np.isin(edge_keys(words, h[words], n), gold_keys).sum()))
    return out


class TreeTotals:
    """Correct-arc counts of every head's trees (:func:`sentence_trees`) summed over sentences with one root and
    at least two words, with their arcs and number: integers, so mergeable in any order (``state()`` /
    ``load``)."""

    def __init__(self, n_heads: int, directions: Sequence[Direction]):
        self.directions = [Direction(d) for d in directions]
        self.sums: dict[str, np.ndarray] = {k: np.zeros(() if "branching" in k else n_heads, dtype=np.int64)
                                            for k in self.keys()}
        self.arcs = self.sentences = 0

    def keys(self) -> list[str]:
        return ([f"{d}_{m}" for d in self.directions for m in ("uas", "uuas")] + ["undirected_uuas"]
                + [f"{k}_{m}" for k in ("left_branching", "right_branching") for m in ("uas", "uuas")])

    def add(self, words: np.ndarray, gold: np.ndarray) -> None:
        """One sentence's word-level maps ``(L, H, n, n)`` and gold heads; a sentence without one root or with
        fewer than two words is left out."""
        n = len(gold)
        if n < 2 or int((gold < 0).sum()) != 1:
            return
        w = np.asarray(words, dtype=np.float64).reshape(-1, n, n).copy()
        for k, v in sentence_trees(w, gold, self.directions).items():
            self.sums[k] += v
        self.arcs += n - 1
        self.sentences += 1

    def state(self) -> dict[str, np.ndarray]:
        return {**{f"tree_{k}": v for k, v in self.sums.items()},
                "tree_arcs": np.array([self.arcs, self.sentences], dtype=np.int64)}

    def load(self, state: dict[str, np.ndarray]) -> "TreeTotals":
        self.sums = {k: state[f"tree_{k}"].astype(np.int64) for k in self.keys()}
        self.arcs, self.sentences = (int(x) for x in state["tree_arcs"])
        return self

    def table(self, layers: int, heads: int, directions: Sequence[Direction]) -> pd.DataFrame:
        """One row per (method, direction, layer, head): UAS / UUAS, with the branching baselines beside."""
        if not self.sentences:
            return pd.DataFrame()
        sums, arcs = self.sums, self.arcs
        base = {f"{k}_{m}": float(sums[f"{k}_{m}"]) / arcs
                for k in ("left_branching", "right_branching") for m in ("uas", "uuas")}
        layer, head = np.repeat(np.arange(layers), heads), np.tile(np.arange(heads), layers)
        parts = []
        for d in map(Direction, directions):
            parts.append(pd.DataFrame({"method": "mst_directed", "direction": str(d), "layer": layer, "head": head,
                                       "uas": sums[f"{d}_uas"] / arcs, "uuas": sums[f"{d}_uuas"] / arcs}))
        parts.append(pd.DataFrame({"method": "mst_undirected", "direction": "undirected", "layer": layer,
                                   "head": head, "uas": np.nan, "uuas": sums["undirected_uuas"] / arcs}))
        out = pd.concat(parts, ignore_index=True)
        out["sentences"], out["arcs"] = self.sentences, arcs
        for k, v in base.items():
            out[k] = v
        return out


def tree_scores(store: AttentionStore, corpus: Corpus, indices: Sequence[int], directions: Sequence[Direction]
                ) -> pd.DataFrame:
    """One row per (method, direction, layer, head): UAS / UUAS of its spanning trees over ``indices``
    (sentences with one root and at least two words), with the branching baselines beside."""
    totals = TreeTotals(store.num_layers * store.num_heads, directions)
    for i, _ in progress(store.iter_maps(indices), "trees from single heads", total=len(indices)):
        totals.add(store.words(i), np.asarray(corpus[i].heads, dtype=np.int64))
    store.close()
    return totals.table(store.num_layers, store.num_heads, directions)
