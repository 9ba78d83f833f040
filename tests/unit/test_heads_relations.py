"""Relation accuracy over a synthetic store with planted heads, checked against a plain loop."""

import numpy as np
import pytest
from heads_store import build_store, synthetic_corpus

from probing.config import Direction, HeadsConfig, LabelSet
from probing.corpus.sentence import base_relation
from probing.heads.head_accuracy import accuracy_table, collapse, count_relations
from probing.schema import ALL, best_heads
from probing.stats.bootstrap import percentile_interval, resample_counts

DIRS = [Direction.dep_to_head, Direction.head_to_dep]
OFFS = [-3, -2, -1, 1, 2, 3]
H = HeadsConfig()


def count(store, corpus, indices=None, bootstrap=0, seed=0, chunk_words=H.chunk_words, block_mb=H.block_mb):
    """count_relations with the config's chunking and no resamples unless asked."""
    return count_relations(store, corpus, indices, DIRS, OFFS, list(LabelSet), bootstrap, seed, chunk_words,
                           block_mb)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    corpus = synthetic_corpus(40, seed=1)
    store = build_store(tmp_path_factory.mktemp("store"), corpus, dtype="float16")
    return corpus, store


def loop_counts(corpus, store, label="as_is"):
    """Independent computation: one sentence, word, layer and head at a time."""
    out = {}
    for i in store.indices:
        s = corpus[int(i)]
        w = np.asarray(store.words(int(i)), dtype=np.float32)
        for d, (g, r) in enumerate(zip(s.heads, s.relations)):
            r = base_relation(r) if label == "base" else r
            for name in (r, ALL):
                c = out.setdefault(name, np.zeros((2, store.num_layers * store.num_heads + 1), dtype=np.int64))
                c[:, -1] += 1
                for k in range(store.num_layers * store.num_heads):
                    row, col = w[k // store.num_heads, k % store.num_heads, d].copy(), \
                        w[k // store.num_heads, k % store.num_heads, :, d].copy()
                    row[d] = col[d] = 0
                    c[0, k] += int(np.argmax(row)) == g
                    c[1, k] += int(np.argmax(col)) == g
    return out


def test_counts_equal_a_plain_loop_for_both_label_sets(data):
    corpus, store = data
    counts = count(store, corpus)
    lh = store.num_layers * store.num_heads
    for label in ("as_is", "base"):
        c, ref = counts[label], loop_counts(corpus, store, label)
        assert set(c.relations) == set(ref)
        for r, expect in ref.items():
            row = c.totals[c.relations.index(r)]
            assert np.array_equal(row[:2 * lh].reshape(2, lh), expect[:, :lh]), (label, r)
            assert row[2 * lh] == expect[0, -1]


def test_planted_heads_score_one_and_previous_word_head_equals_the_minus_one_baseline(data):
    corpus, store = data
    counts = count(store, corpus)
    table, base = accuracy_table(counts["as_is"], DIRS, OFFS, 2, 3, min_count=1, ci=0.95, skip_relations=["root"])
    rel = table[table["relation"] != ALL]
    oracle = rel[(rel.layer == 0) & (rel["head"] == 0) & (rel.direction == "dep_to_head")]
    assert (oracle["accuracy"] == 1.0).all()
    oracle_t = rel[(rel.layer == 0) & (rel["head"] == 1) & (rel.direction == "head_to_dep")]
    assert (oracle_t["accuracy"] == 1.0).all()
    prev = rel[(rel.layer == 1) & (rel["head"] == 0) & (rel.direction == "dep_to_head")].set_index("relation")
    minus1 = base[(base["offset"] == -1)].set_index("relation")
    assert np.allclose(prev["accuracy"], minus1.loc[prev.index, "accuracy"])
    # all: every word counts, roots never correct
    words = sum(len(s) for s in corpus)
    all_row = table[(table.relation == ALL) & (table.layer == 0) & (table["head"] == 0)
                    & (table.direction == "dep_to_head")].iloc[0]
    assert all_row["n"] == words and all_row["correct"] == words - len(corpus)
    assert "root" not in set(table["relation"])
    best = best_heads(table).set_index("relation")
    assert best.loc["det", "layer"] == 0 and best.loc["det", "head"] == 0  # first direction wins the tie
    assert best.loc["det", "direction"] == "dep_to_head"


def test_min_count_and_subtype_collapsing(data):
    corpus, store = data
    counts = count(store, corpus)
    as_is, base = counts["as_is"], counts["base"]
    assert "nmod:poss" in as_is.relations and "nmod:poss" not in base.relations
    n = {r: as_is.totals[k, 2 * 6] for k, r in enumerate(as_is.relations)}
    assert base.totals[base.relations.index("nmod"), 2 * 6] == n["nmod"] + n["nmod:poss"]
    assert np.array_equal(collapse(as_is).totals, base.totals)
    big = max(v for r, v in n.items() if r != ALL)
    table, _ = accuracy_table(as_is, DIRS, OFFS, 2, 3, min_count=big, ci=0.95, skip_relations=[])
    assert set(table["relation"]) <= {r for r, v in n.items() if v >= big} | {ALL}


def test_order_and_chunking_do_not_change_scores(data):
    corpus, store = data
    a = count(store, corpus, bootstrap=20, seed=3)
    b = count(store, corpus, bootstrap=20, seed=3, chunk_words=20, block_mb=0.001)
    assert np.array_equal(a["as_is"].totals, b["as_is"].totals)
    assert np.allclose(a["as_is"].boot, b["as_is"].boot)
    perm = np.random.default_rng(0).permutation(store.indices)
    c = count(store, corpus, perm)
    assert np.array_equal(a["as_is"].totals, c["as_is"].totals)


def test_bootstrap_totals_are_the_resampled_sums(data):
    corpus, store = data
    counts = count(store, corpus, bootstrap=5, seed=11)["as_is"]
    w = resample_counts(len(store.indices), 5, 11)
    # recompute resample 2 by scoring each sentence alone and weighting it
    k = counts.relations.index(ALL)
    expect = np.zeros(counts.totals.shape[1])
    for s, i in enumerate(store.indices):
        one = count(store, corpus, [int(i)])["as_is"]
        expect += w[2, s] * one.totals[one.relations.index(ALL)]
    assert np.allclose(counts.boot[k, 2], expect)


def test_resample_counts_and_percentile_interval():
    w = resample_counts(17, 9, seed=4)
    assert w.shape == (9, 17) and (w.sum(axis=1) == 17).all()
    assert np.array_equal(w, resample_counts(17, 9, seed=4))
    # the sentence-major layout holds the same draws (blocks of 64 resamples and a part block)
    big = resample_counts(17, 150, seed=4)
    assert np.array_equal(resample_counts(17, 150, seed=4, sentence_major=True), big.T) and big[100:].any()
    lo, hi = percentile_interval(np.arange(101, dtype=float)[:, None], 0.9)
    assert lo[0] == pytest.approx(5.0) and hi[0] == pytest.approx(95.0)
    lo, hi = percentile_interval(np.array([[np.nan], [1.0], [3.0]]), 0.5)  # NaN resamples are ignored
    assert lo[0] == pytest.approx(1.5) and hi[0] == pytest.approx(2.5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_percentile_interval_is_numpys_nanpercentile_to_the_bit(dtype):
    rng = np.random.default_rng(3)
    for b, nan_rows, nan_cells, ties in ((1000, 0.05, 0.0, False), (1000, 0.0, 0.01, True), (7, 0.3, 0.2, True),
                                         (2, 0.0, 0.4, False), (1, 0.0, 0.0, False)):
        x = rng.random((b, 30))
        x = np.round(x, 1) if ties else x
        x[rng.random(b) < nan_rows] = np.nan  # a relation's empty resamples
        x[rng.random((b, 30)) < nan_cells] = np.nan
        x[:, 1] = np.nan  # a column without any value: no interval
        x = x.astype(dtype)
        for ci in (0.95, 0.5, 0.999):
            q = 100 * (1 - ci) / 2, 100 * (1 + ci) / 2
            with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
                ref = np.nanpercentile(x, q, axis=0)
            lo, hi = percentile_interval(x, ci)
            assert np.array_equal(lo, ref[0], equal_nan=True) and np.array_equal(hi, ref[1], equal_nan=True)
            lo3, _ = percentile_interval(np.moveaxis(x.reshape(b, 5, 6), 0, 1), ci, axis=1)
            assert np.array_equal(lo3, lo.reshape(5, 6), equal_nan=True)


def test_perfect_head_has_a_degenerate_interval_and_beats_a_weak_baseline(data):
    corpus, store = data
    counts = count(store, corpus, bootstrap=200, seed=0)
    table, _ = accuracy_table(counts["as_is"], DIRS, OFFS, 2, 3, min_count=1, ci=0.95, skip_relations=["root"])
    det = table[(table.relation == "det") & (table.layer == 0) & (table["head"] == 0)
                & (table.direction == "dep_to_head")].iloc[0]
    assert det["ci_low"] == det["ci_high"] == 1.0
    assert det["gain_ci_low"] > 0 and det["gain"] == pytest.approx(1.0 - det["baseline_accuracy"])


def test_resample_counts_do_not_depend_on_how_many_draws_are_made_at_once(monkeypatch):
    """A large corpus draws fewer resamples at a time (bounded temporaries); the counts are the same bits."""
    import probing.stats.bootstrap as bootstrap

    whole = resample_counts(17, 150, seed=4)
    monkeypatch.setattr(bootstrap, "_DRAW_CELLS", 17 * 3 + 5)  # three resamples a block, the last block two
    assert np.array_equal(bootstrap.resample_counts(17, 150, seed=4), whole)
    assert np.array_equal(bootstrap.resample_counts(17, 150, seed=4, sentence_major=True), whole.T)
    monkeypatch.setattr(bootstrap, "_DRAW_CELLS", 1)  # fewer cells than sentences: one resample at a time
    assert np.array_equal(bootstrap.resample_counts(17, 150, seed=4), whole)
