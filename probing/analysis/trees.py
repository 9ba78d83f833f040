"""Trees from single heads (Htut et al. 2019): maximum spanning trees of word-level attention, scored
against the gold tree, beside left- and right-branching chains.

- directed: Chu-Liu-Edmonds maximum arborescence rooted at the gold root word, arc weight ``head -> dep`` =
  ``A[dep, head]`` (``dep_to_head``: the dependent's attention to its head) or ``A[head, dep]``
  (``head_to_dep``); scored by UAS over the non-root words (the root is given) and by UUAS.
- undirected: maximum spanning tree (Prim) of ``A + A.T``, scored by UUAS (the share of gold edges found).
- right_branching: every word's head is the word before it; left_branching: the word after it.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pandas as pd

from probing.config import Direction
from probing.corpus import Corpus
from probing.store import AttentionStore


def _find_cycle(heads: np.ndarray, root: int) -> Optional[np.ndarray]:
    """A cycle of the head graph (its nodes, in order), or None.

    Pointer jumping: after at least n steps every node sits on a cycle or at the root, so the nodes
    reached are exactly the cycle nodes; one cycle is then walked from any of them.
    """
    n = len(heads)
    p = heads.copy()
    p[root] = root
    steps = 1
    while steps < n:
        p = p[p]
        steps *= 2
    reached = np.zeros(n, dtype=bool)
    reached[p] = True
    reached[root] = False
    if not reached.any():
        return None
    start = int(reached.argmax())
    cyc = [start]
    v = int(heads[start])
    while v != start:
        cyc.append(v)
        v = int(heads[v])
    return np.array(cyc)


def max_arborescence(scores: np.ndarray, root: int) -> np.ndarray:
    """Chu-Liu-Edmonds: the maximum spanning arborescence of ``scores[head, dep]`` rooted at ``root``.

    Returns heads ``(n,)`` with ``heads[root] = -1``. Self-loops and arcs into the root are excluded.
    """
    s = np.array(scores, dtype=np.float64)
    n = s.shape[0]
    if s.shape != (n, n) or not 0 <= root < n:
        raise ValueError(f"scores must be square and root in range, got {s.shape} and root {root}")
    np.fill_diagonal(s, -np.inf)
    s[:, root] = -np.inf
    return _cle(s, root)


def _cle(s: np.ndarray, root: int) -> np.ndarray:
    n = s.shape[0]
    heads = s.argmax(axis=0)
    heads[root] = -1
    cycle = _find_cycle(heads, root)
    if cycle is None:
        return heads
    in_cycle = np.zeros(n, dtype=bool)
    in_cycle[cycle] = True
    rest = np.flatnonzero(~in_cycle)
    c = len(rest)  # index of the contracted node in the smaller graph
    cyc_in = s[heads[cycle], cycle]  # score of the cycle arc entering each cycle node
    # entering the cycle at v from u costs s[u, v] - cyc_in[v]; keep the best v for each u
    enter = s[rest][:, cycle] - cyc_in[None, :]
    best_v = enter.argmax(axis=1)
    # leaving the cycle to w: the best cycle node as its head
    leave = s[cycle][:, rest]
    best_u = leave.argmax(axis=0)
    s2 = np.full((c + 1, c + 1), -np.inf)
    s2[:c, :c] = s[rest][:, rest]
    s2[:c, c] = enter[np.arange(c), best_v]
    s2[c, :c] = leave[best_u, np.arange(c)]
    root2 = int(np.searchsorted(rest, root))
    h2 = _cle(s2, root2)
    out = heads.copy()
    for k, w in enumerate(rest):
        if k == root2:
            continue
        out[w] = cycle[best_u[k]] if h2[k] == c else rest[h2[k]]
    u = int(h2[c])  # the node the cycle hangs from, in the small graph
    out[cycle[best_v[u]]] = rest[u]
    out[root] = -1
    return out


def greedy_heads(scores: np.ndarray, root: int) -> np.ndarray:
    """Every word's best head for a batch ``(G, n, n)`` of ``scores[g, head, dep]`` (no self-loops, the root
    takes none): ``(G, n)`` with ``-1`` at the root. Where it has no cycle it is the maximum arborescence."""
    s = np.array(scores, dtype=np.float64)
    n = s.shape[-1]
    s[:, np.arange(n), np.arange(n)] = -np.inf
    heads = s.argmax(axis=1)
    heads[:, root] = -1
    return heads


def acyclic(heads: np.ndarray, root: int) -> np.ndarray:
    """``(G,)`` whether each ``(G, n)`` head assignment reaches the root from every word (pointer jumping)."""
    p = heads.copy()
    p[:, root] = root
    steps = 1
    while steps < p.shape[1]:
        p = np.take_along_axis(p, p, axis=1)
        steps *= 2
    return (p == root).all(axis=1)


def undirected_mst(weights: np.ndarray) -> np.ndarray:
    """Prim's maximum spanning tree for a batch of symmetric ``(G, n, n)`` weights -> ``(G, n-1, 2)``
    edges, vectorised over the batch (the loop is over the n-1 steps)."""
    g, n, _ = weights.shape
    edges = np.zeros((g, max(n - 1, 0), 2), dtype=np.int64)
    if n < 2:
        return edges
    in_tree = np.zeros((g, n), dtype=bool)
    in_tree[:, 0] = True
    best = weights[:, 0, :].astype(np.float64)
    parent = np.zeros((g, n), dtype=np.int64)
    batch = np.arange(g)
    for step in range(n - 1):
        j = np.where(in_tree, -np.inf, best).argmax(axis=1)  # the best outside node, leftmost on ties
        edges[:, step, 0], edges[:, step, 1] = parent[batch, j], j
        in_tree[batch, j] = True
        w = weights[batch, j, :]
        better = (w > best) & ~in_tree
        best = np.where(better, w, best)
        parent = np.where(better, j[:, None], parent)
    return edges


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
        pred = greedy_heads(scores, root)
        # Chu-Liu-Edmonds has no batched form: one call per head whose greedy choice has a cycle
        for k in np.flatnonzero(~acyclic(pred, root)):
            pred[k] = max_arborescence(scores[k], root)
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


def tree_scores(store: AttentionStore, corpus: Corpus, indices: Sequence[int], directions: Sequence[Direction]
                ) -> pd.DataFrame:
    """One row per (method, direction, layer, head): UAS / UUAS of its spanning trees over ``indices``
    (sentences with one root and at least two words), with the branching baselines beside."""
    layers, heads = store.num_layers, store.num_heads
    g = layers * heads
    sums: dict[str, np.ndarray] = {}
    arcs = sentences = 0
    for i, _ in store.iter_maps(indices):
        s = corpus[i]
        gold = np.asarray(s.heads, dtype=np.int64)
        if len(gold) < 2 or int((gold < 0).sum()) != 1:
            continue
        w = np.asarray(store.words(i), dtype=np.float64).reshape(g, len(gold), len(gold)).copy()
        res = sentence_trees(w, gold, directions)
        for k, v in res.items():
            sums[k] = sums.get(k, 0) + v
        arcs += len(gold) - 1
        sentences += 1
    store.close()
    if not sentences:
        return pd.DataFrame()
    base = {f"{k}_{m}": float(sums[f"{k}_{m}"]) / arcs
            for k in ("left_branching", "right_branching") for m in ("uas", "uuas")}
    layer, head = np.repeat(np.arange(layers), heads), np.tile(np.arange(heads), layers)
    parts = []
    for d in directions:
        parts.append(pd.DataFrame({"method": "mst_directed", "direction": str(d), "layer": layer, "head": head,
                                   "uas": sums[f"{d}_uas"] / arcs, "uuas": sums[f"{d}_uuas"] / arcs}))
    parts.append(pd.DataFrame({"method": "mst_undirected", "direction": "undirected", "layer": layer,
                               "head": head, "uas": np.nan, "uuas": sums["undirected_uuas"] / arcs}))
    out = pd.concat(parts, ignore_index=True)
    out["sentences"], out["arcs"] = sentences, arcs
    for k, v in base.items():
        out[k] = v
    return out
