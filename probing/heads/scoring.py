"""Which word does each head pick as a word's head? Argmax predictions and fixed-offset baselines.

Conventions (Clark et al. 2019, section 4), all of them config keys written with the results:
words only (special positions dropped), the diagonal zeroed (a word never picks itself unless every
other weight is zero too), ties broken toward the leftmost word, ROOT never predicted.

- ``dep_to_head``: the dependent's most-attended word, the argmax of the dependent's row.
- ``head_to_dep``: the word that attends most to the dependent, the argmax of the dependent's column.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from probing.config import Direction


def as_ordered(words: np.ndarray) -> np.ndarray:
    """An integer view of non-negative float16 maps that orders exactly like the floats.

    For IEEE half floats >= 0 the bit patterns, read as int16, are monotone in the value, so an argmax
    over the int16 view is the argmax over the attention weights (ties included), without converting
    to float32 and with numpy's vectorised integer argmax.
    """
    if words.dtype == np.float16:
        return words.view(np.int16)
    return words


def zero_diagonal(maps: np.ndarray) -> np.ndarray:
    """Set ``maps[..., i, i] = 0`` in place (a word is not its own head); returns ``maps``."""
    n = maps.shape[-1]
    maps[..., np.arange(n), np.arange(n)] = 0
    return maps


def predict(maps: np.ndarray, direction: Direction) -> np.ndarray:
    """Predicted head of every word: ``(..., N, N)`` maps (diagonal already zeroed) -> ``(..., N)``.

    ``np.argmax`` returns the first maximum, so ties go to the leftmost word; zero padding at the end
    never wins over a real word.
    """
    if direction == Direction.dep_to_head:
        return maps.argmax(axis=-1)
    if direction == Direction.head_to_dep:
        # a contiguous transposed copy then a row argmax is several times faster than argmax(axis=-2)
        return np.ascontiguousarray(np.swapaxes(maps, -1, -2)).argmax(axis=-1)
    raise ValueError(f"unknown direction {direction!r}; expected one of {[d.value for d in Direction]}")


def pointers(maps: np.ndarray, n: np.ndarray, directions: Sequence[Direction], block_bytes: int = 4 * 2**20
             ) -> np.ndarray:
    """The word every head picks for every word: ``(B, L, H, N, N)`` padded maps, ``(B,)`` lengths ->
    ``(W, D, L*H)`` int16 positions over the W real words (sentence by sentence, left to right), D directions.

    ``maps`` is modified (its diagonal zeroed). Sentences are taken a few at a time (``block_bytes`` of maps)
    so that the transposed copy of ``head_to_dep`` stays in cache."""
    b, layers, heads, big_n, _ = maps.shape
    ordered = zero_diagonal(as_ordered(maps))
    valid = np.arange(big_n)[None, :] < n[:, None]  # (B, N)
    step = max(1, block_bytes // max(1, ordered[:1].nbytes))
    out = np.empty((int(valid.sum()), len(directions), layers * heads), dtype=np.int16)
    w = 0
    for s in range(0, b, step):
        blk, v = ordered[s:s + step], valid[s:s + step]
        k = int(v.sum())
        for j, d in enumerate(directions):
            pred = predict(blk, d)  # (b, L, H, N)
            out[w:w + k, j] = pred.reshape(len(blk), layers * heads, big_n).transpose(0, 2, 1)[v]
        w += k
    return out


def offset_correct(gold: np.ndarray, position: np.ndarray, length: np.ndarray, offsets: Sequence[int]
                   ) -> np.ndarray:
    """Hits of the fixed-offset baselines: word at ``position`` predicted to head ``position + offset``.

    ``(W,)`` gold heads (-1 root), positions and sentence lengths -> ``(W, K)`` bool. A prediction outside
    the sentence is wrong (so offset -1 of word 0 never matches the ROOT's -1).
    """
    off = np.asarray(offsets, dtype=np.int64)[None, :]
    pred = position[:, None] + off
    inside = (pred >= 0) & (pred < length[:, None])
    return inside & (pred == gold[:, None])
