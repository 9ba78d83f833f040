"""What a patch is scored by, per pair, from the last hidden state: a metric that is positive where the model
(or the probe) sides with the clean sentence.

Each readout gives ``(R, S, B)``: replicas, readouts (one a probe's training seed; 1 for a model's logits) and
pairs.

- :class:`LogitDiff` (decoders): the causal-LM head's logit of the good word minus that of the bad one (their first
  pieces) at the read piece, ``h · (W_good − W_bad)`` (plus the biases' difference).
- :class:`ProbeDiff` (encoders without an LM head): a frozen logistic-regression probe's log-odds of the clean
  side's label at the masked target word (the mean of its pieces), trained on pairs held out from the scored
  ones (:func:`fit_probe`); signed per pair so that the clean label is positive.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression

from probing.patching.batches import PairBatch


def read_vectors(hidden: torch.Tensor, batch: PairBatch) -> torch.Tensor:
    """``hidden (R·B, T, D)`` -> ``(R, B, D)``: the read word's vector in every replica."""
    b = batch.size
    rb, t, d = hidden.shape
    return torch.einsum("bt,rbtd->rbd", batch.read.to(hidden.dtype), hidden.view(rb // b, b, t, d))


class LogitDiff:
    """``logit(good) − logit(bad)`` at the read piece (module docstring)."""

    def __init__(self, head: torch.nn.Module):
        self.weight = head.weight.detach()
        bias = getattr(head, "bias", None)
        self.bias = None if bias is None else bias.detach()

    def __call__(self, hidden: torch.Tensor, batch: PairBatch) -> torch.Tensor:
        """``(R, 1, B)`` metrics (differentiable in ``hidden``)."""
        h = read_vectors(hidden, batch).float()
        w = (self.weight[batch.good] - self.weight[batch.bad]).float()  # (B, D)
        m = (h * w[None]).sum(-1)
        if self.bias is not None:
            m = m + (self.bias[batch.good] - self.bias[batch.bad]).float()[None]
        return m[:, None]


@dataclass(frozen=True)
class ProbeDiff:
    """The probes' signed log-odds (module docstring), one probe a training seed: ``weight (S, D)``, ``bias (S,)``,
    and ``sign (S, N)`` per pair (+1 where the clean label is that probe's positive class), indexed by
    :attr:`PairBatch.pairs`."""

    weight: torch.Tensor
    bias: torch.Tensor
    sign: torch.Tensor

    def __call__(self, hidden: torch.Tensor, batch: PairBatch) -> torch.Tensor:
        """``(R, S, B)`` metrics (differentiable in ``hidden``)."""
        h = read_vectors(hidden, batch).float()  # (R, B, D)
        logit = torch.einsum("rbd,sd->rsb", h, self.weight.to(h.device)) + self.bias.to(h.device)[None, :, None]
        return logit * self.sign.to(h.device)[:, torch.as_tensor(batch.pairs, device=h.device)][None]


def fit_probe(vectors: np.ndarray, labels: Sequence[str], C: float, max_iter: int, seed: int
              ) -> tuple[np.ndarray, float, str]:
    """A binary logistic regression on read-word vectors ``(N, D)``: its weights, bias and positive class (the
    second of the two labels in sorted order); fewer or more than two labels is a ``ValueError``."""
    classes = sorted(set(labels))
    if len(classes) != 2:
        raise ValueError(f"a probe readout needs pairs of two labels, got {classes}")
    y = (np.asarray(labels) == classes[1]).astype(int)
    model = LogisticRegression(C=C, max_iter=max_iter, random_state=seed).fit(vectors, y)
    return model.coef_[0].astype(np.float32), float(model.intercept_[0]), classes[1]


def side_vectors(model: torch.nn.Module, batches: Sequence[PairBatch]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Read-word vectors of both sides of every pair, ``(2N, D)``, their pair indices and sides (0 clean,
    1 corrupt)."""
    out, idx, side = [], [], []
    with torch.inference_mode():
        for batch in batches:
            for s, inputs in enumerate((batch.clean, batch.corrupt)):
                hidden = model(**inputs).last_hidden_state
                out.append(read_vectors(hidden, batch)[0].float().cpu().numpy())
                idx.append(batch.pairs)
                side.append(np.full(batch.size, s))
    return np.concatenate(out), np.concatenate(idx), np.concatenate(side)
