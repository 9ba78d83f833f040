"""The attachment readout's bilinear arc scorer (probing.importance.probes.train_arc_scorer) on a planted
problem: every word's vector names itself and its head, so a bilinear form recovers the head exactly. The
trained, frozen readout finds the heads where the left and right chains do not; its loss differentiates to
the hidden states; the same seed gives the same numbers; the standardisation folded into the weights leaves
every softmax over candidates as it was."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from probing.corpus import Corpus, Sentence
from probing.errors import ProbingError
from probing.importance.inputs import Batch
from probing.importance.probes import _fold_bilinear, train_arc_scorer
from probing.importance.readouts import AttachmentReadout, arc_scores, trivial_baselines

POOL, NOISE = 12, 4  # word identities per sentence pool, noise dimensions


def planted(n_sentences: int, seed: int, sigma: float = 0.1) -> tuple[Corpus, np.ndarray, np.ndarray, np.ndarray]:
    """Sentences of 3-10 words with a random head for every word but one (a random tree, not a chain): word i's
    vector is ``[onehot(id_i); onehot(id_head(i)); noise]`` plus Gaussian noise, ids distinct within a sentence."""
    rng = np.random.default_rng(seed)
    sents, xs, heads, lengths = [], [], [], []
    for k in range(n_sentences):
        n = int(rng.integers(3, 11))
        ids = rng.choice(POOL, n, replace=False)
        root = int(rng.integers(n))
        h = np.array([-1 if i == root else int(rng.choice([j for j in range(n) if j != i])) for i in range(n)])
        x = np.zeros((n, 2 * POOL + NOISE))
        x[np.arange(n), ids] = 1
        dep = np.nonzero(h >= 0)[0]
        x[dep, POOL + ids[h[dep]]] = 1
        x += rng.normal(0, sigma, x.shape)
        sents.append(Sentence(str(k), tuple(f"w{i}" for i in ids), tuple(int(v) for v in h),
                              tuple("root" if v < 0 else "dep" for v in h)))
        xs.append(x)
        heads.append(h)
        lengths.append(n)
    corpus = Corpus("planted", "dev", tuple(sents))
    return corpus, np.concatenate(xs).astype(np.float32), np.concatenate(heads), np.array(lengths)


def as_batch(x: np.ndarray, lengths: np.ndarray) -> tuple[torch.Tensor, Batch]:
    """Hidden states ``(B, T, D)`` of the sentences, one piece per word after a special position 0 (given a large
    vector, so that scoring it as a head would show) and padding; a :class:`Batch` with ``pooling=first``."""
    b, m, d = len(lengths), int(lengths.max()) + 1, x.shape[1]
    hidden = torch.zeros(b, m, d, dtype=torch.float64)
    pos = torch.full((b, m), -1, dtype=torch.long)
    start = np.r_[0, np.cumsum(lengths)[:-1]]
    for s, (first, n) in enumerate(zip(start, lengths)):
        hidden[s, 0] = 5.0
        hidden[s, 1: n + 1] = torch.as_tensor(x[first: first + n], dtype=torch.float64)
        pos[s, : n + 1] = torch.arange(n + 1)
    batch = Batch({}, pos, np.arange(b), np.ones(b, dtype=int), lengths, m)
    return hidden, batch


@pytest.fixture(scope="module")
def fitted():
    corpus, x, heads, lengths = planted(300, seed=0)
    return train_arc_scorer(x, heads, lengths, rank=16, epochs=25, seed=0, lr=1e-2)


def test_the_planted_heads_are_found_and_the_chains_do_not_find_them(fitted):
    u, v, c, info = fitted
    assert info["fit_sentences"] == 270 and info["heldout_sentences"] == 30
    assert info["heldout_uas"] > 0.98
    corpus, x, _, lengths = planted(60, seed=1)  # new sentences
    readout = AttachmentReadout(corpus, "first", u, v, c)
    hidden, batch = as_batch(x, lengths)
    st = readout.stats(hidden, batch, hidden)
    uas = float(st.hits[0, :, 0].sum() / st.n[:, 0].sum())
    base = trivial_baselines("uas", corpus, corpus)
    assert uas > 0.98
    assert max(base.values()) < 0.4 and uas - max(base.values()) > 0.5


def test_the_loss_differentiates_to_the_hidden_states(fitted):
    u, v, c, _ = fitted
    corpus, x, _, lengths = planted(4, seed=2)
    readout = AttachmentReadout(corpus, "first", u.double(), v.double(), c.double())
    hidden, batch = as_batch(x, lengths)
    hidden.requires_grad_(True)
    loss = readout.loss(hidden, batch)
    assert loss.shape == (4,)
    loss.sum().backward()
    grad = hidden.grad
    words = batch.piece_position > 0
    assert (grad[words].abs().sum(-1) > 0).all()  # every word is a dependent or a candidate
    assert grad[~words].abs().sum() == 0  # the special position and padding are never scored
    # against a central difference of sentence 0's loss in one coordinate of word 1
    eps = 1e-6
    vals = []
    for sign in (1, -1):
        h = hidden.detach().clone()
        h[0, 2, 3] += sign * eps
        vals.append(float(readout.loss(h, batch)[0]))
    assert float(grad[0, 2, 3]) == pytest.approx((vals[0] - vals[1]) / (2 * eps), rel=1e-5, abs=1e-8)


def test_the_same_seed_repeats_the_fit_and_another_does_not():
    _, x, heads, lengths = planted(40, seed=3)
    a = train_arc_scorer(x, heads, lengths, rank=4, epochs=3, seed=5)
    b = train_arc_scorer(x, heads, lengths, rank=4, epochs=3, seed=5)
    c = train_arc_scorer(x, heads, lengths, rank=4, epochs=3, seed=6)
    for wa, wb in zip(a[:3], b[:3]):
        assert torch.equal(wa, wb)
    assert a[3] == b[3]
    assert not torch.equal(a[0], c[0])


def test_folding_the_standardisation_keeps_every_softmax_over_candidates():
    g = torch.Generator().manual_seed(0)
    d, r = 6, 3
    u, v, c = (torch.randn(d, r, generator=g, dtype=torch.float64), torch.randn(d, r, generator=g,
               dtype=torch.float64), torch.randn(d, generator=g, dtype=torch.float64))
    mean, scale = np.linspace(-1, 2, d), np.linspace(0.5, 3, d)
    x = torch.randn(5, d, generator=g, dtype=torch.float64) * 2 + 1
    z = (x - torch.as_tensor(mean)) / torch.as_tensor(scale)
    u2, v2, c2 = _fold_bilinear(u, v, c, mean, scale)
    raw = arc_scores(x, u2.double(), v2.double(), c2.double())
    std = arc_scores(z, u, v, c)
    diff = raw - std  # constant along each row (candidate j): a term of i alone
    torch.testing.assert_close(diff - diff[:, :1], torch.zeros_like(diff), atol=1e-5, rtol=0)


def test_rank_and_epochs_must_be_positive():
    _, x, heads, lengths = planted(3, seed=4)
    with pytest.raises(ProbingError, match="attachment_rank=0"):
        train_arc_scorer(x, heads, lengths, rank=0, epochs=3, seed=0)
