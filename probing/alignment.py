"""Word pieces -> words: pooling of piece-level attention maps and vectors (pure tensor code).

Positions are the model's special tokens plus the words, in order ([CLS] w1 ... wn [SEP]).
A row of a map is where a *query* position looks; rows sum to 1 before and after pooling.
"""

from __future__ import annotations

import torch

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


def pool_attention(attn: torch.Tensor, piece_position: torch.Tensor, n_positions: int,
                   pooling: Pooling, stochastic: bool = True) -> torch.Tensor:
    """Piece-level ``attn (B, L, H, T, T)`` -> position-level ``(B, L, H, M, M)`` in float32.

    ``piece_position (B, T)`` gives the position of every piece, -1 for padding (its rows and columns are
    dropped). ``mean_sum`` (Clark et al. 2019): a position's column is the sum of its pieces' columns and its
    row the mean of its pieces' rows. ``first``: both come from the position's first piece, rows renormalised
    unless ``stochastic`` is False (maps whose rows are not distributions, such as the ``norm`` measure's).
    Segment sums by scatter-add cost O(T^2) per map, where pooling matrices would cost O(M T^2).
    """
    pooling = Pooling(pooling)  # a plain string from a notebook works too; anything else fails here
    b, n_layers, n_heads, t, _ = attn.shape
    idx, keep = _targets(piece_position, n_positions, pooling)
    a = attn.to(torch.float32)
    m1 = n_positions + 1
    cols = torch.zeros(b, n_layers, n_heads, t, m1, dtype=torch.float32, device=a.device)
    cols.scatter_add_(-1, idx[:, None, None, None, :].expand(b, n_layers, n_heads, t, t), a)
    rows = torch.zeros(b, n_layers, n_heads, m1, m1, dtype=torch.float32, device=a.device)
    rows.scatter_add_(-2, idx[:, None, None, :, None].expand(b, n_layers, n_heads, t, m1), cols)
    out = rows[..., :n_positions, :n_positions]
    if pooling is Pooling.first:
        return out / out.sum(-1, keepdim=True).clamp(min=1e-12) if stochastic else out
    counts = torch.zeros(b, m1, dtype=torch.float32, device=a.device)
    counts.scatter_add_(1, idx, keep.to(torch.float32))
    return out / counts[:, None, None, :n_positions, None].clamp(min=1.0)


def pool_vectors(x: torch.Tensor, piece_position: torch.Tensor, n_positions: int, pooling: Pooling
                 ) -> torch.Tensor:
    """Piece vectors ``x (B, ..., T, D)`` -> position vectors ``(B, ..., M, D)`` in float32.

    ``mean_sum``: a position's vector is the mean of its pieces' vectors (the side of attention that is
    averaged, the attending word's); ``first``: its first piece's. Padding (position -1) is dropped, as in
    :func:`pool_attention`; special tokens keep their own positions.
    """
    pooling = Pooling(pooling)
    b, t = piece_position.shape
    idx, keep = _targets(piece_position, n_positions, pooling)
    a = x.to(torch.float32)
    mid, d = a.shape[1:-2], a.shape[-1]
    flat = a.reshape(b, -1, t, d)  # (B, K, T, D)
    out = torch.zeros(b, flat.shape[1], n_positions + 1, d, dtype=torch.float32, device=a.device)
    out.scatter_add_(2, idx[:, None, :, None].expand_as(flat), flat)
    counts = torch.zeros(b, n_positions + 1, dtype=torch.float32, device=a.device)
    counts.scatter_add_(1, idx, keep.to(torch.float32))
    out = out[:, :, :n_positions] / counts[:, None, :n_positions, None].clamp(min=1.0)
    return out.reshape(b, *mid, n_positions, d)


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
