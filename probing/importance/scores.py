"""Gated passes over the evaluation batches: the readout's per-sentence sums for many gate settings at once
(:func:`evaluate`), and per-sentence gate gradients (:func:`gradients`, Michel et al. 2019).

A gate setting is an ``(L, H)`` array of gates (1 keeps a head, 0 ablates it). Settings are grouped by their
lowest gated layer k and run ``replicas`` at a time from a cache of the clean pass (layers below k and the
attention weights of layer k computed once per batch), so ablating each of 72 heads costs well under 72 passes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np
import torch

from probing.importance.inputs import Batch
from probing.importance.readouts import Readout
from probing.interventions.gates import LayerCache, frozen, gated


@dataclass(frozen=True)
class Sums:
    """Per-sentence sums over the evaluation batches (sentences in batch order, ``sentences (S,)`` their
    corpus indices): the unablated ``clean_hits``/``clean_loss``/``n`` ``(S, G)`` and, for each of ``A`` gate
    settings, ``hits``/``loss`` ``(A, S, G)``."""

    sentences: np.ndarray
    n: np.ndarray
    clean_hits: np.ndarray
    clean_loss: np.ndarray
    hits: np.ndarray
    loss: np.ndarray


def first_gated_layer(settings: torch.Tensor) -> torch.Tensor:
    """``(A, L, H)`` -> ``(A,)``: the lowest layer with a gate that is not 1 (``L`` when none is)."""
    off = (settings != 1).any(-1)  # (A, L)
    n_layers = settings.shape[1]
    return torch.where(off.any(-1), off.float().argmax(-1), torch.full_like(off[:, 0], n_layers, dtype=torch.long))


def evaluate(model: torch.nn.Module, batches: Sequence[Batch], readout: Readout, settings: torch.Tensor,
             mean: Optional[torch.Tensor], replicas: int, reuse: bool = True) -> Sums:
    """The readout's sums for every gate setting of ``settings (A, L, H)`` (``mean (L, H, d)``: mean
    ablation; None: zero). ``reuse=False`` runs every setting from the embeddings (the slow reference)."""
    a = settings.shape[0]
    starts = first_gated_layer(settings)
    out: dict[str, list] = {k: [] for k in ("n", "ch", "cl", "h", "l")}
    for batch in batches:
        cache = LayerCache(model, batch.inputs)
        clean = readout.stats(cache.output, batch, cache.output)
        hits = clean.hits.expand(a, -1, -1).clone()
        loss = clean.loss.expand(a, -1, -1).clone()
        for k in torch.unique(starts).tolist():
            if k == settings.shape[1]:
                continue  # nothing gated: the clean pass
            idx = torch.nonzero(starts == k)[:, 0]
            for chunk in idx.split(replicas):
                g = settings[chunk].to(cache.output.device)
                with gated(model, g, mean):
                    if reuse:
                        hidden = cache.run_from(k, len(chunk))
                    else:
                        with torch.inference_mode():
                            rep = {key: v.repeat(len(chunk), 1) for key, v in batch.inputs.items()}
                            hidden = model(**rep).last_hidden_state
                st = readout.stats(hidden, batch, cache.output)
                hits[chunk.to(hits.device)], loss[chunk.to(loss.device)] = st.hits, st.loss
        out["n"].append(clean.n.cpu())
        out["ch"].append(clean.hits[0].cpu())
        out["cl"].append(clean.loss[0].cpu())
        out["h"].append(hits.cpu())
        out["l"].append(loss.cpu())
    cat0 = lambda xs: torch.cat(xs, 0).double().numpy()  # noqa: E731
    cat1 = lambda xs: torch.cat(xs, 1).double().numpy()  # noqa: E731
    return Sums(np.concatenate([b.sentences for b in batches]), cat0(out["n"]), cat0(out["ch"]), cat0(out["cl"]),
                cat1(out["h"]), cat1(out["l"]))


def evaluate_refitted(model: torch.nn.Module, batches: Sequence[Batch], fit: Callable[[], Readout],
                      settings: torch.Tensor, mean: Optional[torch.Tensor], replicas: int) -> Sums:
    """As :func:`evaluate`, but each setting is scored by a readout refitted with its gates on: ``fit()`` runs
    inside :func:`gated` (its training passes see the ablated model) and the refitted readout scores that
    setting alone. Settings that repeat (every curve's first and last point) are fitted once. The ``clean_*``
    sums are those of the all-ones setting's refit (the readout as fitted on the unablated model)."""
    flat = settings.flatten(1)
    uniq, inverse = torch.unique(flat, dim=0, return_inverse=True)
    parts = []
    device = next(model.parameters()).device
    for u in uniq:
        g = u.view(1, *settings.shape[1:])
        with gated(model, g.to(device), mean):
            readout = fit()
        parts.append(evaluate(model, batches, readout, g, mean, replicas))
    idx = inverse.numpy()
    clean = next((parts[i] for i, u in enumerate(uniq) if bool((u == 1).all())), parts[0])
    return Sums(clean.sentences, clean.n, clean.clean_hits, clean.clean_loss,
                np.concatenate([q.hits for q in parts])[idx], np.concatenate([q.loss for q in parts])[idx])


def gradients(model: torch.nn.Module, batches: Sequence[Batch], readout: Readout, mean: Optional[torch.Tensor],
              base: torch.Tensor) -> np.ndarray:
    """``(S, L, H)``: ``|∂L_s/∂ξ_h|`` per sentence s (batch order) at the gates ``base (L, H)``, from one
    forward and backward pass per batch: every sentence gets its own copy of the gates (a replica of one)."""
    out = []
    with frozen(model), torch.enable_grad():
        for batch in batches:
            xi = base.to(batch.piece_position.device).expand(batch.size, -1, -1).clone().requires_grad_(True)
            with gated(model, xi, mean):
                hidden = model(**batch.inputs).last_hidden_state
            (grad,) = torch.autograd.grad(readout.loss(hidden, batch).sum(), xi)
            out.append(grad.abs().cpu())
    return torch.cat(out).double().numpy()
