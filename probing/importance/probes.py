"""The frozen probes of the ``relation`` and ``attachment`` readouts, fitted once on the unablated model's
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
from probing.importance.readouts import AttachmentReadout, RelationReadout

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


class _Rows:
    """Feature rows gathered batch by batch into one float32 matrix allocated once at an upper bound (its
    untouched tail is never paged in): no list of blocks to concatenate, which would hold the data twice."""

    def __init__(self, max_rows: int, width: int):
        self.data = np.empty((max_rows, width), np.float32)
        self.n = 0

    def add(self, block: torch.Tensor) -> None:
        self.data[self.n: self.n + len(block)] = block.numpy()
        self.n += len(block)

    def matrix(self) -> np.ndarray:
        return self.data[: self.n]


def _standardise(X: np.ndarray, chunk: int = 2**16) -> StandardScaler:
    """Fit a StandardScaler on ``X`` chunk by chunk and standardise ``X`` in place: its float64 statistics
    need one chunk of temporaries, not a float64 copy of the whole matrix."""
    scaler = StandardScaler(copy=False)
    for start in range(0, len(X), chunk):
        scaler.partial_fit(X[start: start + chunk])
    for start in range(0, len(X), chunk):
        scaler.transform(X[start: start + chunk])  # copy=False: in place
    return scaler


def fit_relation(model: torch.nn.Module, train: Corpus, batches: Sequence[Batch], eval_corpus: Corpus,
                 pooling: Pooling, C: float, max_iter: int, seed: int) -> RelationReadout:
    """A multinomial logistic probe ``[x_dep; x_head] -> label`` on every non-root arc of ``train``."""
    rows: _Rows | None = None
    labels: list[str] = []
    for batch, x in _vectors(model, batches, pooling):
        a = _train_arcs(train, batch)
        rows = rows or _Rows(_max_arcs(train, batches), 2 * x.shape[-1])
        rows.add(torch.cat([x[a[:, 0], a[:, 1]], x[a[:, 0], a[:, 2]]], -1))
        labels += [train[int(batch.sentences[b])].relations[w] for b, w in a[:, [0, 3]]]
    X, y = rows.matrix(), np.array(labels)
    scaler = _standardise(X)
    clf = LogisticRegression(C=C, max_iter=max_iter, random_state=seed).fit(X, y)
    log.info("relation probe: %d training arcs, %d labels, train accuracy %.4f", len(y), len(clf.classes_),
             clf.score(X, y))
    w, b = _fold(scaler, clf.coef_, clf.intercept_)
    return RelationReadout(eval_corpus, pooling, w, b, [str(c) for c in clf.classes_])


def fit_attachment(model: torch.nn.Module, train: Corpus, batches: Sequence[Batch], eval_corpus: Corpus,
            pooling: Pooling, C: float, max_iter: int, negatives: int, seed: int) -> AttachmentReadout:
    """A binary logistic probe on ``[x_i; x_j; x_i ⊙ x_j]``: the gold head of every non-root word of
    ``train`` against ``negatives`` other words of its sentence drawn at random. The pairs are gathered into
    one float32 matrix and standardised in place (all of EWT train: 1.1M pairs, 5 GB, held once)."""
    rng = np.random.default_rng(seed)
    rows: _Rows | None = None
    ys = []
    for batch, x in _vectors(model, batches, pooling):
        a = _train_arcs(train, batch)
        nw = batch.n_words[a[:, 0]]
        # candidates drawn among the other words; a draw equal to the gold head is dropped
        draw = rng.integers(0, np.maximum(nw - 1, 1)[:, None], size=(len(a), negatives))
        word = a[:, 1] - batch.prefix[a[:, 0]]
        cand = draw + (draw >= word[:, None]) + batch.prefix[a[:, 0]][:, None]
        pairs = np.repeat(a[:, 0], negatives + 1)
        deps = np.repeat(a[:, 1], negatives + 1)
        heads = np.concatenate([a[:, 2:3], cand], 1).ravel()
        y = np.tile(np.r_[1, np.zeros(negatives, dtype=int)], len(a))
        keep = (y == 1) | (heads != np.repeat(a[:, 2], negatives + 1))
        xi, xj = x[pairs[keep], deps[keep]], x[pairs[keep], heads[keep]]
        rows = rows or _Rows(_max_arcs(train, batches) * (negatives + 1), 3 * x.shape[-1])
        rows.add(torch.cat([xi, xj, xi * xj], -1))
        ys.append(y[keep])
    X, y = rows.matrix(), np.concatenate(ys)
    scaler = _standardise(X)
    clf = LogisticRegression(C=C, max_iter=max_iter, random_state=seed).fit(X, y)
    log.info("attachment probe: %d training pairs (%d positive)", len(y), int(y.sum()))
    w, b = _fold(scaler, clf.coef_[0], clf.intercept_)
    return AttachmentReadout(eval_corpus, pooling, w, float(b[0]))


def _max_arcs(train: Corpus, batches: Sequence[Batch]) -> int:
    """An upper bound on the training arcs of ``batches``: their sentences' words."""
    return sum(len(train[int(i)]) for batch in batches for i in batch.sentences)
