"""Pruning curves: the readout's score as heads are removed a step (10%) at a time, in the order of gradient
importance recomputed after every step (Michel et al. 2019), of a given per-head ranking (attention
accuracy), or at random (several seeds)."""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import torch


def removed_counts(n_heads: int, step: float) -> list[int]:
    """Heads removed at each point of a curve: ``round(f · n)`` for f = 0, step, 2·step, ..., 1."""
    if not 0 < step <= 1:
        raise ValueError(f"importance.pruning_step={step} must be in (0, 1]")
    k = int(round(1 / step))
    return sorted({int(round(min(i * step, 1.0) * n_heads)) for i in range(k + 1)} | {0, n_heads})


def order_settings(order: Sequence[int], counts: Sequence[int], n_layers: int, n_heads: int) -> torch.Tensor:
    """``(len(counts), L, H)`` gates: setting i ablates the first ``counts[i]`` heads of ``order`` (flat
    indices ``layer · H + head``, the first removed first)."""
    out = torch.ones(len(counts), n_layers * n_heads)
    order = torch.as_tensor(list(order), dtype=torch.long)
    for i, c in enumerate(counts):
        out[i, order[:c]] = 0
    return out.view(len(counts), n_layers, n_heads)


def random_orders(n_total: int, seeds: Sequence[int]) -> list[np.ndarray]:
    return [np.random.default_rng(s).permutation(n_total) for s in seeds]


def gradient_order(importance_at: Callable[[torch.Tensor], np.ndarray], counts: Sequence[int], n_layers: int,
                   n_heads: int) -> list[int]:
    """The removal order of Michel et al.: at each step the gradient importance ``importance_at(gates)``
    ``(L, H)`` is recomputed with the heads removed so far gated off, and the least important remaining heads
    go next."""
    gates = torch.ones(n_layers, n_heads)
    order: list[int] = []
    for c in counts[1:]:
        imp = np.asarray(importance_at(gates), dtype=float).ravel().copy()
        imp[order] = np.inf
        imp[np.isnan(imp)] = -np.inf  # a layer with nothing left to lose: its remaining heads go first
        nxt = [int(i) for i in np.argsort(imp, kind="stable")[: c - len(order)]]
        order += nxt
        gates.view(-1)[nxt] = 0
    return order
