"""Structural probes (Hewitt and Manning 2019) in torch: a linear map ``B`` (``dim x rank``) under which

- the distance probe's squared distance ``||B(h_i - h_j)||^2`` fits the gold tree distance ``d(i, j)``,
  trained with L1 loss over all word pairs, each sentence's loss divided by its length squared;
- the depth probe's squared norm ``||B h_i||^2`` fits the gold depth, each sentence's L1 loss divided by
  its length.

The training regimen is theirs (structural-probes ``regimen.py``, ``probe.py``): ``B`` drawn uniformly
from [-0.05, 0.05], Adam at lr 0.001, batches of 20 sentences, the learning rate divided by 10 whenever
the dev loss does not fall (ReduceLROnPlateau, patience 0), at most 40 epochs, stopping once the dev loss
has not improved by 1e-4 for 5 epochs, and the parameters of the best dev epoch kept. Unlike theirs,
batches hold sentences of similar length (sorted, cut into batches, batch order shuffled each epoch by the
seed), which wastes little on padding. Same data and seed -> the same numbers (torch's CPU kernels are
deterministic at a fixed thread count).

Inputs are per-sentence word vectors ``(n_i, dim)`` with their gold heads (0-based, root -1).
"""

from __future__ import annotations

import copy
import logging
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import torch
from torch import nn

from probing.probes.structural.metrics import (
    Terms,
    dspr_terms,
    many,
    nspr_terms,
    padded_tree_depths,
    padded_tree_distances,
    ratio_of_groups,
    root_terms,
    uuas_terms,
)

log = logging.getLogger(__name__)

# torch threads while a probe trains. One: sweeps run jobs side by side, and threads spin-waiting beside other
# processes make an epoch about four times slower than one thread on 2 cores
MAX_THREADS = 1


@dataclass(frozen=True)
class Regimen:
    """Training settings; the defaults are Hewitt and Manning's. ``rank`` None: the full dimension."""

    rank: int | None = None
    seed: int = 0
    lr: float = 1e-3
    batch_size: int = 20
    max_epochs: int = 40
    patience: int = 5
    min_improvement: float = 1e-4
    init_scale: float = 0.05


@dataclass(frozen=True)
class Sentences:
    """Sentences of word vectors, flat: ``vectors`` ``(W, dim)`` float32, ``starts``/``lengths`` ``(S,)``
    (sentence s is rows ``starts[s]:starts[s]+lengths[s]``), gold ``heads`` ``(W,)`` per sentence (0-based
    within the sentence, -1 = root) and ``punct`` ``(W,)`` (true: left out of UUAS and root accuracy)."""

    vectors: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray
    heads: np.ndarray
    punct: np.ndarray

    @classmethod
    def from_lists(cls, vectors: Sequence[np.ndarray], heads: Sequence[Sequence[int]],
                   punct: Sequence[Sequence[bool]] | None = None) -> "Sentences":
        """From per-sentence ``(n_i, dim)`` vectors, heads and punctuation masks (None: no punctuation)."""
        lengths = np.array([len(h) for h in heads], dtype=np.int64)
        if len(vectors) == 0:
            raise ValueError("no sentences")
        if len(vectors) != len(heads) or any(len(v) != n for v, n in zip(vectors, lengths)):
            raise ValueError("every sentence needs one vector per word")
        flat = np.concatenate([np.asarray(v, dtype=np.float32) for v in vectors])
        marks = (np.zeros(int(lengths.sum()), dtype=bool) if punct is None else
                 np.concatenate([np.asarray(m, dtype=bool) for m in punct]))
        if len(marks) != len(flat):
            raise ValueError("every sentence needs one punctuation mark per word")
        return cls(flat, np.cumsum(lengths) - lengths, lengths,
                   np.concatenate([np.asarray(h, dtype=np.int64) for h in heads]), marks)

    def __len__(self) -> int:
        return len(self.lengths)

    def sentence_heads(self, s: int) -> np.ndarray:
        return self.heads[self.starts[s]:self.starts[s] + self.lengths[s]]

    def sentence_punct(self, s: int) -> np.ndarray:
        return self.punct[self.starts[s]:self.starts[s] + self.lengths[s]]


def pair_squared_distances(t: torch.Tensor, sq: torch.Tensor) -> torch.Tensor:
    """``||t_i - t_j||^2`` ``(b, n, n)`` from projected vectors ``t`` ``(b, n, rank)`` and their squared norms
    ``sq`` ``(b, n)``, before clamping: ``|a|^2 + |b|^2 - 2ab`` in one batched matmul instead of
    ``(b, n, n, rank)`` differences."""
    return torch.baddbmm(sq[:, :, None] + sq[:, None, :], t, t.transpose(1, 2), alpha=-2.0)


class _Projection(nn.Module):
    """The probes' one parameter, ``B`` (dim x rank), and the squared norms of projected word vectors."""

    def __init__(self, dim: int, rank: int):
        super().__init__()
        self.proj = nn.Parameter(torch.zeros(dim, rank))

    def _projected(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(B h, ||B h||^2)`` for ``x (b, n, dim)``."""
        t = x @ self.proj
        return t, (t * t).sum(-1)


class DistanceProbe(_Projection):
    """``||B(h_i - h_j)||^2`` for every word pair of each padded sentence: ``(b, n, dim)`` -> ``(b, n, n)``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return pair_squared_distances(*self._projected(x)).clamp_min(0.0)


class DepthProbe(_Projection):
    """``||B h_i||^2`` for every word of each padded sentence: ``(b, n, dim)`` -> ``(b, n)``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._projected(x)[1]


@dataclass
class _Batch:
    x: torch.Tensor  # (b, n, dim) float32 word vectors, 0 at padding
    mask: torch.Tensor  # (b, n) true at words
    lengths: torch.Tensor  # (b,)
    gold: torch.Tensor  # (b, n, n) distances or (b, n) depths, 0 at padding
    # what each word pair (distance) or word (depth) adds to the batch's loss per unit of L1 error:
    # 1 / (b len^2) or 1 / (b len) at words, 0 at padding
    weight: torch.Tensor
    sents: np.ndarray  # (b,) sentence indices


def _batches(data: Sentences, kind: str, batch_size: int) -> list[_Batch]:
    """Batches of sentences of similar length with their padded vectors, gold labels and loss weights, built
    once (the epochs then never gather word vectors again)."""
    order = np.argsort(data.lengths, kind="stable")
    fn = padded_tree_distances if kind == "distance" else padded_tree_depths
    out = []
    for lo in range(0, len(order), batch_size):
        sents = order[lo:lo + batch_size]
        lens = data.lengths[sents]
        n = int(lens.max())
        cols = np.arange(n)
        mask = cols[None, :] < lens[:, None]
        rows = np.where(mask, data.starts[sents][:, None] + cols[None, :], 0)
        x = np.where(mask[:, :, None], np.asarray(data.vectors[rows], dtype=np.float32), np.float32(0))
        gold = fn(np.where(mask, data.heads[rows], -1), lens).astype(np.float32)
        m = mask.astype(np.float32)
        weight = (m[:, :, None] * m[:, None, :] / (lens ** 2)[:, None, None] if kind == "distance"
                  else m / lens[:, None]) / len(sents)
        out.append(_Batch(torch.from_numpy(x), torch.from_numpy(mask), torch.from_numpy(lens),
                          torch.from_numpy(gold), torch.from_numpy(weight.astype(np.float32)), sents))
    return out


def l1_loss(pred: torch.Tensor, batch: _Batch) -> torch.Tensor:
    """Mean over the batch's sentences of the L1 error over words (depth) or word pairs (distance), each
    sentence's sum divided by its length (depth) or length squared (distance)."""
    return ((pred - batch.gold).abs() * batch.weight).sum()


def loss_and_grad(proj: torch.Tensor, batch: _Batch, kind: str) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`l1_loss` of the probe with map ``proj`` on ``batch`` and its gradient with respect to ``proj``,
    worked out by hand: the same numbers as autograd through :class:`DistanceProbe` / :class:`DepthProbe`
    (clamp and abs pass no gradient where their input is below 0 / is 0) in about half the operations, none
    of them recorded.

    With ``g = sign(pred - gold) * weight`` (zero where the clamp cut), ``S = g + g^T``, ``t = x B``:
    distance ``dL/dt = 2 (rowsum(S) t - S t)``; depth ``dL/dt = 2 g t``; and ``dL/dB = x^T dL/dt``."""
    with torch.no_grad():
        x = batch.x
        t = x @ proj
        sq = (t * t).sum(-1)
        if kind == "distance":
            raw = pair_squared_distances(t, sq)
            diff = raw.clamp_min(0.0) - batch.gold
            g = torch.sign(diff).mul_(batch.weight).mul_(raw >= 0)
            s = g + g.transpose(1, 2)
            dt = torch.baddbmm(s.sum(-1, keepdim=True) * t, s, t, alpha=-1.0).mul_(2.0)
        else:
            diff = sq - batch.gold
            g = torch.sign(diff).mul_(batch.weight)
            dt = (2.0 * g)[:, :, None] * t
        loss = (diff.abs_() * batch.weight).sum()
        grad = x.reshape(-1, x.shape[-1]).T @ dt.reshape(-1, dt.shape[-1])
    return loss, grad


@contextmanager
def bounded_threads(n: int | None = None) -> Iterator[None]:
    """At most ``n`` (None: :data:`MAX_THREADS`) torch threads inside the block; the previous count is restored
    after it."""
    before = torch.get_num_threads()
    torch.set_num_threads(max(1, min(before, MAX_THREADS if n is None else n)))
    try:
        yield
    finally:
        torch.set_num_threads(before)


class StructuralProbe:
    """A distance or depth probe with the training regimen of :class:`Regimen` (scikit-learn style:
    ``fit`` returns self; fitted ``probe_``, ``epochs_``, ``best_epoch_``, ``dev_loss_``, ``train_loss_``)."""

    def __init__(self, kind: str, regimen: Regimen):
        if kind not in ("distance", "depth"):
            raise ValueError(f"structural probe kind must be distance or depth, got {kind!r}")
        self.kind, self.regimen = kind, regimen

    def _make(self, dim: int) -> nn.Module:
        rank = dim if self.regimen.rank is None else int(self.regimen.rank)
        if rank < 1:
            raise ValueError(f"probe.rank must be at least 1, got {rank}")
        probe = (DistanceProbe if self.kind == "distance" else DepthProbe)(dim, rank)
        gen = torch.Generator().manual_seed(self.regimen.seed)
        with torch.no_grad():
            probe.proj.uniform_(-self.regimen.init_scale, self.regimen.init_scale, generator=gen)
        return probe

    def _loss(self, probe: nn.Module, batches: list[_Batch]) -> float:
        with torch.no_grad():
            total = sum(float(l1_loss(probe(b.x), b)) * len(b.sents) for b in batches)
        return total / max(1, sum(len(b.sents) for b in batches))

    def fit(self, train: Sentences, dev: Sentences) -> "StructuralProbe":
        """Train on ``train`` until ``dev``'s loss stops improving; keeps the best dev epoch's map."""
        r = self.regimen
        if len(train) == 0 or len(dev) == 0:
            raise ValueError("the structural probe needs train and dev sentences")
        with bounded_threads():
            tr, dv = _batches(train, self.kind, r.batch_size), _batches(dev, self.kind, r.batch_size)
            probe = self._make(train.vectors.shape[1])
            # fused: Adam's update in one kernel over B (unfused, the update takes about a fifth of a step)
            opt = torch.optim.Adam(probe.parameters(), lr=r.lr, fused=True)
            sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.1, patience=0)
            rng = np.random.default_rng(r.seed)
            best, best_state, best_epoch, self.train_loss_ = np.inf, None, -1, []
            for epoch in range(r.max_epochs):
                total = 0.0
                for k in rng.permutation(len(tr)):
                    loss, probe.proj.grad = loss_and_grad(probe.proj, tr[k], self.kind)
                    opt.step()
                    total += float(loss) * len(tr[k].sents)
                self.train_loss_.append(total / len(train))
                dev_loss = self._loss(probe, dv)
                sched.step(dev_loss)
                log.info("%s probe epoch %d: train loss %.4f, dev loss %.4f, lr %.0e", self.kind, epoch,
                         self.train_loss_[-1], dev_loss, opt.param_groups[0]["lr"])
                if dev_loss < best - r.min_improvement:
                    best, best_state, best_epoch = dev_loss, copy.deepcopy(probe.state_dict()), epoch
                elif best_epoch < epoch - (r.patience - 1):
                    break
            probe.load_state_dict(best_state)
        self.probe_, self.epochs_, self.best_epoch_, self.dev_loss_ = probe, epoch + 1, best_epoch, best
        return self

    def predict(self, data: Sentences) -> list[np.ndarray]:
        """Per sentence, in order: predicted distances ``(n, n)`` or depths ``(n,)`` (float64)."""
        out: list[np.ndarray] = [np.zeros(0)] * len(data)
        with bounded_threads(), torch.no_grad():
            for b in _batches(data, self.kind, self.regimen.batch_size):
                pred = self.probe_(b.x).numpy().astype(np.float64)
                for k, s in enumerate(b.sents):
                    m = int(b.lengths[k])
                    out[s] = pred[k, :m, :m] if self.kind == "distance" else pred[k, :m]
        return out


def score(kind: str, pred: Sequence[np.ndarray], data: Sentences) -> dict[str, float]:
    """The paper's metrics of predictions on ``data``: ``uuas`` and ``dspr`` (distance), ``root_accuracy``
    and ``nspr`` (depth)."""
    return score_by_length(kind, pred, data)[0]


def score_by_length(kind: str, pred: Sequence[np.ndarray], data: Sentences
                    ) -> tuple[dict[str, float], dict[int, float], dict[str, Terms]]:
    """:func:`score`, the DSpr (distance) or NSpr (depth) of every sentence length (the headline averages
    lengths 5-50), and each metric's per-sentence terms (for intervals over sentences), from one pass over
    the gold trees."""
    heads = [data.sentence_heads(s) for s in range(len(data))]
    punct = [data.sentence_punct(s) for s in range(len(data))]
    if kind == "distance":
        terms = {"uuas": uuas_terms(pred, heads, punct), "dspr": dspr_terms(pred, many(padded_tree_distances, heads))}
    else:
        terms = {"root_accuracy": root_terms(pred, heads, punct),
                 "nspr": nspr_terms(pred, many(padded_tree_depths, heads))}
    per = ratio_of_groups(terms["dspr" if kind == "distance" else "nspr"], every_group=True)
    return {k: ratio_of_groups(t) for k, t in terms.items()}, per, terms
