"""A probe's margin over its best trivial baseline, and the margin's bootstrap over eval sentences.

The best baseline is the one that scores highest on the eval data itself: the strongest competitor, so the
margin can only be understated by that choice. Accuracy margins are per-sentence terms (:class:`Terms`: a
sentence's probe-correct minus baseline-correct items over its items), resampled like the structural probes'
scores. An ROC-AUC margin is not a sum over sentences: :class:`AucMargin` recomputes both AUCs under each resample's
sentence weights (a weighted Mann-Whitney statistic, vectorised over resamples).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from probing.probes.structural.metrics import Terms

_CELLS = 2**22  # resample x item weights held at once


def best_baseline(metrics: dict, names: tuple[str, ...]) -> str:
    """The baseline metric of ``names`` with the highest value (the first of equals)."""
    return max(names, key=lambda k: (metrics[k], -names.index(k)))


def margin_metrics(metrics: dict, score: str, names: tuple[str, ...]) -> dict:
    """``margin`` (``metrics[score]`` minus the best baseline's) and ``margin_baseline`` (that baseline)."""
    best = best_baseline(metrics, names)
    return {"margin": float(metrics[score] - metrics[best]), "margin_baseline": best}


def accuracy_margin_terms(item_sentence: np.ndarray, probe_correct: np.ndarray, baseline_correct: np.ndarray,
                          n_sentences: int) -> Terms:
    """The accuracy margin as per-sentence terms: ``item_sentence`` gives each eval item's sentence position
    (0..n_sentences-1); num = its correct-by-probe minus correct-by-baseline, den = its items."""
    s = np.asarray(item_sentence, dtype=np.int64)
    diff = np.asarray(probe_correct, dtype=np.float64) - np.asarray(baseline_correct, dtype=np.float64)
    num = np.bincount(s, weights=diff, minlength=n_sentences)
    den = np.bincount(s, minlength=n_sentences).astype(np.float64)
    return Terms(num, den, np.zeros(n_sentences, dtype=np.int64), np.ones(n_sentences, dtype=bool))


def weighted_auc(score: np.ndarray, label: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """ROC-AUC of ``score`` for binary ``label`` under each row of item ``weights`` ``(R, N)``: the weighted
    share of (positive, negative) pairs ranked right, ties counted half (``roc_auc_score`` for unit weights)."""
    score, label = np.asarray(score, dtype=np.float64), np.asarray(label).astype(bool)
    order = np.argsort(score, kind="stable")
    _, starts = np.unique(score[order], return_index=True)
    w = np.asarray(weights, dtype=np.float64)[:, order]
    pos = np.add.reduceat(np.where(label[order], w, 0.0), starts, axis=1)  # (R, groups of tied scores)
    neg = np.add.reduceat(np.where(label[order], 0.0, w), starts, axis=1)
    below = np.cumsum(neg, axis=1) - neg
    with np.errstate(invalid="ignore", divide="ignore"):
        return (pos * (below + 0.5 * neg)).sum(1) / (pos.sum(1) * neg.sum(1))


@dataclass(frozen=True)
class AucMargin:
    """An ROC-AUC margin (probe score minus baseline score) over eval items of ``item_sentence``'s sentences."""

    n_sentences: int  # S: the eval sentences resampled
    item_sentence: np.ndarray  # (N,) each item's eval-sentence position, 0..S-1
    label: np.ndarray  # (N,) 0/1
    probe_score: np.ndarray  # (N,)
    baseline_score: np.ndarray  # (N,)

    def under(self, sentence_weights: np.ndarray) -> np.ndarray:
        """The margin under each row of sentence weights ``(R, S)`` (``(R,)``), in chunks of resamples."""
        sw = np.atleast_2d(sentence_weights)
        step = max(1, _CELLS // max(len(self.label), 1))
        out = []
        for r in range(0, len(sw), step):
            w = sw[r:r + step][:, self.item_sentence].astype(np.float64)
            out.append(weighted_auc(self.probe_score, self.label, w) - weighted_auc(self.baseline_score, self.label, w))
        return np.concatenate(out) if out else np.zeros(0)
