"""Patches: a head's output copied from another run (activation patching), and the gradient of a readout with
respect to every head's output (attribution patching).

A head's output is its context vector through its slice of the layer's output projection; since that projection
is linear, replacing the head's slice of the projection's input replaces its output. The same forward pre-hook as
the gates (:mod:`probing.interventions.gates`) does it, so every family with an entry works. Patches run
replicated, as ablations do: the model sees the batch repeated ``R`` times (replica-major) and replica r patches
the heads ``gates[r]`` marks with 0 at the positions ``positions[r]`` marks with 1. A :class:`LayerCache` of the
clean run then starts each replicated pass at the lowest patched layer.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Optional, Sequence

import torch
from torch import nn

from probing.interventions.gates import hooked, num_heads
from probing.mixing.families import block_parts


def _patch(x: torch.Tensor, gate: torch.Tensor, positions: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
    """``x (R·B, T, D)`` context vectors, ``gate (R, H)`` (0: patch the head), ``positions (R, B, T)`` (1: patch
    there), ``source (B, T, D)`` -> ``x`` with the marked slices taken from ``source``."""
    r, h = gate.shape
    rb, t, d = x.shape
    xs = x.view(r, rb // r, t, h, d // h)
    w = (1 - gate.to(x.dtype))[:, None, None, :] * positions.to(x.dtype)[..., None]  # (R, B, T, H)
    src = source.to(x.dtype).view(1, rb // r, t, h, d // h)
    return (xs + w[..., None] * (src - xs)).reshape(rb, t, d)


@contextmanager
def patched(model: nn.Module, source: Sequence[torch.Tensor], gates: torch.Tensor, positions: torch.Tensor
            ) -> Iterator[None]:
    """Patch heads inside the block: ``source`` holds each layer's context vectors ``(B, T, D)`` from the run
    patched in (:attr:`LayerCache.context` of it), ``gates (R, L, H)`` marks with 0 what replica r patches,
    ``positions (R, B, T)`` where. A layer whose gates are all 1 is left alone. Hooks are removed on exit."""
    parts = block_parts(model, "heads")
    if gates.dim() != 3 or gates.shape[1:] != (len(parts), num_heads(model)):
        raise ValueError(f"patch gates of shape {tuple(gates.shape)}: expected (replicas, {len(parts)}, "
                         f"{num_heads(model)})")
    if positions.dim() != 3 or positions.shape[0] != gates.shape[0]:
        raise ValueError(f"patch positions of shape {tuple(positions.shape)}: expected ({gates.shape[0]}, B, T)")
    idle = {k for k in range(len(parts)) if bool((gates[:, k] == 1).all())}

    def pre(k: int, module: nn.Module, args: tuple) -> Optional[tuple]:
        if k in idle:
            return None
        return (_patch(args[0], gates[:, k], positions, source[k]),) + tuple(args[1:])

    with hooked(parts, pre):
        yield


@dataclass
class ContextProbe:
    """One layer's context vectors ``clean (B, T, D)`` as the pass saw them, and a zero added to them that
    requires a gradient: a readout's gradient with respect to ``zero`` is its gradient with respect to them."""

    clean: torch.Tensor
    zero: torch.Tensor


@contextmanager
def context_probes(model: nn.Module) -> Iterator[list]:
    """Inside the block every layer's output projection sees its input plus a zero that requires a gradient;
    the yielded list holds one :class:`ContextProbe` a layer, in layer order, once the pass has run."""
    parts = block_parts(model, "heads")
    probes: list[Optional[ContextProbe]] = [None] * len(parts)

    def pre(k: int, module: nn.Module, args: tuple) -> tuple:
        z = torch.zeros_like(args[0]).requires_grad_(True)
        probes[k] = ContextProbe(args[0].detach(), z)
        return (args[0] + z,) + tuple(args[1:])

    with hooked(parts, pre):
        yield probes
