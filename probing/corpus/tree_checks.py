"""Checks on dependency trees given as 0-based head lists (root = -1)."""

from __future__ import annotations

from typing import Optional, Sequence


def tree_problem(heads: Sequence[int]) -> Optional[str]:
    """Return why ``heads`` is not a tree (no root, two roots, a cycle, a self-loop), or None."""
    n = len(heads)
    roots = [i for i, h in enumerate(heads) if h == -1]
    if not roots:
        return "no root (no word has head 0)"
    if len(roots) > 1:
        return f"{len(roots)} roots (words {', '.join(str(r + 1) for r in roots)} have head 0)"
    for i, h in enumerate(heads):
        if h == i:
            return f"word {i + 1} is its own head"
    # every word must reach the root within n steps
    state = [0] * n  # 0 unknown, 1 on current path, 2 reaches root
    for start in range(n):
        path = []
        i = start
        while i != -1 and state[i] == 0:
            state[i] = 1
            path.append(i)
            i = heads[i]
        if i != -1 and state[i] == 1:
            cycle = path[path.index(i):]
            return "cycle through words " + " -> ".join(str(c + 1) for c in cycle + [i])
        for j in path:
            state[j] = 2
    return None
