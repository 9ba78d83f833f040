"""Word pieces -> words: pooling of piece-level attention maps (pure tensor code).

Positions are the model's special tokens plus the words, in order ([CLS] w1 ... wn [SEP]).
A row of a map is where a *query* position looks; rows sum to 1 before and after pooling.
"""

from __future__ import annotations

import torch

POOLINGS = ("mean_sum", "first")


def pooling_matrices(piece_position: torch.Tensor, n_positions: int, pooling: str = "mean_sum"
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """Matrices ``F (B, M, T)`` and ``G (B, T, M)`` with word-level attention ``F @ A @ G``.

    ``piece_position (B, T)`` gives the position of every piece (-1 for padding). With ``mean_sum``
    (Clark et al. 2019) a position's row is the mean of its pieces' rows and its column the sum of its
    pieces' columns; with ``first`` both come from the position's first piece (rows renormalised later).
    """
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    valid = piece_position >= 0
    onehot = torch.nn.functional.one_hot(piece_position.clamp(min=0), n_positions).to(torch.float32)
    onehot = onehot * valid.unsqueeze(-1)  # (B, T, M)
    if pooling == "first":
        prev = torch.nn.functional.pad(piece_position, (1, 0), value=-2)[:, :-1]
        first = (piece_position != prev) & valid
        onehot = onehot * first.unsqueeze(-1)
        return onehot.transpose(1, 2), onehot
    counts = onehot.sum(1).clamp(min=1.0)  # (B, M)
    return (onehot / counts.unsqueeze(1)).transpose(1, 2), onehot


def pool_attention(attn: torch.Tensor, piece_position: torch.Tensor, n_positions: int,
                   pooling: str = "mean_sum") -> torch.Tensor:
    """Piece-level ``attn (B, L, H, T, T)`` -> position-level ``(B, L, H, M, M)`` in float32.

    Padding pieces must carry -1 in ``piece_position``; their rows and columns are dropped.
    """
    f, g = pooling_matrices(piece_position, n_positions, pooling)
    a = attn.to(torch.float32)
    out = torch.matmul(torch.matmul(f[:, None, None], a), g[:, None, None])
    if pooling == "first":
        out = out / out.sum(-1, keepdim=True).clamp(min=1e-12)
    return out


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


def pool_one(attn: torch.Tensor, word_ids: list, pooling: str = "mean_sum") -> torch.Tensor:
    """One unpadded sentence: ``(L, H, T, T)`` -> ``(L, H, M, M)``."""
    pos, m, _ = piece_positions(word_ids, attn.shape[-1])
    return pool_attention(attn[None], torch.tensor([pos]), m, pooling)[0]
