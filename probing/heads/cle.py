"""Chu-Liu-Edmonds maximum arborescence, compiled with numba: the hot loop of trees from single heads.

The same algorithm as the textbook recursive form (greedy heads; contract the first cycle found; recurse;
expand), written as a loop with an explicit stack so numba compiles it; ties go to the lowest index at every
argmax, so results do not depend on the implementation. Compiled once per machine (``cache=True``).
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.typed import List


@njit(cache=True)
def _greedy(s: np.ndarray, root: int) -> np.ndarray:
    n = s.shape[0]
    heads = np.empty(n, dtype=np.int64)
    for v in range(n):
        best, arg = -np.inf, 0
        for u in range(n):
            if s[u, v] > best:  # strict: the first maximum wins, as np.argmax
                best, arg = s[u, v], u
        heads[v] = arg
    heads[root] = -1
    return heads


@njit(cache=True)
def _first_cycle(heads: np.ndarray, root: int) -> np.ndarray:
    """The nodes of one cycle of the head graph, walked from its lowest-numbered node (empty: none)."""
    n = len(heads)
    p = heads.copy()
    p[root] = root
    steps = 1
    while steps < n:  # pointer jumping: after n steps every node sits on a cycle or at the root
        q = p.copy()
        for i in range(n):
            q[i] = p[p[i]]
        p = q
        steps *= 2
    reached = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        reached[p[i]] = True
    reached[root] = False
    start = -1
    for i in range(n):
        if reached[i]:
            start = i
            break
    if start < 0:
        return np.empty(0, dtype=np.int64)
    cycle = [start]
    v = heads[start]
    while v != start:
        cycle.append(v)
        v = heads[v]
    return np.array(cycle, dtype=np.int64)


@njit(cache=True)
def _contract(s: np.ndarray, heads: np.ndarray, cycle: np.ndarray, root: int):
    """The graph with ``cycle`` contracted into one node (the last), and what expanding it needs."""
    n = s.shape[0]
    in_cycle = np.zeros(n, dtype=np.bool_)
    in_cycle[cycle] = True
    rest = np.flatnonzero(~in_cycle)
    c, k = len(rest), len(cycle)
    s2 = np.full((c + 1, c + 1), -np.inf)
    best_v = np.zeros(c, dtype=np.int64)  # for each outside node u: the cycle node it best enters at
    best_u = np.zeros(c, dtype=np.int64)  # for each outside node w: the cycle node that best heads it
    for a in range(c):
        u = rest[a]
        for b in range(c):
            s2[a, b] = s[u, rest[b]]
        best, arg = -np.inf, 0
        for j in range(k):  # entering the cycle at v from u costs s[u, v] - (the cycle arc into v)
            score = s[u, cycle[j]] - s[heads[cycle[j]], cycle[j]]
            if score > best:
                best, arg = score, j
        best_v[a] = arg
        s2[a, c] = best
        best, arg = -np.inf, 0
        for j in range(k):  # leaving the cycle to u: its best head among the cycle nodes
            if s[cycle[j], u] > best:
                best, arg = s[cycle[j], u], j
        best_u[a] = arg
        s2[c, a] = best
    root2 = 0
    while rest[root2] != root:
        root2 += 1
    return s2, rest, best_v, best_u, root2


@njit(cache=True)
def chu_liu_edmonds(scores: np.ndarray, root: int) -> np.ndarray:
    """Heads ``(n,)`` of the maximum arborescence of ``scores[head, dep]`` (float64, ``-inf`` where there is no
    arc) rooted at ``root``; ``heads[root] = -1``."""
    stack_heads = List.empty_list(types.int64[:])
    stack_cycle = List.empty_list(types.int64[:])
    stack_rest = List.empty_list(types.int64[:])
    stack_v = List.empty_list(types.int64[:])
    stack_u = List.empty_list(types.int64[:])
    stack_root = List.empty_list(types.int64)
    s = scores
    while True:
        heads = _greedy(s, root)
        cycle = _first_cycle(heads, root)
        if len(cycle) == 0:
            break
        s2, rest, best_v, best_u, root2 = _contract(s, heads, cycle, root)
        stack_heads.append(heads)
        stack_cycle.append(cycle)
        stack_rest.append(rest)
        stack_v.append(best_v)
        stack_u.append(best_u)
        stack_root.append(root)
        s, root = s2, root2
    h2 = heads
    for level in range(len(stack_heads) - 1, -1, -1):
        heads, cycle, rest = stack_heads[level], stack_cycle[level], stack_rest[level]
        best_v, best_u, root = stack_v[level], stack_u[level], stack_root[level]
        c = len(rest)
        root2 = 0
        while rest[root2] != root:
            root2 += 1
        out = heads.copy()
        for k in range(c):
            if k == root2:
                continue
            out[rest[k]] = cycle[best_u[k]] if h2[k] == c else rest[h2[k]]
        u = h2[c]  # the node the cycle hangs from, in the contracted graph
        out[cycle[best_v[u]]] = rest[u]
        out[root] = -1
        h2 = out
    return h2


@njit(cache=True)
def chu_liu_edmonds_batch(scores: np.ndarray, root: int) -> np.ndarray:
    """:func:`chu_liu_edmonds` for each of ``G`` score matrices ``(G, n, n)`` over the same words -> ``(G, n)``."""
    g, n = scores.shape[0], scores.shape[1]
    out = np.empty((g, n), dtype=np.int64)
    for k in range(g):
        out[k] = chu_liu_edmonds(scores[k], root)
    return out
