"""The frozen probes of the ``relation`` and ``attachment`` readouts, fitted once on the unablated model's
final-layer word vectors of the training split on standardised features (the relation probe by scikit-learn, the
attachment scorer in torch), then folded into plain weights so that a gated pass is scored by tensor code."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from probing.config import Pooling
from probing.corpus import Corpus
from probing.errors import ProbingError
from probing.importance.inputs import Batch, position_vectors
from probing.importance.readouts import AttachmentReadout, RelationReadout, arc_scores

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


# the attachment scorer's training (fit_attachment): Adam at this rate on steps of about this many words (sentences
# of similar length together), at most importance.attachment_epochs epochs, stopped when the cross-entropy on the
# held-out share of the training sentences has not improved for ARC_PATIENCE epochs (the best epoch's weights kept)
ARC_LR = 1e-3
ARC_STEP_WORDS = 2048
ARC_HELDOUT = 0.1
ARC_PATIENCE = 3


@dataclass(frozen=True)
class _ArcBatch:
    """Training sentences padded to ``m`` words: vectors ``x (b, m, D)``, gold head word ``gold (b, m)`` (-1:
    root or padding), real words ``word (b, m)``."""

    x: torch.Tensor
    gold: torch.Tensor
    word: torch.Tensor

    def loss_and_hits(self, u: torch.Tensor, v: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, int, int]:
        """Summed cross-entropy over the batch's arcs (softmax over every other word), correct arcs, arcs."""
        m = self.x.shape[1]
        s = arc_scores(self.x, u, v, c)  # (b, m, m)
        cand = self.word[:, None, :] & ~torch.eye(m, dtype=torch.bool)[None]
        s = s.masked_fill(~cand, float("-inf"))
        dep = self.gold >= 0
        logits, target = s[dep], self.gold[dep]
        ce = torch.nn.functional.cross_entropy(logits, target, reduction="sum")
        return ce, int((logits.argmax(-1) == target).sum()), len(target)


def _arc_batches(x: np.ndarray, heads: np.ndarray, start: np.ndarray, length: np.ndarray, sentences: np.ndarray,
                 mean: np.ndarray, scale: np.ndarray) -> list[_ArcBatch]:
    """The given training sentences (word vectors ``x (N, D)``, gold heads ``(N,)``, each sentence's first row
    and length) standardised and padded into length-sorted batches of about :data:`ARC_STEP_WORDS` words."""
    order = sentences[np.argsort(length[sentences], kind="stable")]
    out, i = [], 0
    while i < len(order):
        j = i + 1
        while j < len(order) and (j - i + 1) * int(length[order[j]]) <= ARC_STEP_WORDS:
            j += 1
        group = order[i:j]
        m = int(length[group].max())
        k = np.arange(m)
        word = k[None, :] < length[group][:, None]
        rows = np.where(word, start[group][:, None] + k[None, :], 0)
        xs = np.where(word[..., None], (x[rows] - mean) / scale, 0).astype(np.float32)
        gold = np.where(word, heads[rows], -1)
        out.append(_ArcBatch(torch.from_numpy(xs), torch.from_numpy(gold.astype(np.int64)), torch.from_numpy(word)))
        i = j
    return out


def _epoch(batches: list[_ArcBatch], params: list[torch.Tensor], opt=None, order=None) -> tuple[float, float]:
    """One pass over ``batches`` (a training step per batch when ``opt`` is given): cross-entropy per arc, UAS."""
    ce, hits, n = 0.0, 0, 0
    for i in (order if order is not None else range(len(batches))):
        with torch.set_grad_enabled(opt is not None):
            loss, h, k = batches[i].loss_and_hits(*params)
        if opt is not None and k:
            opt.zero_grad()
            (loss / k).backward()
            opt.step()
        ce, hits, n = ce + float(loss.detach()), hits + h, n + k
    return ce / max(n, 1), hits / max(n, 1)


def fit_attachment(model: torch.nn.Module, train: Corpus, batches: Sequence[Batch], eval_corpus: Corpus,
                   pooling: Pooling, rank: int, epochs: int, seed: int) -> AttachmentReadout:
    """The frozen :class:`AttachmentReadout` of :func:`train_arc_scorer` on the unablated model's word vectors
    of every sentence of ``train``."""
    x, heads, length = _train_words(model, train, batches, pooling)
    u, v, c, info = train_arc_scorer(x, heads, length, rank, epochs, seed)
    return AttachmentReadout(eval_corpus, pooling, u, v, c, fit=info)


def train_arc_scorer(x: np.ndarray, heads: np.ndarray, length: np.ndarray, rank: int, epochs: int, seed: int,
                     lr: float = ARC_LR) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict]:
    """The bilinear arc scorer of :class:`AttachmentReadout`, ``s_ij = (x_i U)·(x_j V) + x_j·c``, trained on
    every non-root word of the sentences (word vectors ``x (N, D)`` sentence after sentence, each word's gold
    head as an index within its sentence, -1 for the root, and the sentence lengths) with a softmax over the
    other words of its sentence (cross-entropy at the gold head), on standardised word vectors. A seeded tenth
    of the sentences (:data:`ARC_HELDOUT`; none under 10 sentences) is held out: Adam (``lr``, steps of about
    :data:`ARC_STEP_WORDS` words, seeded initialisation and step order) runs at most ``epochs`` epochs and stops
    once the held-out cross-entropy has not improved for :data:`ARC_PATIENCE` epochs, keeping the best epoch's
    weights (without a held-out slice: the last epoch's). The standardisation is folded into the weights; the
    terms it adds that are constant over a word's candidates are dropped (they change neither the argmax nor
    the softmax). Returns ``U, V, c`` (float32) and how the fit went."""
    if rank < 1 or epochs < 1:
        raise ProbingError(f"importance.attachment_rank={rank}, importance.attachment_epochs={epochs}: both must "
                           "be at least 1")
    start = np.r_[0, np.cumsum(length)[:-1]]
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(len(length), generator=g).numpy()
    n_held = int(len(length) * ARC_HELDOUT) if len(length) >= 10 else 0
    held, fit = np.sort(perm[:n_held]), np.sort(perm[n_held:])
    fit_rows = np.concatenate([np.arange(start[i], start[i] + length[i]) for i in fit])
    mean = x[fit_rows].mean(0, dtype=np.float64)
    scale = x[fit_rows].std(0, dtype=np.float64)
    scale[scale == 0] = 1.0
    train_b = _arc_batches(x, heads, start, length, fit, mean, scale)
    held_b = _arc_batches(x, heads, start, length, held, mean, scale)
    d = x.shape[1]
    std = (d * rank ** 0.5) ** -0.5  # (x U)·(x V) of unit variance at the start, for standardised x
    params = [(torch.randn(d, rank, generator=g) * std).requires_grad_(),
              (torch.randn(d, rank, generator=g) * std).requires_grad_(), torch.zeros(d, requires_grad=True)]
    opt = torch.optim.Adam(params, lr=lr)
    best, best_state, best_epoch, history = float("inf"), params, 0, []
    for epoch in range(1, epochs + 1):
        tr_ce, tr_uas = _epoch(train_b, params, opt, torch.randperm(len(train_b), generator=g).tolist())
        held_ce, held_uas = _epoch(held_b, params) if held_b else (tr_ce, tr_uas)
        history.append((tr_ce, held_ce, held_uas))
        if held_ce < best or not held_b:  # no held-out slice: the last epoch's weights
            best, best_epoch, best_state = held_ce, epoch, [p.detach().clone() for p in params]
        elif epoch - best_epoch >= ARC_PATIENCE:
            break
    held_ce, held_uas = history[best_epoch - 1][1:]
    log.info("attachment scorer: rank %d, %d training arcs of %d sentences, %d held-out sentences; best epoch %d "
             "of %d: held-out cross-entropy %.4f, UAS %.4f", rank, int((heads[fit_rows] >= 0).sum()), len(fit),
             n_held, best_epoch, len(history), held_ce, held_uas)
    info = {"rank": rank, "lr": lr, "fit_sentences": int(len(fit)), "heldout_sentences": int(n_held),
            "epochs_run": len(history), "best_epoch": best_epoch,
            "heldout_loss": held_ce if n_held else None, "heldout_uas": held_uas if n_held else None}
    u, v, c = (p.detach().double() for p in best_state)
    return (*_fold_bilinear(u, v, c, mean, scale), info)


def _fold_bilinear(u: torch.Tensor, v: torch.Tensor, c: torch.Tensor, mean: np.ndarray,
                   scale: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A scorer of standardised vectors ``z = (x − μ)/σ`` as one of raw vectors, up to terms constant over j:
    ``(z_i U)·(z_j V) + z_j·c = (x_i U')·(x_j V') + x_j·c' + f(i)`` with ``U' = U/σ``, ``V' = V/σ`` and
    ``c' = c/σ − V' (U'ᵀ μ)``."""
    mu, sd = torch.as_tensor(mean), torch.as_tensor(scale)
    u2, v2 = u / sd[:, None], v / sd[:, None]
    c2 = c / sd - v2 @ (u2.T @ mu)
    return u2.float(), v2.float(), c2.float()


def _train_words(model: torch.nn.Module, train: Corpus, batches: Sequence[Batch],
                 pooling: Pooling) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The unablated word vectors of every training sentence ``(N, D)`` float32, sentence after sentence in
    batch order, each word's gold head (index within its sentence, -1: root) ``(N,)``, sentence lengths."""
    xs, heads, length = [], [], []
    for batch, x in _vectors(model, batches, pooling):
        for b, (i, pre, n) in enumerate(zip(batch.sentences, batch.prefix, batch.n_words)):
            xs.append(x[b, pre: pre + n].numpy())
            heads.append(np.asarray(train[int(i)].heads, dtype=np.int64))
            length.append(int(n))
    return np.concatenate(xs), np.concatenate(heads), np.array(length, dtype=np.int64)


def _max_arcs(train: Corpus, batches: Sequence[Batch]) -> int:
    """An upper bound on the training arcs of ``batches``: their sentences' words."""
    return sum(len(train[int(i)]) for batch in batches for i in batch.sentences)
