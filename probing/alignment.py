"""Word pieces -> words: pooling of piece-level attention maps and vectors (pure tensor code).

Positions are the model's special tokens plus the words, in order ([CLS] w1 ... wn [SEP]).
A row of a map is where a *query* position looks; rows sum to 1 before and after pooling.
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch

from probing.buffers import Buffers
from probing.config import Pooling


def _targets(piece_position: torch.Tensor, n_positions: int, pooling: Pooling
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """Each piece's target position ``(B, T)`` and whether it counts: dropped pieces (padding; non-first
    pieces under ``first``) go to a spare position ``n_positions``, cut at the end."""
    keep = piece_position >= 0
    if pooling is Pooling.first:
        prev = torch.nn.functional.pad(piece_position, (1, 0), value=-2)[:, :-1]
        keep = keep & (piece_position != prev)
    return torch.where(keep, piece_position, torch.full_like(piece_position, n_positions)), keep


def pool_attention(attn: "torch.Tensor | Sequence[torch.Tensor]", piece_position: torch.Tensor, n_positions: int,
                   pooling: Pooling, stochastic: bool = True, buffers: Optional[Buffers] = None) -> torch.Tensor:
    """Piece-level ``attn (B, L, H, T, T)`` (or its L layers, ``(B, H, T, T)`` each, as a model returns them:
    never stacked) -> position-level ``(B, L, H, M, M)`` in float32.

    ``piece_position (B, T)`` gives the position of every piece, -1 for padding (its rows and columns are
    dropped). ``mean_sum`` (Clark et al. 2019): a position's column is the sum of its pieces' columns and its
    row the mean of its pieces' rows. ``first``: both come from the position's first piece, rows renormalised
    unless ``stochastic`` is False (maps whose rows are not distributions, such as the ``norm`` measure's).
    Segment sums by scatter-add cost O(T^2) per map, where pooling matrices would cost O(M T^2) (no faster
    even at 30 pieces, slower above). ``buffers``: the temporaries and the result live in its slots (the
    result is then valid until the next call with the same buffers).
    """
    pooling = Pooling(pooling)  # a plain string from a notebook works too; anything else fails here
    layers = attn.unbind(1) if isinstance(attn, torch.Tensor) else list(attn)
    b, n_heads, t, _ = layers[0].shape
    idx, keep = _targets(piece_position, n_positions, pooling)
    m1 = n_positions + 1
    work = Buffers() if buffers is None else buffers
    device = layers[0].device
    cols = work.take("pool_cols", (b, n_heads, t, m1), device=device)  # a layer at a time: a sixth of the memory
    rows = work.take("pool_rows", (b, len(layers), n_heads, m1, m1), device=device).zero_()
    col_index = idx[:, None, None, :].expand(b, n_heads, t, t)
    row_index = idx[:, None, :, None].expand(b, n_heads, t, m1)
    for k, a in enumerate(layers):
        cols.zero_().scatter_add_(-1, col_index, a.to(torch.float32))
        rows[:, k].scatter_add_(-2, row_index, cols)
    out = rows[..., :n_positions, :n_positions]
    if pooling is Pooling.first:
        return out.div_(out.sum(-1, keepdim=True).clamp_(min=1e-12)) if stochastic else out
    counts = torch.zeros(b, m1, dtype=torch.float32, device=device)
    counts.scatter_add_(1, idx, keep.to(torch.float32))
    return out.div_(counts[:, None, None, :n_positions, None].clamp_(min=1.0))


def _membership(piece_position: torch.Tensor, n_positions: int, pooling: Pooling) -> torch.Tensor:
    """``(B, M, T)`` float32, 1 where piece t counts for position p (every piece under ``mean_sum``, the
    first under ``first``; padding never)."""
    idx, keep = _targets(piece_position, n_positions, pooling)
    slots = torch.arange(n_positions, device=piece_position.device)
    return ((idx[:, None, :] == slots[None, :, None]) & keep[:, None, :]).to(torch.float32)


def pooling_matrix(piece_position: torch.Tensor, n_positions: int, pooling: Pooling) -> torch.Tensor:
    """``(B, M, T)`` float32: row p holds the weights of position p's pieces (``1/n`` for each of its n pieces
    under ``mean_sum``; 1 for its first piece under ``first``), 0 for padding."""
    member = _membership(piece_position, n_positions, Pooling(pooling))
    return member / member.sum(-1, keepdim=True).clamp(min=1.0)


def pool_layers(layers: Sequence[torch.Tensor], piece_position: torch.Tensor, n_positions: int,
                pooling: Pooling, dtype: torch.dtype, heads: int = 1, buffers: Optional[Buffers] = None
                ) -> torch.Tensor:
    """Piece vectors, K tensors ``(B, T, W)`` (one per layer, as a model hands them out) -> position vectors
    ``(B, K, M, W)``, or ``(B, K, heads, M, W/heads)`` when ``heads`` > 1 (the heads' context vectors,
    concatenated in ``W``), in ``dtype``. ``mean_sum``: a position's vector is the mean of its pieces' vectors
    (the side of attention that is averaged, the attending word's); ``first``: its first piece's. Padding
    (position -1) is dropped, as in :func:`pool_attention`; special tokens keep their own positions. Each
    layer is pooled by one batched matrix product (:func:`pooling_matrix`) straight into the output, never
    stacked at piece level. ``buffers``: the result lives in its slot (valid until the next call)."""
    b, t = piece_position.shape
    width = layers[0].shape[-1]
    weights = pooling_matrix(piece_position, n_positions, pooling)
    work = Buffers() if buffers is None else buffers
    out = work.take("pool_vectors", (b, len(layers), heads, n_positions, width // heads), dtype, weights.device)
    for k, x in enumerate(layers):
        pooled = torch.bmm(weights, x.to(torch.float32))  # (B, M, W)
        out[:, k] = pooled.view(b, n_positions, heads, width // heads).transpose(1, 2)
    return out if heads > 1 else out[:, :, 0]


def piece_positions(word_ids: list, n_tokens: int) -> tuple[list[int], int, int]:
    """Map a tokenizer's ``word_ids()`` to positions: each special token its own, each word one.

    Returns (position of each piece, number of positions, number of special positions before word 0).
    """
    pos: list[int] = []
    current = -1
    last_word = None
    prefix = 0
    seen_word = False
    for t in range(n_tokens):
        w = word_ids[t]
        if w is None:
            current += 1
            last_word = None
            if not seen_word:
                prefix += 1
        elif w != last_word:
            current += 1
            last_word = w
            seen_word = True
        pos.append(current)
    return pos, current + 1, prefix


def pool_one(attn: torch.Tensor, word_ids: list, pooling: Pooling) -> torch.Tensor:
    """One unpadded sentence: ``(L, H, T, T)`` -> ``(L, H, M, M)``."""
    pos, m, _ = piece_positions(word_ids, attn.shape[-1])
    return pool_attention(attn[None], torch.tensor([pos]), m, pooling)[0]
