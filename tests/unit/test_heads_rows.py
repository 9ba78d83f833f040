"""Rows that are not distributions (``norm``, ``norm_layer``): patterns and JS distances normalise them first,
so a map whose rows are scaled gives the patterns and distances of the stochastic map it was scaled from."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon

from probing.config import Measure, PatternRows
from probing.corpus import Corpus, Sentence
from probing.heads.distances import head_distances
from probing.heads.patterns import attention_patterns
from probing.heads.rows import ROWS_NORMALISED, distributions, rows_convention
from probing.store import AttentionStore, write_manifest
from probing.store.shards import ShardWriter

# one layer, two heads over [CLS] w0 w1 (rows sum to 1)
A = np.array([[[[0.5, 0.25, 0.25], [0.2, 0.3, 0.5], [0.6, 0.2, 0.2]],
               [[1 / 3, 1 / 3, 1 / 3], [0.1, 0.8, 0.1], [0.25, 0.25, 0.5]]]])
ROW_SCALE = np.array([[[2.0], [5.0], [0.5]], [[3.0], [0.25], [7.0]]])  # a norm per head and row
CORPUS = Corpus("hand", "x", (Sentence("s0", ("cat", "."), (-1, 0), ("root", "punct"), ("NOUN", "PUNCT")),))


def _store(directory, maps: np.ndarray, measure: str) -> AttentionStore:
    directory.mkdir()
    w = ShardWriter(directory, "float32", shard_mb=0)
    w.add(0, maps.astype(np.float32), n_words=2, prefix=1)
    w.flush()
    write_manifest(directory, {"key": measure, "num_layers": 1, "num_heads": 2, "n_sentences": 1,
                               "store_dtype": "float32", "measure": measure})
    return AttentionStore(directory)


@pytest.mark.parametrize("scale", [4.0, ROW_SCALE], ids=["constant", "per-row"])
def test_scaled_rows_give_the_patterns_and_distances_of_the_stochastic_map(tmp_path, scale):
    att = _store(tmp_path / "att", A, "attention")
    norm = _store(tmp_path / "norm", A * scale, "norm")
    assert att.stochastic and not norm.stochastic and not Measure.norm_layer.stochastic
    assert rows_convention(norm) == ROWS_NORMALISED
    p_att = attention_patterns(att, CORPUS, [0], ["PUNCT"], PatternRows.words)
    p_norm = attention_patterns(norm, CORPUS, [0], ["PUNCT"], PatternRows.words)
    np.testing.assert_allclose(p_norm.drop(columns="rows"), p_att.drop(columns="rows"), rtol=1e-6)
    # by hand, head 0 over the word rows w0, w1: [CLS] gets (0.2 + 0.6) / 2, the punctuation w1 (0.5 + 0.2) / 2
    assert p_norm.loc[0, "cls"] == pytest.approx(0.4) and p_norm.loc[0, "punct"] == pytest.approx(0.35)
    h = -(A[0, 0, 1:] * np.log(A[0, 0, 1:])).sum(-1).mean()
    assert p_norm.loc[0, "entropy"] == pytest.approx(h)
    d_att, rows = head_distances(att, [0])
    d_norm, _ = head_distances(norm, [0])
    js = np.mean([jensenshannon(A[0, 0, r], A[0, 1, r], base=2) for r in (1, 2)])
    assert rows == 2 and d_norm[0, 1] == pytest.approx(js, rel=1e-5) and np.allclose(d_norm, d_att, atol=1e-6)


def test_distributions_leave_stochastic_rows_alone_and_zero_rows_zero():
    x = np.array([[0.0, 0.0], [1.0, 3.0]])
    assert np.array_equal(distributions(x, True), x.astype(np.float32))
    np.testing.assert_allclose(distributions(x, False), [[0, 0], [0.25, 0.75]])
