"""Metrics of the structural probes (Hewitt and Manning 2019), with the conventions of their code
(john-hewitt/structural-probes, ``reporter.py``):

- **UUAS**: the minimum spanning tree of the predicted distances over the non-punctuation words, scored by
  the share of gold edges (undirected) it contains, pooled over all sentences. The gold edges are the gold
  arcs between two non-punctuation words (Hewitt and Manning take the spanning tree of the gold distances
  over the same words, which is the same set whenever punctuation words are leaves).
- **DSpr**: for every word, the Spearman correlation of its row of predicted distances with its row of gold
  distances (all words of the sentence, itself included, as in their code); averaged over the words of all
  sentences of one length, then over the lengths 5 to 50 that occur.
- **root accuracy**: the share of sentences whose least deep non-punctuation word (predicted depth) is the
  gold root.
- **NSpr**: per sentence, the Spearman correlation of predicted with gold depths (all words); averaged per
  sentence length, then over the lengths 5 to 50.

A row whose correlation is undefined (constant predictions) counts as 0 (their code would return NaN).
Sentences are per-sentence arrays: ``heads`` 0-based with -1 for the root, ``punct`` boolean masks.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np
from scipy.sparse.csgraph import minimum_spanning_tree
from scipy.stats import rankdata

SPEARMAN_LENGTHS = (5, 50)  # sentence lengths averaged by DSpr and NSpr, inclusive


def padded_ancestors(heads: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``A[b, i, k]`` true when word k is word i or one of its ancestors, for a batch of trees padded to
    ``(B, n)`` (``lengths`` words each, 0-based heads, -1 = root). Then ``|A_i| - 1`` is i's depth and
    ``|A_i| + |A_j| - 2 |A_i & A_j|`` the path length between i and j (the common ancestors are the LCA's).
    The loop runs over tree depth, vectorised over every word of the batch."""
    h = np.asarray(heads, dtype=np.int64)
    b, n = h.shape
    lengths = np.asarray(lengths, dtype=np.int64)
    valid = np.arange(n)[None, :] < lengths[:, None]
    h = np.where(valid, h, -1)
    bad = valid & ((h < -1) | (h >= lengths[:, None]) | (h == np.arange(n)[None, :]))
    roots = ((h == -1) & valid).sum(1)
    if bad.any() or np.any(roots[lengths > 0] != 1):
        s = int(np.flatnonzero(bad.any(1) | ((roots != 1) & (lengths > 0)))[0])
        raise ValueError(f"heads {h[s, :lengths[s]].tolist()} are not a tree with one root")
    anc = np.zeros((b, n, n), dtype=bool)
    bi, ii = np.nonzero(valid)
    anc[bi, ii, ii] = True
    cur = h.copy()
    for _ in range(n):
        bi, ii = np.nonzero(cur >= 0)
        if len(bi) == 0:
            return anc
        anc[bi, ii, cur[bi, ii]] = True
        cur[bi, ii] = h[bi, cur[bi, ii]]
    s = int(np.flatnonzero((cur >= 0).any(1))[0])
    raise ValueError(f"heads {h[s, :lengths[s]].tolist()} are not a tree (some words do not reach the root)")


def padded_tree_distances(heads: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Path lengths ``(B, n, n)`` within each padded tree (0 at padding)."""
    a = padded_ancestors(heads, lengths).astype(np.float32)
    size = a.sum(-1)
    common = a @ a.transpose(0, 2, 1)
    d = size[:, :, None] + size[:, None, :] - 2.0 * common
    n = a.shape[1]
    valid = np.arange(n)[None, :] < np.asarray(lengths)[:, None]
    return np.where(valid[:, :, None] & valid[:, None, :], d, 0).astype(np.int64)


def padded_tree_depths(heads: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Depths ``(B, n)`` within each padded tree (the root 0; 0 at padding)."""
    return np.maximum(padded_ancestors(heads, lengths).sum(-1) - 1, 0).astype(np.int64)


def tree_distances(heads: Sequence[int]) -> np.ndarray:
    """Path lengths ``(n, n)`` between every two words of the tree ``heads`` (0-based, -1 = root)."""
    h = np.asarray(heads, dtype=np.int64)
    return padded_tree_distances(h[None], np.array([len(h)]))[0]


def tree_depths(heads: Sequence[int]) -> np.ndarray:
    """Depth ``(n,)`` of every word: its path length to the root word (the root has depth 0)."""
    h = np.asarray(heads, dtype=np.int64)
    return padded_tree_depths(h[None], np.array([len(h)]))[0]


def many(fn, heads: Sequence[Sequence[int]], chunk: int = 64) -> list[np.ndarray]:
    """``fn`` (:func:`padded_tree_distances` or :func:`padded_tree_depths`) of many trees, in order:
    sentences of similar length padded together, ``chunk`` at a time."""
    lengths = np.array([len(h) for h in heads], dtype=np.int64)
    out: list[np.ndarray] = [np.zeros(0)] * len(heads)
    order = np.argsort(lengths, kind="stable")
    for lo in range(0, len(order), chunk):
        idx = order[lo:lo + chunk]
        n = int(lengths[idx].max()) if len(idx) else 0
        pad = np.full((len(idx), n), -1, dtype=np.int64)
        for k, s in enumerate(idx):
            pad[k, :lengths[s]] = heads[s]
        got = fn(pad, lengths[idx])
        for k, s in enumerate(idx):
            m = int(lengths[s])
            out[s] = got[k, :m, :m] if got.ndim == 3 else got[k, :m]
    return out


def mst_edges(dist: np.ndarray, keep: np.ndarray | None = None) -> np.ndarray:
    """Edges ``(m, 2)`` (``a < b``, word indices) of the minimum spanning tree of the symmetric distances
    ``dist`` over the words where ``keep`` is true (all words for None)."""
    d = np.asarray(dist, dtype=np.float64)
    idx = np.arange(d.shape[0]) if keep is None else np.flatnonzero(keep)
    if len(idx) < 2:
        return np.zeros((0, 2), dtype=np.int64)
    sub = d[np.ix_(idx, idx)]
    # scipy reads a zero as "no edge": shift every weight above zero (all spanning trees have the same
    # number of edges, so a constant shift does not change which tree is minimal)
    w = np.triu(sub - sub.min() + 1.0, k=1)
    tree = minimum_spanning_tree(w).tocoo()
    a, b = idx[tree.row], idx[tree.col]
    return np.stack([np.minimum(a, b), np.maximum(a, b)], axis=1).astype(np.int64)


def gold_edges(heads: Sequence[int], keep: np.ndarray | None = None) -> np.ndarray:
    """The gold arcs ``(m, 2)`` (``a < b``) whose two words are both kept."""
    h = np.asarray(heads, dtype=np.int64)
    ok = h >= 0
    if keep is not None:
        keep = np.asarray(keep, dtype=bool)
        ok &= keep & keep[np.maximum(h, 0)]
    dep = np.flatnonzero(ok)
    return np.stack([np.minimum(dep, h[dep]), np.maximum(dep, h[dep])], axis=1).astype(np.int64)


def uuas_counts(pred_dist: np.ndarray, heads: Sequence[int], punct: np.ndarray | None) -> tuple[int, int]:
    """``(gold edges found by the predicted spanning tree, gold edges)`` of one sentence, punctuation
    (``punct`` true) left out of both trees."""
    keep = None if punct is None else ~np.asarray(punct, dtype=bool)
    n = len(heads)
    pred = mst_edges(pred_dist, keep)
    gold = gold_edges(heads, keep)
    found = np.isin(pred[:, 0] * n + pred[:, 1], gold[:, 0] * n + gold[:, 1])
    return int(found.sum()), int(len(gold))


def uuas(pred_dists: Sequence[np.ndarray], heads: Sequence[Sequence[int]],
         punct: Sequence[np.ndarray | None]) -> float:
    """Undirected unlabelled attachment score of the predicted spanning trees, pooled over sentences."""
    return float(ratio_of_groups(uuas_terms(pred_dists, heads, punct)))


def uuas_terms(pred_dists: Sequence[np.ndarray], heads: Sequence[Sequence[int]],
               punct: Sequence[np.ndarray | None]) -> "Terms":
    """UUAS as per-sentence terms: gold edges found over gold edges, one group."""
    counts = np.array([uuas_counts(p, h, m) for p, h, m in zip(pred_dists, heads, punct)],
                      dtype=np.float64).reshape(-1, 2)
    return Terms(counts[:, 0], counts[:, 1], np.zeros(len(counts), dtype=np.int64), np.ones(len(counts), bool))


class Terms(NamedTuple):
    """A headline metric as per-sentence terms: the mean over the counted groups ``g`` of ``Σ_{s in g} num_s /
    Σ_{s in g} den_s``. UUAS is one group (found / gold edges); DSpr groups sentences by length (the summed
    row correlations over the rows), counting lengths 5-50. A bootstrap over sentences re-weights the terms
    (:func:`ratio_of_groups`) without decoding a tree again."""

    num: np.ndarray  # (S,)
    den: np.ndarray  # (S,)
    group: np.ndarray  # (S,) int
    counted: np.ndarray  # (S,) bool: the sentence's group enters the headline


def ratio_of_groups(t: Terms, weights: np.ndarray | None = None, every_group: bool = False):
    """The metric under each row of sentence ``weights`` ``(R, S)`` (None: each sentence once; a scalar
    comes back): per group the weighted ratio, then their mean over the counted groups that the weights
    reach. ``every_group``: ``{group: ratio}`` of every group instead (weights None only)."""
    w = np.ones((1, len(t.num))) if weights is None else np.atleast_2d(np.asarray(weights, dtype=np.float64))
    keep = np.ones(len(t.num), bool) if every_group else np.asarray(t.counted, bool)
    groups, inv = np.unique(t.group[keep], return_inverse=True)
    onehot = np.zeros((int(keep.sum()), len(groups)))
    onehot[np.arange(len(inv)), inv] = 1.0
    num, den = w[:, keep] @ (onehot * t.num[keep, None]), w[:, keep] @ (onehot * t.den[keep, None])
    with np.errstate(invalid="ignore", divide="ignore"):
        per = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    if every_group:
        return {int(g): float(v) for g, v in zip(groups, per[0]) if np.isfinite(v)}
    counted = np.isfinite(per).sum(1)
    out = np.where(counted > 0, np.nansum(per, 1) / np.maximum(counted, 1), np.nan)
    return float(out[0]) if weights is None else out


def spearman_rows(pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Spearman correlation of every row of ``pred`` with the same row of ``gold`` (``(r, n)`` -> ``(r,)``),
    ties ranked by their mean rank; an undefined correlation (a constant row) is 0."""
    rp = rankdata(np.asarray(pred, dtype=np.float64), axis=-1)
    rg = rankdata(np.asarray(gold, dtype=np.float64), axis=-1)
    rp -= rp.mean(axis=-1, keepdims=True)
    rg -= rg.mean(axis=-1, keepdims=True)
    den = np.sqrt((rp ** 2).sum(-1) * (rg ** 2).sum(-1))
    num = (rp * rg).sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)
    return r


def length_averaged(lengths: np.ndarray, values: np.ndarray,
                    span: tuple[int, int] = SPEARMAN_LENGTHS) -> tuple[float, dict[int, float]]:
    """Mean of ``values`` per length, then the mean of those over the lengths within ``span``:
    ``(average, {length: mean})``."""
    lengths, values = np.asarray(lengths), np.asarray(values, dtype=np.float64)
    t = Terms(values, np.ones(len(values)), lengths, (lengths >= span[0]) & (lengths <= span[1]))
    return ratio_of_groups(t), ratio_of_groups(t, every_group=True)


def dspr(pred_dists: Sequence[np.ndarray], gold_dists: Sequence[np.ndarray]) -> tuple[float, dict[int, float]]:
    """Distance Spearman: per-word row correlations, averaged per sentence length, then over lengths 5-50.
    Returns ``(dspr, {length: mean correlation})``."""
    t = dspr_terms(pred_dists, gold_dists)
    return ratio_of_groups(t), ratio_of_groups(t, every_group=True)


def dspr_terms(pred_dists: Sequence[np.ndarray], gold_dists: Sequence[np.ndarray]) -> Terms:
    """DSpr as per-sentence terms: the sum of the sentence's row correlations over its rows, grouped by
    length (sentences of one word have none and are not counted)."""
    n_s = np.array([len(g) for g in gold_dists], dtype=np.int64)
    sums = np.zeros(len(n_s))
    for n in np.unique(n_s[n_s >= 2]):  # one vectorised call per sentence length
        ks = np.flatnonzero(n_s == n)
        p = np.concatenate([np.asarray(pred_dists[k], dtype=np.float64).reshape(n, n) for k in ks])
        g = np.concatenate([np.asarray(gold_dists[k], dtype=np.float64).reshape(n, n) for k in ks])
        sums[ks] = spearman_rows(p, g).reshape(len(ks), n).sum(1)
    return Terms(sums, np.where(n_s >= 2, n_s, 0).astype(np.float64), n_s, _in_span(n_s) & (n_s >= 2))


def nspr(pred_depths: Sequence[np.ndarray], gold_depths: Sequence[np.ndarray]) -> tuple[float, dict[int, float]]:
    """Norm Spearman: per-sentence correlation of predicted with gold depths, averaged per sentence length,
    then over lengths 5-50. Returns ``(nspr, {length: mean correlation})``."""
    t = nspr_terms(pred_depths, gold_depths)
    return ratio_of_groups(t), ratio_of_groups(t, every_group=True)


def nspr_terms(pred_depths: Sequence[np.ndarray], gold_depths: Sequence[np.ndarray]) -> Terms:
    """NSpr as per-sentence terms: each sentence's correlation, grouped by length."""
    n_s = np.array([len(g) for g in gold_depths], dtype=np.int64)
    r = np.zeros(len(n_s))
    for n in np.unique(n_s[n_s >= 2]):
        ks = np.flatnonzero(n_s == n)
        p = np.stack([np.asarray(pred_depths[k], dtype=np.float64) for k in ks])
        g = np.stack([np.asarray(gold_depths[k], dtype=np.float64) for k in ks])
        r[ks] = spearman_rows(p, g)
    return Terms(r, (n_s >= 2).astype(np.float64), n_s, _in_span(n_s) & (n_s >= 2))


def _in_span(lengths: np.ndarray, span: tuple[int, int] = SPEARMAN_LENGTHS) -> np.ndarray:
    return (lengths >= span[0]) & (lengths <= span[1])


def root_accuracy(pred_depths: Sequence[np.ndarray], heads: Sequence[Sequence[int]],
                  punct: Sequence[np.ndarray | None]) -> float:
    """Share of sentences whose least deep non-punctuation word (predicted) is the gold root (every
    sentence counts; one made only of punctuation falls back to all its words)."""
    return ratio_of_groups(root_terms(pred_depths, heads, punct))


def root_terms(pred_depths: Sequence[np.ndarray], heads: Sequence[Sequence[int]],
               punct: Sequence[np.ndarray | None]) -> Terms:
    """Root accuracy as per-sentence terms: a hit (1 or 0) per sentence, one group."""
    hits = []
    for p, h, m in zip(pred_depths, heads, punct):
        p = np.asarray(p, dtype=np.float64)
        if m is not None and not np.all(m):
            p = np.where(np.asarray(m, dtype=bool), np.inf, p)
        hits.append(int(np.argmin(p)) == int(np.flatnonzero(np.asarray(h) == -1)[0]))
    n = len(hits)
    return Terms(np.asarray(hits, dtype=np.float64), np.ones(n), np.zeros(n, np.int64), np.ones(n, bool))
