"""Which heads link two words of one sentence, and each head's strongest links.

Pure functions on one sentence's position-level maps ``(L, H, M, M)`` read at word level (the ``n`` word
positions after ``prefix`` specials, as :mod:`probing.heads.choices` reads them), vectorised over heads.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import pandas as pd

PAIR_TOP = 5  # heads printed per measure for ``inspect.pair``
LINKS_TOP = 3  # word pairs printed per head in the strongest-links summary


@dataclass(frozen=True)
class WordPair:
    """Two word positions of a sentence (``a``, ``b``) and, for a repeated word, which occurrence is used."""

    a: int
    b: int
    notes: tuple[str, ...] = ()


def _occurrences(words: Sequence[str], word: str) -> list[int]:
    """Where ``word`` occurs in ``words``, any case."""
    key = word.lower()
    return [i for i, w in enumerate(words) if w.lower() == key]


def find_pair(words: Sequence[str], pair: Sequence[str]) -> WordPair | str:
    """The first occurrence of each word of ``pair`` (the first two for a word named twice), any case, with a
    note naming the occurrence taken when a word repeats; or one line naming the word the sentence lacks."""
    first, second = pair
    listing = f"(words: {', '.join(words)})"
    found = {w.lower(): _occurrences(words, w) for w in pair}
    for word in pair:
        if not found[word.lower()]:
            return f"{word!r} is not in the sentence {listing}"
    same = first.lower() == second.lower()
    if same and len(found[first.lower()]) < 2:
        return f"{first!r} occurs once in the sentence: naming it twice needs two occurrences {listing}"
    a = found[first.lower()][0]
    b = found[second.lower()][1 if same else 0]
    notes = []
    for word, used in ((first, (a, b)),) if same else ((first, (a,)), (second, (b,))):
        at = found[word.lower()]
        if len(at) > 1:
            notes.append(f"{word!r} occurs {len(at)} times (words {', '.join(f'#{i}' for i in at)}): "
                         f"{' and '.join(f'#{i}' for i in used)} {'is' if len(used) == 1 else 'are'} used")
    return WordPair(a, b, tuple(notes))


def word_level(maps: np.ndarray, prefix: int, n: int) -> np.ndarray:
    """The word-by-word block ``(L, H, n, n)`` of position-level maps."""
    return np.asarray(maps, dtype=np.float32)[:, :, prefix:prefix + n, prefix:prefix + n]


def offset_mean(words_maps: np.ndarray, offset: int) -> np.ndarray:
    """``(L, H)``: each head's mean weight from a word to the word ``offset`` places away, over the words that
    have one (the positional expectation of a link at that offset; NaN where none has)."""
    w = np.asarray(words_maps, dtype=np.float32)
    n = w.shape[-1]
    q = np.arange(max(0, -offset), min(n, n - offset))
    return w[:, :, q, q + offset].mean(-1) if len(q) else np.full(w.shape[:2], np.nan, dtype=np.float32)


def rank_pair(words_maps: np.ndarray, a: int, b: int) -> pd.DataFrame:
    """Every head ranked by the weight linking words ``a`` and ``b`` (the larger of a->b and b->a), over
    word-level maps ``(L, H, n, n)``: one row per head with both weights and the rank of ``b`` among ``a``'s
    targets (and of ``a`` among ``b``'s; 1 = most attended, self included), best first. Beside them, the
    positional expectation: the head's mean weight at the same offset over the sentence's words
    (``positional_ab``, ``positional_ba``), and ``excess``, the larger of the two weights' excess over it, with
    its rank (``rank_excess``): a previous-word head links any neighbours, so its link says little about
    this pair."""
    w = np.asarray(words_maps, dtype=np.float32)
    n_layers, n_heads = w.shape[:2]
    ab, ba = w[:, :, a, b], w[:, :, b, a]
    rank_b = 1 + (w[:, :, a, :] > ab[..., None]).sum(-1)
    rank_a = 1 + (w[:, :, b, :] > ba[..., None]).sum(-1)
    link = np.maximum(ab, ba)
    pos_ab, pos_ba = offset_mean(w, b - a), offset_mean(w, a - b)
    excess = np.maximum(ab - pos_ab, ba - pos_ba)
    layer, head = np.meshgrid(np.arange(n_layers), np.arange(n_heads), indexing="ij")
    df = pd.DataFrame({"layer": layer.ravel(), "head": head.ravel(), "weight_ab": ab.ravel(),
                       "weight_ba": ba.ravel(), "link": link.ravel(), "rank_b_in_a": rank_b.ravel(),
                       "rank_a_in_b": rank_a.ravel(), "positional_ab": pos_ab.ravel(),
                       "positional_ba": pos_ba.ravel(), "excess": excess.ravel()})
    df["rank_excess"] = df["excess"].rank(ascending=False, method="first").astype(int)
    order = np.lexsort((-(ab + ba).ravel(), -link.ravel()))  # the larger weight, then the sum
    df = df.iloc[order].reset_index(drop=True)
    df.insert(0, "rank", np.arange(1, len(df) + 1))
    return df


def strongest_links(words_maps: np.ndarray, k: int = LINKS_TOP) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each head's ``k`` strongest word-to-word links, self-links left out: ``(query, key, weight)``, each
    ``(L, H, k)`` and strongest first (``k`` is cut to the ``n (n - 1)`` links there are)."""
    w = np.array(words_maps, dtype=np.float32)
    n_layers, n_heads, n, _ = w.shape
    k = min(k, n * (n - 1))
    w[:, :, np.arange(n), np.arange(n)] = -np.inf
    flat = w.reshape(n_layers, n_heads, n * n)
    top = np.argsort(-flat, axis=-1, kind="stable")[..., :k]
    return top // n, top % n, np.take_along_axis(flat, top, -1)


def distinct(words: Sequence[str]) -> list[str]:
    """The words, a repeated one (any case) followed by its position: ``the#3``, ``the#6``."""
    counts = Counter(w.lower() for w in words)
    return [f"{w}#{i}" if counts[w.lower()] > 1 else w for i, w in enumerate(words)]


def format_links(words: Sequence[str], links: tuple[np.ndarray, np.ndarray, np.ndarray], tag: str = "",
                 per_layer: bool = False) -> list[str]:
    """One line per head: its strongest links ``query->key weight``, strongest first (a repeated word named
    with its position)."""
    query, key, weight = links
    words = distinct(words)
    n_layers, n_heads, k = query.shape
    lines = []
    for layer in range(n_layers):
        for head in range(n_heads):
            name = f"L{layer:<2d} all" if per_layer else f"L{layer:<2d} H{head:<2d}"
            q, t, v = query[layer, head], key[layer, head], weight[layer, head]
            parts = [f"{words[q[j]]}->{words[t[j]]} {v[j]:.2f}" for j in range(k)]
            lines.append(f"  {tag}{name} | " + "  ".join(parts))
    return lines


def head_name(layer: int, head: int, per_layer: bool) -> str:
    return f"L{layer}" if per_layer else f"L{layer}H{head}"


def format_pair(words: Sequence[str], pair: WordPair, ranked: Sequence[tuple[str, bool, pd.DataFrame]],
                top: int = PAIR_TOP) -> list[str]:
    """The pair's ranked table: per measure (``(name, per_layer, rank_pair table)``) its ``top`` heads, with
    the weights both ways, the rank of ``b`` among ``a``'s targets, the positional expectation at the pair's
    offset and the rank by the excess over it."""
    wa, wb, n = words[pair.a], words[pair.b], len(words)
    ab, ba = f"{wa}->{wb}", f"{wb}->{wa}"
    lines = [f"  pair {wa} (#{pair.a}), {wb} (#{pair.b}): the top {top} heads of each measure by the larger "
             f"of {ab} and {ba} (rank: of {wb} among {wa}'s {n} targets; positional: the head's mean weight at "
             f"offset {pair.b - pair.a:+d} and {pair.a - pair.b:+d} over the sentence; by excess: the rank of the "
             "link above that expectation)"]
    lines += [f"  pair: {note}" for note in pair.notes]
    mw = max([len("measure")] + [len(name) for name, _, _ in ranked])
    width = max(len(ab), len(ba), 6)
    lines.append(f"    {'measure':<{mw}}  {'head':<7} {ab:>{width}} {ba:>{width}}  rank  positional  by excess")
    for name, per_layer, df in ranked:
        for r in df.head(top).itertuples():
            lines.append(f"    {name:<{mw}}  {head_name(r.layer, r.head, per_layer):<7} "
                         f"{r.weight_ab:>{width}.3f} {r.weight_ba:>{width}.3f}  {r.rank_b_in_a}/{n}"
                         f"  {r.positional_ab:.3f} {r.positional_ba:.3f}  {r.rank_excess}")
    return lines


def pair_words(pair: Optional[Sequence[str]]) -> Optional[tuple[str, str]]:
    """``inspect.pair`` as two words (None when unset); anything but two non-empty words is a ValueError."""
    if not pair:
        return None
    words = tuple(str(w).strip() for w in pair)
    if len(words) != 2 or not all(words):
        raise ValueError(f"inspect.pair={','.join(words)}: name two words of the sentence, "
                         "e.g. inspect.pair=cat,sat")
    return words[0], words[1]
