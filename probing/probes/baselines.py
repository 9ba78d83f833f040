"""Trivial baselines printed beside every probe score: the majority class, fixed offsets (right-branching, the
best offset, the chains), and lookup classifiers on an arc's offset and its dependent's POS."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, ClassifierMixin


def majority_label(train_labels: Sequence) -> object:
    """The most frequent training label (ties broken by sorted order, so the choice is reproducible)."""
    vc = pd.Series(np.asarray(train_labels, dtype=object)).value_counts()
    top = vc[vc == vc.max()].index
    return sorted(top)[0]


def majority_accuracy(train_labels: Sequence, eval_labels: Sequence) -> float:
    """Accuracy of always predicting the majority training label on the evaluation labels."""
    ev = np.asarray(eval_labels, dtype=object)
    return float(np.mean(ev == majority_label(train_labels))) if len(ev) else float("nan")


def offset_heads(pos: np.ndarray, n: np.ndarray, offset: int) -> np.ndarray:
    """Head = the word at ``pos + offset``; ROOT (-1) when that falls outside the sentence."""
    h = np.asarray(pos) + offset
    return np.where((h >= 0) & (h < np.asarray(n)), h, -1)


def right_branching_heads(pos: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Each word attaches to the next word; the last word is the root."""
    return offset_heads(pos, n, 1)


def best_offset(pos: np.ndarray, n: np.ndarray, gold: np.ndarray, best_offset_max: int) -> int:
    """The offset in ``-best_offset_max..best_offset_max`` (0 excluded) whose heads match ``gold`` most often
    (chosen on training data; ties go to the smaller absolute offset, then the negative one)."""
    offsets = sorted((o for o in range(-best_offset_max, best_offset_max + 1) if o != 0), key=lambda o: (abs(o), o))
    scores = [float(np.mean(offset_heads(pos, n, o) == gold)) for o in offsets]
    return offsets[int(np.argmax(scores))]


def chain_offset(pos: np.ndarray, n: np.ndarray, gold: np.ndarray) -> int:
    """The chains baseline's direction, chosen on training data: -1 (each word's head is its left neighbour)
    or +1 (its right neighbour), whichever matches ``gold`` more often (a tie goes to -1)."""
    return best_offset(pos, n, gold, 1)


def clipped_offset(pos: np.ndarray, head: np.ndarray, window: int) -> np.ndarray:
    """The signed offset of each arc's head from its dependent, ``head - pos``, clipped to ``-window..window``
    (every farther head on one side shares the end bin)."""
    return np.clip(np.asarray(head) - np.asarray(pos), -window, window)


class LookupClassifier(BaseEstimator, ClassifierMixin):
    """The most frequent training label of each combination of categorical features: the best a classifier
    can do on training data that sees only those features. A combination never seen in training backs off to
    the longest prefix of its columns that was seen, then to the majority label; ties between labels go to
    the first in sorted order. ``X`` is ``(N, F)`` of hashable values (ints, strings)."""

    def fit(self, X: np.ndarray, y: Sequence) -> "LookupClassifier":
        X = np.asarray(X, dtype=object).reshape(len(y), -1)
        self.n_features_in_ = X.shape[1]
        self.majority_ = majority_label(y)
        df = pd.DataFrame(X, columns=range(X.shape[1])).astype(str)
        df["y"] = np.asarray(y, dtype=object).astype(str)
        self.tables_ = []
        for k in range(1, X.shape[1] + 1):
            cols = list(range(k))
            counts = df.groupby(cols + ["y"], sort=False).size().rename("c").reset_index()
            counts = counts.sort_values(cols + ["c", "y"], ascending=[True] * k + [False, True])
            self.tables_.append(counts.drop_duplicates(cols).set_index(cols)["y"])
        self.classes_ = np.array(sorted(set(df["y"])), dtype=object)
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        X = np.asarray(X, dtype=object).reshape(len(X), -1)
        df = pd.DataFrame(X, columns=range(X.shape[1])).astype(str)
        out = np.full(len(X), self.majority_, dtype=object)
        for k, table in enumerate(self.tables_, start=1):
            key = pd.MultiIndex.from_frame(df[list(range(k))]) if k > 1 else pd.Index(df[0])
            hit = table.reindex(key).to_numpy()
            seen = pd.notna(hit)
            out[seen] = hit[seen]
        return out
