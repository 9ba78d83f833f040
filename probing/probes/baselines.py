"""Baselines printed beside every probe score: majority class, right-branching and best fixed offset."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd


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
