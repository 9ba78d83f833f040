"""The frozen probes of the ``relation`` and ``arc`` readouts, fitted once on the unablated model's
final-layer word vectors of the training split (scikit-learn, standardised features), then folded into plain
weights so that a gated pass is scored by tensor code."""

from __future__ import annotations

import logging
from typing import Sequence

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from probing.config import Pooling
from probing.corpus import Corpus
from probing.importance.inputs import Batch, position_vectors
from probing.importance.readouts import ArcReadout, RelationReadout

log = logging.getLogger(__name__)


def _vectors(model: torch.nn.Module, batches: Sequence[Batch], pooling: Pooling):
    """``(batch, (B, M, D) float32 cpu)`` of the unablated model's last-layer position vectors."""
    with torch.inference_mode():
        for batch in batches:
            hidden = model(**batch.inputs).last_hidden_state
            yield batch, position_vectors(hidden.float(), batch.piece_position, batch.n_positions, pooling).cpu()


def _train_arcs(corpus: Corpus, batch: Batch) -> np.ndarray:
    """``(A, 4)``: row in batch, dependent position, head position, index into the corpus's labels list."""
    rows = []
    for b, (i, pre) in enumerate(zip(batch.sentences, batch.prefix)):
        s = corpus[int(i)]
        rows += [(b, pre + w, pre + h, w) for w, h in enumerate(s.heads) if h >= 0]
    return np.array(rows, dtype=np.int64).reshape(-1, 4)


def _fold(scaler: StandardScaler, coef: np.ndarray, intercept: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """A linear model on standardised features as one on the raw features: ``W/σ``, ``b − W μ/σ``."""
    w = coef / scaler.scale_
    return torch.tensor(w, dtype=torch.float32), torch.tensor(intercept - w @ scaler.mean_, dtype=torch.float32)


def fit_relation(model: torch.nn.Module, train: Corpus, batches: Sequence[Batch], eval_corpus: Corpus,
                 pooling: Pooling, C: float, max_iter: int, seed: int) -> RelationReadout:
    """A multinomial logistic probe ``[x_dep; x_head] -> label`` on every non-root arc of ``train``."""
    feats, labels = [], []
    for batch, x in _vectors(model, batches, pooling):
        a = _train_arcs(train, batch)
        feats.append(torch.cat([x[a[:, 0], a[:, 1]], x[a[:, 0], a[:, 2]]], -1).numpy())
        labels += [train[int(batch.sentences[b])].relations[w] for b, w in a[:, [0, 3]]]
    X, y = np.concatenate(feats), np.array(labels)
    scaler = StandardScaler().fit(X)
    clf = LogisticRegression(C=C, max_iter=max_iter, random_state=seed).fit(scaler.transform(X), y)
    log.info("relation probe: %d training arcs, %d labels, train accuracy %.4f", len(y), len(clf.classes_),
             clf.score(scaler.transform(X), y))
    w, b = _fold(scaler, clf.coef_, clf.intercept_)
    return RelationReadout(eval_corpus, pooling, w, b, [str(c) for c in clf.classes_])


def fit_arc(model: torch.nn.Module, train: Corpus, batches: Sequence[Batch], eval_corpus: Corpus,
            pooling: Pooling, C: float, max_iter: int, negatives: int, seed: int) -> ArcReadout:
    """A binary logistic probe on ``[x_i; x_j; x_i ⊙ x_j]``: the gold head of every non-root word of
    ``train`` against ``negatives`` other words of its sentence drawn at random."""
    rng = np.random.default_rng(seed)
    feats, ys = [], []
    for batch, x in _vectors(model, batches, pooling):
        a = _train_arcs(train, batch)
        nw = batch.n_words[a[:, 0]]
        # candidates drawn among the other words; a draw equal to the gold head is dropped
        draw = rng.integers(0, np.maximum(nw - 1, 1)[:, None], size=(len(a), negatives))
        word = a[:, 1] - batch.prefix[a[:, 0]]
        cand = draw + (draw >= word[:, None]) + batch.prefix[a[:, 0]][:, None]
        rows = np.repeat(a[:, 0], negatives + 1)
        deps = np.repeat(a[:, 1], negatives + 1)
        heads = np.concatenate([a[:, 2:3], cand], 1).ravel()
        y = np.tile(np.r_[1, np.zeros(negatives, dtype=int)], len(a))
        keep = (y == 1) | (heads != np.repeat(a[:, 2], negatives + 1))
        xi, xj = x[rows[keep], deps[keep]], x[rows[keep], heads[keep]]
        feats.append(torch.cat([xi, xj, xi * xj], -1).numpy())
        ys.append(y[keep])
    X, y = np.concatenate(feats), np.concatenate(ys)
    scaler = StandardScaler().fit(X)
    clf = LogisticRegression(C=C, max_iter=max_iter, random_state=seed).fit(scaler.transform(X), y)
    log.info("arc probe: %d training pairs (%d positive)", len(y), int(y.sum()))
    w, b = _fold(scaler, clf.coef_[0], clf.intercept_)
    return ArcReadout(eval_corpus, pooling, w, float(b[0]))
