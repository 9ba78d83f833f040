"""Control tasks (Hewitt and Liang 2019): labels that are a fixed random function of word types.

A probe that scores well on its control task can memorise word identities rather than read structure
from attention; *selectivity* = task score - control score. As Hewitt and Liang define them, a label task's
control gives each word type (a pair's dependent's type) a label drawn from the task's empirical label
distribution, and the attachment tasks' controls attach each word type by a fixed rule (to the first word,
the last, or ROOT). Every control here is a deterministic function of (seed, word type): a keyed hash gives
each type a uniform number in [0, 1), which picks the label or the rule. The same type gets the same label in
training and evaluation, and a type never seen in training still gets one. Distributions come from the
training split.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np
import pandas as pd

# Attachment rules of the arc control task (Hewitt and Liang's "self" becomes ROOT: a word cannot head
# itself).
ARC_RULES = ("root", "first", "last")


def type_uniform(seed: int, *types: Sequence[str]) -> np.ndarray:
    """A number in [0, 1) per row, a keyed hash of the row's types: same (seed, types) -> same number."""
    cols = [np.asarray(t, dtype=object) for t in types]
    if not cols:
        raise ValueError("type_uniform needs at least one type column")
    joined = pd.Series(cols[0]).astype(str)
    for c in cols[1:]:
        joined = joined + "\x1f" + pd.Series(c).astype(str)
    # hash each distinct key once (type vocabularies are far smaller than the token counts)
    codes, uniques = pd.factorize(joined, sort=False)
    key = str(int(seed)).encode()
    digests = (hashlib.blake2b(u.encode(), digest_size=8, key=key).digest() for u in uniques)
    vals = np.fromiter((int.from_bytes(d, "big") for d in digests), dtype=np.float64, count=len(uniques))
    return (vals / 2.0**64)[codes]


def draw_from(u: np.ndarray, labels: Sequence[str], counts: Sequence[float]) -> np.ndarray:
    """Inverse-CDF draw: the label whose cumulative share first exceeds ``u`` (labels in the given order)."""
    p = np.asarray(counts, dtype=np.float64)
    cdf = np.cumsum(p / p.sum())
    idx = np.minimum(np.searchsorted(cdf, u, side="right"), len(cdf) - 1)
    return np.asarray(labels, dtype=object)[idx]


def empirical(labels: Sequence[str]) -> tuple[list[str], list[int]]:
    """Labels sorted by name with their counts (sorted, so the draw does not depend on data order)."""
    vc = pd.Series(np.asarray(labels, dtype=object)).value_counts()
    names = sorted(vc.index)
    return names, [int(vc[n]) for n in names]


def control_relations(dep_words: Sequence[str], train_labels: Sequence[str], seed: int) -> np.ndarray:
    """Each dependent's type draws a relation from the training relation distribution (the label of a pair
    is its dependent type's, whatever the head)."""
    names, counts = empirical(train_labels)
    return draw_from(type_uniform(seed, dep_words), names, counts)


def control_arc_rules(words: Sequence[str], seed: int) -> np.ndarray:
    """Each word type gets one attachment rule of :data:`ARC_RULES`, uniformly."""
    return draw_from(type_uniform(seed, words, np.full(len(words), "arc", dtype=object)), ARC_RULES,
                     [1] * len(ARC_RULES))


def control_heads(words: Sequence[str], pos: np.ndarray, n: np.ndarray, seed: int) -> np.ndarray:
    """Control head (word index, -1 = ROOT) of each word: its type's rule applied in its sentence.
    A rule that would attach a word to itself attaches it to ROOT."""
    rule = control_arc_rules(words, seed)
    pos, n = np.asarray(pos), np.asarray(n)
    head = np.where(rule == "first", 0, np.where(rule == "last", n - 1, -1)).astype(np.int64)
    head[head == pos] = -1
    return head


def control_edges(words_a: Sequence[str], words_b: Sequence[str], pos_a: np.ndarray, pos_b: np.ndarray,
                  n: np.ndarray, seed: int) -> np.ndarray:
    """Binary control labels for word pairs of sentences of ``n`` words, by the arc control's attachment rules
    (:func:`control_heads`): a pair is a control arc when one word's type rule attaches it to the other."""
    pos_a, pos_b = np.asarray(pos_a), np.asarray(pos_b)
    head_a, head_b = control_heads(words_a, pos_a, n, seed), control_heads(words_b, pos_b, n, seed)
    return ((head_a == pos_b) | (head_b == pos_a)).astype(np.int64)
