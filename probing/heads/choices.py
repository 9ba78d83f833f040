"""Where the words of one sentence look, head by head: argmax choices, their text and their table.

Pure functions on one sentence's position-level maps ``(L, H, M, M)`` (``task=inspect`` runs the model).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd

from probing.corpus import Sentence


@dataclass(frozen=True)
class Choices:
    """Where the words of one sentence look. Arrays are ``(L, H, n)`` over query words.

    ``position``: the most-attended position over all ``M`` positions (specials included);
    ``weight``: its attention weight; ``word``: the most-attended *word* (specials excluded, as syntax
    is scored); ``gold``: ``word`` equals the gold head (None without a tree; always False for the root).
    """

    position: np.ndarray
    weight: np.ndarray
    word: np.ndarray
    gold: Optional[np.ndarray]


def head_choices(maps: np.ndarray, prefix: int, n: int, heads: Optional[Sequence[int]] = None) -> Choices:
    """Argmax choices of every head from position-level maps ``(L, H, M, M)`` (``prefix`` specials before
    the ``n`` words); ``heads`` is the gold tree (0-based, root -1) or None."""
    rows = np.asarray(maps, dtype=np.float32)[:, :, prefix:prefix + n, :]  # (L, H, n, M)
    position = rows.argmax(-1)
    weight = np.take_along_axis(rows, position[..., None], -1)[..., 0]
    word = rows[..., prefix:prefix + n].argmax(-1)
    gold = None if heads is None else word == np.asarray(heads)[None, None, :]  # the root (-1) never matches
    return Choices(position, weight, word, gold)


def position_labels(encoder: Any, words: Sequence[str]) -> tuple[list[str], int]:
    """A label for every position: the word, or the special token's text (``[CLS]``, ``[SEP]``, ``<s>``...)."""
    tok = encoder.tokenize([list(words)])[0]
    if isinstance(tok, str):
        raise ValueError(tok)
    pieces = encoder.tokenizer.convert_ids_to_tokens(tok.input_ids)
    labels: list[Optional[str]] = [None] * tok.n_positions
    for piece, pos in zip(pieces, tok.piece_position):
        if labels[pos] is None:
            labels[pos] = piece
    for i, w in enumerate(words):
        labels[tok.prefix + i] = w
    return [lab or "?" for lab in labels], tok.prefix


def format_choices(words: Sequence[str], labels: Sequence[str], prefix: int, ch: Choices, tag: str = "",
                   per_layer: bool = False) -> list[str]:
    """One line per layer and head: ``query->choice`` for each word; ``*`` marks a gold-head choice.

    When a special token wins, the most-attended word follows in parentheses: ``sat->[SEP](mat)``. ``tag``
    starts every line (the measure, so each measure's lines can be told apart); ``per_layer``: one map per
    layer, labelled ``L0 all`` rather than by head.
    """
    n_layers, n_heads, n = ch.word.shape
    lines = []
    for layer in range(n_layers):
        for head in range(n_heads):
            parts = []
            for q in range(n):
                pos = int(ch.position[layer, head, q])
                wd = int(ch.word[layer, head, q])
                mark = "*" if ch.gold is not None and ch.gold[layer, head, q] else ""
                if pos - prefix == wd:  # a word won
                    parts.append(f"{words[q]}->{words[wd]}{mark}")
                else:  # a special token won; the best word follows
                    parts.append(f"{words[q]}->{labels[pos]}({words[wd]}{mark})")
            score = ""
            if ch.gold is not None:
                score = f" gold {int(ch.gold[layer, head].sum())}/{n - 1}"
            name = f"L{layer:<2d} all" if per_layer else f"L{layer:<2d} H{head:<2d}"
            lines.append(f"{tag}{name}{score:>11s} | " + "  ".join(parts))
    return lines


def choices_table(index: int, sentence: Sentence, labels: Sequence[str], prefix: int, ch: Choices) -> pd.DataFrame:
    """Tidy rows: one per sentence x layer x head x query word."""
    n_layers, n_heads, n = ch.word.shape
    layer, head, query = np.meshgrid(np.arange(n_layers), np.arange(n_heads), np.arange(n), indexing="ij")
    words = np.asarray(sentence.words, dtype=object)
    lab = np.asarray(labels, dtype=object)
    df = pd.DataFrame({
        "sentence": index, "sentence_id": sentence.id,
        "layer": layer.ravel(), "head": head.ravel(), "query": query.ravel(), "query_word": words[query.ravel()],
        "choice_position": ch.position.ravel(), "choice_label": lab[ch.position.ravel()],
        "choice_weight": ch.weight.ravel(), "choice_is_special": (ch.position.ravel() < prefix)
        | (ch.position.ravel() >= prefix + n),
        "word_choice": ch.word.ravel(), "word_choice_word": words[ch.word.ravel()],
    })
    if sentence.heads is not None:
        df["gold_head"] = np.asarray(sentence.heads)[query.ravel()]
        df["is_gold"] = ch.gold.ravel()
    return df


def top_heads(ch: Choices, k: int) -> list[tuple[int, int, int]]:
    """The ``k`` heads whose word choices hit the gold head most often: ``(layer, head, hits)``."""
    if ch.gold is None:
        return []
    hits = ch.gold.sum(-1)  # (L, H)
    order = np.argsort(-hits, axis=None, kind="stable")[:k]
    return [(int(i // hits.shape[1]), int(i % hits.shape[1]), int(hits.flat[i])) for i in order]
