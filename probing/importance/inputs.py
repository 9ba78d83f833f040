"""Evaluation sentences as padded model batches, and word vectors pooled from word pieces by the same rule as
extraction (``mean_sum``: the mean of a word's pieces; ``first``: its first piece)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from probing.alignment import pooling_matrix
from probing.config import Pooling
from probing.corpus import Corpus
from probing.encoder import Encoder, Tokenized, length_batches
from probing.errors import ProbingError


@dataclass(frozen=True)
class Batch:
    """``B`` sentences padded to ``T`` pieces: ``inputs`` (model inputs on the encoder's device),
    ``piece_position (B, T)`` (position of every piece, -1 for padding), ``sentences (B,)`` (corpus indices),
    ``prefix (B,)`` (special positions before word 0) and ``n_words (B,)``; ``n_positions`` is the most
    positions of any sentence (``M``)."""

    inputs: dict
    piece_position: torch.Tensor
    sentences: np.ndarray
    prefix: np.ndarray
    n_words: np.ndarray
    n_positions: int

    @property
    def size(self) -> int:
        return len(self.sentences)


def make_batches(encoder: Encoder, corpus: Corpus, batch_size: int, max_tokens: int) -> list[Batch]:
    """Length-sorted batches of every sentence of ``corpus`` (capped by sentence count and padded pieces);
    a sentence the model cannot take (too long) is one :class:`ProbingError` line naming it."""
    toks = encoder.tokenize([s.words for s in corpus])
    for i, t in enumerate(toks):
        if isinstance(t, str):
            raise ProbingError(f"{corpus.name} {corpus.split} sentence {corpus[i].id}: {t}")
    order = sorted(range(len(toks)), key=lambda i: len(toks[i].input_ids))
    groups = length_batches([len(toks[i].input_ids) for i in order], batch_size, max_tokens)
    return [_batch(encoder, corpus, toks, [order[j] for j in group]) for group in groups]


def _batch(encoder: Encoder, corpus: Corpus, toks: Sequence[Tokenized], group: list[int]) -> Batch:
    t = max(len(toks[i].input_ids) for i in group)
    ids = torch.full((len(group), t), encoder.pad_id, dtype=torch.long)
    mask = torch.zeros((len(group), t), dtype=torch.long)
    pos = torch.full((len(group), t), -1, dtype=torch.long)
    for b, i in enumerate(group):
        n = len(toks[i].input_ids)
        ids[b, :n] = torch.tensor(toks[i].input_ids)
        mask[b, :n] = 1
        pos[b, :n] = torch.tensor(toks[i].piece_position)
    dev = encoder.device
    return Batch({"input_ids": ids.to(dev), "attention_mask": mask.to(dev)}, pos.to(dev), np.array(group),
                 np.array([toks[i].prefix for i in group]), np.array([len(corpus[i]) for i in group]),
                 max(toks[i].n_positions for i in group))


def position_vectors(hidden: torch.Tensor, piece_position: torch.Tensor, n_positions: int,
                     pooling: Pooling) -> torch.Tensor:
    """``hidden (R·B, T, D)`` (``R`` replicas of a batch, replica-major) -> ``(R·B, M, D)`` position vectors:
    the mean of each position's pieces (``mean_sum``) or its first piece (``first``), in ``hidden``'s dtype
    (differentiable: the gradient readouts pool through it)."""
    rb, t, d = hidden.shape
    b = piece_position.shape[0]
    weights = pooling_matrix(piece_position, n_positions, pooling).to(hidden.dtype)  # (B, M, T)
    return torch.matmul(weights, hidden.view(rb // b, b, t, d)).reshape(rb, n_positions, d)


def sentence_embeddings(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``(R·B, T, D)`` -> ``(R·B, D)``: the mean over every real position, special tokens included (how
    sentence-transformers pools all-MiniLM-L6-v2)."""
    b = mask.shape[0]
    m = mask.to(hidden.dtype).repeat(hidden.shape[0] // b, 1)[..., None]
    return (hidden * m).sum(1) / m.sum(1)
