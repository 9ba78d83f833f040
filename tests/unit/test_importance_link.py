"""The link's bootstrap: attention accuracy resampled with the importance's own sentence weights, and the
Spearman interval over paired resamples, each against an independent computation."""

import numpy as np
import pandas as pd
from heads_store import build_store, synthetic_corpus
from scipy.stats import spearmanr

from probing.config import Direction, HeadsConfig, ImportanceConfig, LabelSet
from probing.heads.head_accuracy import count_relations
from probing.importance.tables import link_rows
from probing.schema import ALL
from probing.tasks.importance import _resampled_accuracy, sentence_weights

DIRS = [Direction.dep_to_head, Direction.head_to_dep]


def per_sentence_hits(corpus, store, relation):
    """``(S, 2, L·H)`` hits and ``(S,)`` arcs of ``relation`` per sentence, one word and head at a time."""
    lh = store.num_layers * store.num_heads
    hits, n = np.zeros((len(corpus), 2, lh)), np.zeros(len(corpus))
    for i in range(len(corpus)):
        s, w = corpus[i], np.asarray(store.words(i), dtype=np.float32)
        for d, (g, r) in enumerate(zip(s.heads, s.relations)):
            if relation not in (r, ALL):
                continue
            n[i] += 1
            for k in range(lh):
                row, col = w[k // store.num_heads, k % store.num_heads, d].copy(), \
                    w[k // store.num_heads, k % store.num_heads, :, d].copy()
                row[d] = col[d] = 0
                hits[i, 0, k] += int(np.argmax(row)) == g
                hits[i, 1, k] += int(np.argmax(col)) == g
    return hits, n


def test_attention_accuracy_is_resampled_with_the_importance_weights(tmp_path):
    corpus = synthetic_corpus(14, seed=2)
    store = build_store(tmp_path, corpus)
    imp, seed = ImportanceConfig(bootstrap=40), 5
    h = HeadsConfig()
    counts = count_relations(store, corpus, store.indices, DIRS, list(h.offsets), [LabelSet.as_is], imp.bootstrap,
                             seed, h.chunk_words, h.block_mb)[LabelSet.as_is]
    got = _resampled_accuracy(counts, DIRS, store.num_layers * store.num_heads)
    w = sentence_weights(len(corpus), imp, seed)  # corpus order, as the task draws them
    for rel in ("nsubj", ALL):
        hits, n = per_sentence_hits(corpus, store, rel)
        with np.errstate(invalid="ignore", divide="ignore"):
            expect = np.einsum("bs,sdk->bdk", w, hits) / (w @ n)[:, None, None]
        for j, direction in enumerate(DIRS):
            np.testing.assert_allclose(got[(rel, str(direction))], expect[:, j], rtol=1e-6)


def test_link_interval_pairs_each_resample_of_both_sides():
    rng = np.random.default_rng(0)
    n_layers, n_heads, n_boot, g = 2, 3, 60, 1
    k = n_layers * n_heads
    acc_point, imp_point = rng.random(k), rng.random((k, 2))
    acc_samp = rng.random((n_boot, k))
    imp_samp = rng.random((n_boot, k, 2))
    acc_samp[3] = np.nan  # a resample that drew no arc of the relation
    accuracy = pd.DataFrame({"relation": "nsubj", "direction": "dep_to_head",
                            "layer": np.repeat(range(n_layers), n_heads),
                            "head": np.tile(range(n_heads), n_layers), "accuracy": acc_point})
    groups = [ALL, "nsubj"]
    paired = link_rows(accuracy, imp_point, imp_samp, groups, [0, 1], n_layers, n_heads, 0.9,
                       {("nsubj", "dep_to_head"): acc_samp})
    held = link_rows(accuracy, imp_point, imp_samp, groups, [0, 1], n_layers, n_heads, 0.9)
    rho = [spearmanr(acc_samp[b], imp_samp[b, :, g]).statistic for b in range(n_boot) if b != 3]
    rho_held = [spearmanr(acc_point, imp_samp[b, :, g]).statistic for b in range(n_boot)]
    row, row_held = paired.iloc[0], held.iloc[0]
    assert row["rho"] == row_held["rho"]
    np.testing.assert_allclose(row["rho"], spearmanr(acc_point, imp_point[:, g]).statistic)
    np.testing.assert_allclose([row["ci_low"], row["ci_high"]], np.percentile(rho, [5, 95]))
    np.testing.assert_allclose([row_held["ci_low"], row_held["ci_high"]], np.percentile(rho_held, [5, 95]))
    assert (row["ci_resampled"], row_held["ci_resampled"]) == ("importance+attention", "importance")
    # one-sided p of rho > 0 by hand: (1 + resamples at or below 0) / (1 + defined resamples)
    assert row["p"] == (1 + sum(r <= 0 for r in rho)) / (1 + len(rho))
    assert row_held["p"] == (1 + sum(r <= 0 for r in rho_held)) / (1 + n_boot)


def test_interval_of_a_score_undefined_in_every_resample_is_nan_without_a_warning():
    """A column that is NaN in every resample (e.g. a Spearman over constant scores) has the interval
    (NaN, NaN) and no console warning; a defined column keeps numpy's percentiles."""
    import warnings

    from probing.importance.tables import _interval

    samples = np.array([[np.nan, 1.0], [np.nan, 2.0], [np.nan, 3.0], [np.nan, 5.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lo, hi = _interval(samples, 0.5)
    assert np.isnan(lo[0]) and np.isnan(hi[0])
    assert (lo[1], hi[1]) == tuple(np.percentile(samples[:, 1], [25, 75]))
