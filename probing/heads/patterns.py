"""Where heads look, whatever the syntax (Clark et al. 2019, section 3).

Per head, the mean over attending rows of: the attention to the special positions before the words
(``cls``: [CLS], or a decoder's BOS) and after them (``sep``: [SEP]; none for a decoder), to the first position
(``sink``: where a causal model parks attention it does not need, its BOS, or its first word where the tokenizer
adds none; an encoder's [CLS]), to punctuation words, to the next position, the previous position and itself,
and the entropy of the row (nats) beside the entropy of uniform attention over the same positions. Positions are
the full sequence (special tokens kept), so the last word's next position is [SEP].
A store whose rows are not distributions (``norm``, ``norm_layer``) has its rows normalised first
(:mod:`probing.heads.rows`): its patterns are shares of each row's total.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
from scipy.special import entr

from probing.config import PatternRows
from probing.corpus import Corpus
from probing.heads.kernels import pattern_sums
from probing.heads.rows import distributions
from probing.progress import progress
from probing.schema import PATTERN_METRICS as METRICS
from probing.schema import RUN_KEYS
from probing.stats.fixed import check, to_fixed, to_float
from probing.store import AttentionStore


def sentence_patterns(maps: np.ndarray, prefix: int, n_words: int, punct: np.ndarray, pattern_rows: PatternRows
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Sums over one sentence's attending rows: ``(L, H, M, M)`` maps, ``punct`` a bool ``(n_words,)`` mask
    -> ``(len(METRICS), L, H)`` sums and ``(len(METRICS),)`` row counts (next/prev only count rows that have
    a next/previous position)."""
    rows = PatternRows(pattern_rows)
    a = np.asarray(maps, dtype=np.float32)
    m = a.shape[-1]
    r = np.arange(prefix, prefix + n_words) if rows is PatternRows.words else np.arange(m)
    sel = a[..., r, :]  # (L, H, R, M)
    has_next, has_prev = r[r + 1 < m], r[r >= 1]
    sums = {
        "cls": sel[..., :prefix].sum(axis=(-1, -2)),
        "sep": sel[..., prefix + n_words:].sum(axis=(-1, -2)),
        "sink": sel[..., 0].sum(axis=-1),
        "punct": sel[..., prefix + np.flatnonzero(punct)].sum(axis=(-1, -2)),
        "next": a[..., has_next, has_next + 1].sum(axis=-1),
        "prev": a[..., has_prev, has_prev - 1].sum(axis=-1),
        "self": a[..., r, r].sum(axis=-1),
        "entropy": entr(sel).sum(axis=(-1, -2)),
        "uniform_entropy": len(r) * np.log(m),  # every row of this sentence spans the same m positions
    }
    counts = {"next": len(has_next), "prev": len(has_prev)}
    out = np.empty((len(METRICS),) + a.shape[:2], dtype=np.float64)
    for k, name in enumerate(METRICS):
        out[k] = sums[name]
    return out, np.array([counts.get(name, len(r)) for name in METRICS], dtype=np.int64)


class PatternTotals:
    """Per-head sums of :data:`METRICS` over attending rows, in fixed point (:mod:`probing.stats.fixed`: a sentence's
    sums rounded once, so the totals are the same whatever order or process added the sentences), and the row
    counts. ``state()`` / ``from_state`` and ``+`` make them mergeable."""

    def __init__(self, layers: int, heads: int, punct_upos: Sequence[str], pattern_rows: PatternRows):
        self.punct, self.rows = set(punct_upos), PatternRows(pattern_rows)
        self.sums = np.zeros((len(METRICS), layers, heads), dtype=np.int64)
        self.counts = np.zeros(len(METRICS), dtype=np.int64)

    def add(self, maps: np.ndarray, prefix: int, n_words: int, upos: Sequence[str], stochastic: bool) -> None:
        """One sentence's ``(L, H, M, M)`` maps (rows normalised unless ``stochastic``): the sums of
        :func:`sentence_patterns`, by its compiled kernel."""
        punct = np.array([u in self.punct for u in upos] if upos else [False] * n_words, dtype=bool)
        layers, heads, m = maps.shape[0], maps.shape[1], maps.shape[-1]
        a = distributions(maps, stochastic).reshape(layers * heads, m, m)
        every = self.rows is PatternRows.all
        ssum = np.empty((len(METRICS), layers, heads))
        ssum[:-1] = pattern_sums(a, prefix, n_words, punct, every).reshape(-1, layers, heads)
        rows = m if every else n_words
        ssum[-1] = rows * np.log(m)  # uniform_entropy: every row spans the same m positions
        self.sums += to_fixed(ssum)
        r = np.arange(prefix, prefix + n_words) if not every else np.arange(m)
        counts = {"next": int((r + 1 < m).sum()), "prev": int((r >= 1).sum())}
        self.counts += np.array([counts.get(name, len(r)) for name in METRICS], dtype=np.int64)

    def state(self) -> dict[str, np.ndarray]:
        check(self.sums, "attention patterns")
        return {"pattern_sums": self.sums, "pattern_counts": self.counts}

    def load(self, state: dict[str, np.ndarray]) -> "PatternTotals":
        self.sums, self.counts = state["pattern_sums"].astype(np.int64), state["pattern_counts"].astype(np.int64)
        return self

    def table(self) -> pd.DataFrame:
        """One row per (layer, head): the mean of each metric over the rows added."""
        layers, heads = self.sums.shape[1:]
        with np.errstate(invalid="ignore", divide="ignore"):
            means = to_float(self.sums) / self.counts[:, None, None]
        out = pd.DataFrame({"layer": np.repeat(np.arange(layers), heads),
                            "head": np.tile(np.arange(heads), layers)})
        for k, name in enumerate(METRICS):
            out[name] = means[k].ravel()
        out["rows"] = int(self.counts[0])
        return out


def attention_patterns(store: AttentionStore, corpus: Corpus, indices: Sequence[int], punct_upos: Sequence[str],
                       pattern_rows: PatternRows) -> pd.DataFrame:
    """One row per (layer, head): the means of :data:`METRICS` over every attending row of ``indices``
    (a loop over sentences, numpy over layers, heads and positions; rows normalised unless the store's are)."""
    totals = PatternTotals(store.num_layers, store.num_heads, punct_upos, pattern_rows)
    for i in progress([int(i) for i in indices], "attention patterns", total=len(indices)):
        s = corpus[i]
        totals.add(store.maps(i), int(store.prefix[i]), int(store.n_words[i]), s.upos or (), store.stochastic)
    store.close()
    return totals.table()


def layer_means(patterns: pd.DataFrame) -> pd.DataFrame:
    """The per-head means averaged over the heads of each layer."""
    keys = [c for c in RUN_KEYS if c in patterns.columns]
    return patterns.groupby(keys + ["layer"], as_index=False)[list(METRICS)].mean()
