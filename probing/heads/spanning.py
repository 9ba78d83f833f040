"""Maximum spanning trees of batches of heads' maps, compiled with numba: the hot loops of trees from single heads.

- :func:`chu_liu_edmonds_batch`: the maximum arborescence (directed). The same algorithm as the textbook
  recursive form (greedy heads; contract the first cycle found; recurse; expand), written as a loop over levels
  of contraction kept in arrays allocated once per batch. Ties go to the lowest index at every argmax, and the
  cycle contracted first is the one through the lowest-numbered node on any cycle, so results do not depend on
  the implementation.
- :func:`prim_batch`: the maximum spanning tree of symmetric weights (Prim), ties to the leftmost node.

Compiled once per machine (``cache=True``).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _greedy(s: np.ndarray, n: int, root: int, heads: np.ndarray) -> None:
    """Each node's best head in ``s[:n, :n]`` (the first maximum, as np.argmax) into ``heads[:n]``."""
    for v in range(n):
        best, arg = -np.inf, 0
        for u in range(n):
            if s[u, v] > best:
                best, arg = s[u, v], u
        heads[v] = arg
    heads[root] = -1


@njit(cache=True)
def _first_cycle(heads: np.ndarray, n: int, root: int, state: np.ndarray, cycle: np.ndarray) -> int:
    """The cycle through the lowest-numbered node on any cycle of ``heads[:n]``, walked from that node, into
    ``cycle``; returns its length (0: none). ``state`` is scratch of length n."""
    state[:n] = 0  # 0 unseen, 1 on the walk now, 2 done, 3 on a cycle
    for v in range(n):
        u = v
        while u != root and state[u] == 0:  # walk up until the root, a node done, or this walk again
            state[u] = 1
            u = heads[u]
        if u != root and state[u] == 1:  # the walk closed on itself: u's cycle
            w = u
            while True:
                state[w] = 3
                w = heads[w]
                if w == u:
                    break
        u = v
        while u != root and state[u] == 1:
            state[u] = 2
            u = heads[u]
    start = -1
    for v in range(n):
        if state[v] == 3:
            start = v
            break
    if start < 0:
        return 0
    k, v = 0, start
    while True:
        cycle[k] = v
        k += 1
        v = heads[v]
        if v == start:
            return k


@njit(cache=True)
def _contract(s: np.ndarray, n: int, heads: np.ndarray, cycle: np.ndarray, k: int, root: int, s2: np.ndarray,
              rest: np.ndarray, best_v: np.ndarray, best_u: np.ndarray, in_cycle: np.ndarray) -> int:
    """``s[:n, :n]`` with the ``k`` nodes of ``cycle`` contracted into one node (the last) into ``s2``; ``rest``
    the other nodes, ``best_v[a]`` the cycle node outside node a best enters at, ``best_u[a]`` the cycle node
    that best heads it. Returns the root's index among ``rest``."""
    in_cycle[:n] = False
    for j in range(k):
        in_cycle[cycle[j]] = True
    c = 0
    root2 = 0
    for v in range(n):
        if not in_cycle[v]:
            if v == root:
                root2 = c
            rest[c] = v
            c += 1
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
    s2[c, c] = -np.inf
    return root2


@njit(cache=True)
def _arborescence(scores: np.ndarray, root: int, work: np.ndarray, heads_at: np.ndarray, cycle_at: np.ndarray,
                  lens: np.ndarray, rest_at: np.ndarray, v_at: np.ndarray, u_at: np.ndarray, roots: np.ndarray,
                  scratch: np.ndarray, out: np.ndarray) -> None:
    """Heads of the maximum arborescence of ``scores`` rooted at ``root`` into ``out``; the other arrays are
    scratch for every level of contraction (``work``: two score matrices, used in turn)."""
    n = scores.shape[0]
    s = scores
    size, level = n, 0
    while True:
        _greedy(s, size, root, heads_at[level])
        k = _first_cycle(heads_at[level], size, root, scratch[0], cycle_at[level])
        if k == 0:
            break
        s2 = work[level % 2]
        roots[level], lens[level] = root, k
        root = _contract(s, size, heads_at[level], cycle_at[level], k, root, s2, rest_at[level], v_at[level],
                         u_at[level], scratch[1])
        s, size, level = s2, size - k + 1, level + 1
    h2 = scratch[2]
    h2[:size] = heads_at[level][:size]
    for lv in range(level - 1, -1, -1):  # expand each contracted cycle, the last contracted first
        heads, cycle, rest = heads_at[lv], cycle_at[lv], rest_at[lv]
        k, root = lens[lv], roots[lv]
        outer = size + k - 1  # nodes at this level
        c = size - 1  # the contracted node's index one level down
        nxt = scratch[3]
        nxt[:outer] = heads[:outer]
        for a in range(c):
            v = rest[a]
            if v == root:
                continue
            nxt[v] = cycle[u_at[lv][a]] if h2[a] == c else rest[h2[a]]
        u = h2[c]  # the node the cycle hangs from, one level down
        nxt[cycle[v_at[lv][u]]] = rest[u]
        nxt[root] = -1
        h2[:outer] = nxt[:outer]
        size = outer
    out[:n] = h2[:n]


@njit(cache=True)
def chu_liu_edmonds_batch(scores: np.ndarray, root: int) -> np.ndarray:
    """Heads ``(G, n)`` of the maximum arborescences of ``G`` score matrices ``scores[g, head, dep]`` (float64,
    ``-inf`` where there is no arc) over the same words, rooted at ``root``; ``heads[g, root] = -1``."""
    g, n = scores.shape[0], scores.shape[1]
    out = np.empty((g, n), dtype=np.int64)
    if n == 0:
        return out
    work = np.empty((2, n, n))
    heads_at = np.empty((n, n), dtype=np.int64)  # per level of contraction: its greedy heads, its cycle, the
    cycle_at = np.empty((n, n), dtype=np.int64)  # nodes outside the cycle, and where each best enters and leaves it
    rest_at = np.empty((n, n), dtype=np.int64)
    v_at = np.empty((n, n), dtype=np.int64)
    u_at = np.empty((n, n), dtype=np.int64)
    lens, roots = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    scratch = np.empty((4, n), dtype=np.int64)
    for k in range(g):
        _arborescence(scores[k], root, work, heads_at, cycle_at, lens, rest_at, v_at, u_at, roots, scratch, out[k])
    return out


@njit(cache=True)
def prim_batch(weights: np.ndarray) -> np.ndarray:
    """Prim's maximum spanning tree of each of ``G`` symmetric ``(n, n)`` weight matrices -> ``(G, n-1, 2)``
    edges (parent, node) in the order they join the tree, grown from node 0; at each step the best node outside
    the tree joins, the leftmost on ties."""
    g, n = weights.shape[0], weights.shape[1]
    edges = np.zeros((g, max(n - 1, 0), 2), dtype=np.int64)
    in_tree = np.empty(n, dtype=np.bool_)
    best = np.empty(n)
    parent = np.empty(n, dtype=np.int64)
    for k in range(g):
        w = weights[k]
        for j in range(n):
            in_tree[j], best[j], parent[j] = j == 0, w[0, j], 0
        for step in range(n - 1):
            arg, top = -1, -np.inf
            for j in range(n):
                if not in_tree[j] and (arg < 0 or best[j] > top):
                    arg, top = j, best[j]
            edges[k, step, 0], edges[k, step, 1] = parent[arg], arg
            in_tree[arg] = True
            for j in range(n):
                if not in_tree[j] and w[arg, j] > best[j]:
                    best[j], parent[j] = w[arg, j], arg
    return edges
