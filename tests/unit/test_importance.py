"""Head importance (probing.importance) on a tiny random BERT with hand-made batches: readouts against
loops over words, the cached/replicated evaluation against one full pass per setting, gradients against a
finite difference, and the table arithmetic against hand-worked numbers and scipy."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from mixing_oracle import randomise
from scipy.stats import spearmanr
from test_mixing import BUILDERS

from probing.corpus import Corpus, Sentence
from probing.errors import ProbingError
from probing.importance.inputs import Batch, position_vectors
from probing.importance.pruning import gradient_order, order_settings, removed_counts
from probing.importance.readouts import AttachmentReadout, EmbeddingReadout, RelationReadout, mlm_unavailable
from probing.importance.scores import Sums, evaluate, first_gated_layer, gradients
from probing.importance.tables import _spearman_rows, changes, normalised_gradient
from probing.interventions.gates import gated, head_means

# [CLS] w0 w1 w1' w2 [SEP] and [CLS] v0 v1 [SEP] pad pad: piece -> position
POS = torch.tensor([[0, 1, 2, 2, 3, 4], [0, 1, 2, 3, -1, -1]])
CORPUS = Corpus("toy", "dev", (
    Sentence("a", ("the", "cat", "sat"), (1, 2, -1), ("det", "nsubj", "root")),
    Sentence("b", ("dogs", "bark"), (1, -1), ("nsubj", "root")),
))


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return randomise(BUILDERS["bert"](), seed=7)


@pytest.fixture(scope="module")
def batch():
    g = torch.Generator().manual_seed(8)
    ids = torch.randint(5, 40, (2, 6), generator=g)
    mask = (POS >= 0).long()
    return Batch({"input_ids": ids * mask, "attention_mask": mask}, POS, np.array([0, 1]), np.array([1, 1]),
                 np.array([3, 2]), 5)


def _relation(d=32, seed=9):
    g = torch.Generator().manual_seed(seed)
    return RelationReadout(CORPUS, "mean_sum", torch.randn(3, 2 * d, generator=g), torch.randn(3, generator=g),
                           ["det", "nsubj", "obj"])


def test_position_vectors_are_piece_means():
    h = torch.arange(2 * 6 * 2, dtype=torch.float32).view(2, 6, 2)
    v = position_vectors(h, POS, 5, "mean_sum")
    torch.testing.assert_close(v[0, 2], (h[0, 2] + h[0, 3]) / 2)
    torch.testing.assert_close(v[1, 3], h[1, 3])
    assert torch.equal(v[1, 4], torch.zeros(2))  # a position the short sentence lacks
    torch.testing.assert_close(position_vectors(h, POS, 5, "first")[0, 2], h[0, 2])


def test_relation_readout_counts_arcs_as_a_loop_does(model, batch):
    readout = _relation()
    with torch.no_grad():
        hidden = model(**batch.inputs).last_hidden_state
    st = readout.stats(hidden, batch, hidden)
    assert readout.groups == ["all", "det", "nsubj"]  # root arcs are not scored
    x = position_vectors(hidden, POS, 5, "mean_sum")
    hits = np.zeros((2, 3))
    loss = np.zeros((2, 3))
    for b, s in enumerate(CORPUS):
        for w, (h, r) in enumerate(zip(s.heads, s.relations)):
            if h < 0:
                continue
            logits = readout.weight @ torch.cat([x[b, 1 + w], x[b, 1 + h]]) + readout.bias
            c = ["det", "nsubj", "obj"].index(r)
            g = readout.groups.index(r)
            for col in (0, g):
                hits[b, col] += float(logits.argmax() == c)
                loss[b, col] += float(torch.logsumexp(logits, 0) - logits[c])
    np.testing.assert_allclose(st.n.numpy(), [[2, 1, 1], [1, 0, 1]])
    np.testing.assert_allclose(st.hits[0].numpy(), hits)
    np.testing.assert_allclose(st.loss[0].numpy(), loss, rtol=1e-5)


def test_arc_readout_scores_every_other_word_as_a_loop_does(model, batch):
    d, r = 32, 4
    g = torch.Generator().manual_seed(3)
    u, v, c = torch.randn(d, r, generator=g), torch.randn(d, r, generator=g), torch.randn(d, generator=g)
    readout = AttachmentReadout(CORPUS, "mean_sum", u, v, c)
    with torch.no_grad():
        hidden = model(**batch.inputs).last_hidden_state
    st = readout.stats(hidden, batch, hidden)
    x = position_vectors(hidden, POS, 5, "mean_sum")
    hits, loss = np.zeros((2, 3)), np.zeros((2, 3))
    for b, s in enumerate(CORPUS):
        for i, (h, rel) in enumerate(zip(s.heads, s.relations)):
            if h < 0:
                continue
            cands = [j for j in range(len(s)) if j != i]  # the other words; [CLS], [SEP] and padding are not
            scores = torch.stack([(x[b, 1 + i] @ u) @ (x[b, 1 + j] @ v) + x[b, 1 + j] @ c for j in cands])
            for col in (0, readout.groups.index(rel)):
                hits[b, col] += float(cands[int(scores.argmax())] == h)
                loss[b, col] += float(torch.logsumexp(scores, 0) - scores[cands.index(h)])
    np.testing.assert_allclose(st.hits[0].numpy(), hits)
    np.testing.assert_allclose(st.loss[0].numpy(), loss, rtol=1e-5)


def test_cached_replicated_evaluation_equals_one_pass_per_setting(model, batch):
    settings = torch.ones(5, 2, 4)
    settings[0, 1, 2] = 0  # one head of layer 1
    settings[1, 0, 0] = 0  # one head of layer 0
    settings[2, 0] = 0  # all of layer 0
    settings[3] = 0  # everything
    assert first_gated_layer(settings).tolist() == [1, 0, 0, 0, 2]
    means = head_means(model, [batch.inputs])
    for readout in (_relation(), EmbeddingReadout()):
        fast = evaluate(model, [batch], readout, settings, means, replicas=2)
        slow = evaluate(model, [batch], readout, settings, means, replicas=1, reuse=False)
        np.testing.assert_allclose(fast.hits, slow.hits, atol=1e-5)
        np.testing.assert_allclose(fast.loss, slow.loss, atol=1e-4)
        np.testing.assert_allclose(fast.hits[4], fast.clean_hits)  # the all-ones setting is the clean pass
    cos = evaluate(model, [batch], EmbeddingReadout(), settings, means, replicas=3).hits
    assert np.allclose(cos[4], 1) and (cos[3] < 0.999).all()


def test_gradients_are_per_sentence_finite_differences(model, batch):
    readout = _relation()
    model64 = model.double()
    try:
        readout.weight, readout.bias = readout.weight.double(), readout.bias.double()
        base = torch.ones(2, 4, dtype=torch.float64)
        grads = gradients(model64, [batch], readout, None, base)
        eps = 1e-6
        for b in range(2):
            for layer, head in ((0, 1), (1, 3)):
                vals = []
                for sign in (1, -1):
                    xi = base.expand(2, -1, -1).clone()
                    xi[b, layer, head] += sign * eps
                    with torch.no_grad(), gated(model64, xi):
                        vals.append(readout.loss(model64(**batch.inputs).last_hidden_state, batch)[b].item())
                fd = (vals[0] - vals[1]) / (2 * eps)
                assert grads[b, layer, head] == pytest.approx(abs(fd), rel=1e-5, abs=1e-9)
    finally:
        model.float()


def test_score_changes_and_their_resamples_by_hand():
    # two sentences, one group; clean hits 2/2 and 1/2; the one setting gets 1/2 and 0/2
    sums = Sums(np.array([0, 1]), np.array([[2.0], [2.0]]), np.array([[2.0], [1.0]]), np.array([[0.2], [0.6]]),
                np.array([[[1.0], [0.0]]]), np.array([[[0.5], [1.5]]]))
    drop, loss = changes(sums, np.array([[1.0, 1.0], [2.0, 0.0], [0.0, 2.0]]))
    np.testing.assert_allclose(drop[:, 0, 0], [0.5, 0.5, 0.5])  # (3-1)/4, (4-2)/4, (2-0)/4
    np.testing.assert_allclose(loss[:, 0, 0], [(2.0 - 0.8) / 4, (1.0 - 0.4) / 4, (3.0 - 1.2) / 4])


def test_gradient_importance_is_normalised_within_each_layer():
    grads = np.array([[[3.0, 0.0], [1.0, 1.0]], [[3.0, 8.0], [1.0, 1.0]]])  # (S=2, L=2, H=2)
    np.testing.assert_allclose(normalised_gradient(grads), [[0.6, 0.8], [2 ** -0.5, 2 ** -0.5]])


def test_spearman_rows_match_scipy():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=12), rng.normal(size=(3, 12))
    y[1, :4] = 0.5  # ties
    np.testing.assert_allclose(_spearman_rows(x, y), [spearmanr(x, r).statistic for r in y])


def test_pruning_steps_and_the_recomputed_gradient_order():
    assert removed_counts(72, 0.1) == [0, 7, 14, 22, 29, 36, 43, 50, 58, 65, 72]
    s = order_settings([3, 0], [0, 1, 2], 2, 2)
    assert s.view(3, 4).tolist() == [[1, 1, 1, 1], [1, 1, 1, 0], [0, 1, 1, 0]]
    order = gradient_order(lambda g: np.array([0.4, 0.1, 0.3, 0.9]) if g[0, 1] == 1
                           else np.array([0.0, 0.0, 0.5, 0.2]), [0, 1, 3, 4], 2, 2)
    assert order == [1, 0, 3, 2]  # step 2 recomputed: head 3 (0.2) now goes before head 2 (0.5)


def test_mlm_without_a_head_is_one_line():
    err = mlm_unavailable("minilm", ["BertModel"])
    assert isinstance(err, ProbingError)
    assert str(err) == ("importance.readout=mlm: model minilm (BertModel) has no masked-LM head; use "
                        "importance.readout=relation, attachment or embedding")
    with pytest.raises(ProbingError, match="gradient is 0; use importance.method=ablation"):
        EmbeddingReadout().loss(None, None)


def test_probe_features_are_standardised_in_place_like_sklearn():
    """The frozen probes' features are gathered into one preallocated matrix and standardised in place,
    chunk by chunk: the same numbers as StandardScaler on a copy, and no second matrix."""
    from sklearn.preprocessing import StandardScaler

    from probing.importance.probes import _Rows, _standardise

    g = torch.Generator().manual_seed(0)
    blocks = [torch.randn(n, 6, generator=g) * 3 + 2 for n in (5, 0, 7)]
    rows = _Rows(20, 6)
    for b in blocks:
        rows.add(b)
    X = rows.matrix()
    raw = torch.cat(blocks).numpy()
    np.testing.assert_array_equal(X, raw)
    X[:, 2] = 4.0  # a constant column: scale 1, as StandardScaler handles it
    raw = X.copy()
    scaler = _standardise(X, chunk=4)
    assert np.shares_memory(X, rows.data)
    np.testing.assert_allclose(X, StandardScaler().fit_transform(raw), atol=1e-5)
    np.testing.assert_allclose(scaler.mean_, raw.mean(0), rtol=1e-6)
    assert scaler.scale_[2] == 1.0


def test_the_prunable_fraction_of_random_orders_has_a_band_of_single_orders():
    import pandas as pd

    from probing.tasks.importance import _bend

    rows = []
    # two random orders: one stays within 5 points up to 0.5, the other drops at 0.25
    for seed, scores in ((0, [0.80, 0.79, 0.77, 0.60]), (1, [0.80, 0.70, 0.69, 0.60])):
        rows += [{"order": "random", "seed": seed, "fraction_removed": f, "relation": "all", "score": v}
                 for f, v in zip([0.0, 0.25, 0.5, 0.75], scores)]
    got = _bend(pd.DataFrame(rows))
    assert got["prunable_fraction_random_min"] == 0.0 and got["prunable_fraction_random_max"] == 0.5
    assert got["prunable_fraction_random"] == 0.0  # the mean curve (0.80, 0.745, ...) drops at 0.25


def test_trivial_baselines_of_the_readouts_by_hand():
    from probing.importance.readouts import trivial_baselines

    ev = Corpus("toy", "dev", (
        Sentence("a", ("the", "big", "cat", "sat"), (2, 2, 3, -1), ("det", "amod", "nsubj", "root")),
        Sentence("b", ("dogs", "bark", "loudly"), (1, -1, 1), ("nsubj", "root", "advmod")),
    ))
    # non-root arcs (dependent, head): (0,2) (1,2) (2,3) | (0,1) (2,1): left chain w-1 hits (2,1); right
    # chain w+1 hits (1,2) (2,3) (0,1)
    assert trivial_baselines("uas", CORPUS, ev) == {"left_chain": 1 / 5, "right_chain": 3 / 5}
    # CORPUS's training arcs: det, nsubj, nsubj -> nsubj; 2 of the 5 eval arcs are nsubj
    assert trivial_baselines("accuracy", CORPUS, ev) == {"majority (nsubj)": 2 / 5}
    assert trivial_baselines("cosine", CORPUS, ev) == {}
