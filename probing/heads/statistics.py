"""What ``task=heads`` needs of a measure's maps, made while they are extracted so the maps need not be kept
(``extract.keep_maps=false``).

Per sentence, every head's pick for every word in both directions (``(2, L*H, n)`` int16: the argmax of the
word's row, ``dep_to_head``, and of its column, ``head_to_dep``, as :mod:`probing.heads.scoring` takes them):
relation accuracy, its baselines, the bootstrap and the held-out selection are computed from these and the gold
tree, as from the maps. Per shard, additive totals: attention patterns, head distances over the first
``heads.distance_sentences`` sentences of the corpus and trees over the first ``heads.tree_sentences``, in fixed
point or integers (:mod:`probing.stats.fixed`), so that the totals of a store built in parts, or in another order,
are the same numbers to the bit as those of one pass over stored maps.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np
import pandas as pd

from probing.config import Direction, HeadsConfig, Measure, PatternRows
from probing.corpus import Corpus
from probing.heads.distances import DistanceTotals, head_distances
from probing.heads.kernels import picks
from probing.heads.patterns import PatternTotals, attention_patterns
from probing.heads.scoring import as_ordered
from probing.heads.trees import TreeTotals, tree_scores
from probing.store import ArrayLayout, AttentionStore, StatisticsStore

VERSION = 1  # of what a record and the totals hold
ALL_DIRECTIONS = list(Direction)  # a record's first axis: dep_to_head, head_to_dep


def within(index: int, first: Optional[int]) -> bool:
    """Whether sentence ``index`` is among the first ``first`` sentences of the corpus (None: all)."""
    return first is None or index < first


class HeadStatistics:
    """The heads analysis's statistics of one measure's maps, made sentence by sentence during extraction (the
    :class:`~probing.extract.MapStatistics` an extraction with ``extract.keep_maps=false`` stores)."""

    name = "heads_stats"
    dtype = "int16"

    def __init__(self, corpus: Corpus, h: HeadsConfig, measure: Measure):
        self.corpus, self.h, self.measure = corpus, h, Measure(measure)
        self._totals: Optional[tuple[PatternTotals, DistanceTotals, TreeTotals]] = None

    def fingerprint(self) -> dict:
        h = self.h
        return {"version": VERSION, "punct_upos": list(h.punct_upos), "pattern_rows": str(PatternRows(h.pattern_rows)),
                "distance_sentences": h.distance_sentences, "tree_sentences": h.tree_sentences}

    def layout(self, num_layers: int, num_heads: int) -> ArrayLayout:
        return ArrayLayout((len(ALL_DIRECTIONS), num_layers * num_heads), 1)

    def _fresh(self, layers: int, heads: int) -> tuple[PatternTotals, DistanceTotals, TreeTotals]:
        h = self.h
        return (PatternTotals(layers, heads, h.punct_upos, h.pattern_rows), DistanceTotals(layers * heads),
                TreeTotals(layers * heads, ALL_DIRECTIONS))

    def record(self, index: int, maps: np.ndarray, prefix: int, n_words: int) -> np.ndarray:
        """Sentence ``index``'s record from its ``(L, H, M, M)`` maps (as stored), its totals added."""
        layers, heads = maps.shape[:2]
        if self._totals is None:
            self._totals = self._fresh(layers, heads)
        patterns, distances, trees = self._totals
        s = self.corpus[index]
        stochastic = self.measure.stochastic
        patterns.add(maps, prefix, n_words, s.upos or (), stochastic)
        words = maps[..., prefix:prefix + n_words, prefix:prefix + n_words]
        if within(index, self.h.distance_sentences):
            distances.add(maps, prefix, n_words, stochastic)
        if within(index, self.h.tree_sentences) and s.heads is not None:
            trees.add(words, np.asarray(s.heads, dtype=np.int64))
        ordered = as_ordered(np.ascontiguousarray(words)).reshape(layers * heads, n_words, n_words)
        return picks(ordered)  # (2, LH, n), as pointers() gives them from a padded chunk

    def take(self) -> dict[str, np.ndarray]:
        if self._totals is None:
            return {}
        out = {k: v for t in self._totals for k, v in t.state().items()}
        self._totals = None
        return out

    def drop(self) -> None:
        self._totals = None


def statistics(corpus: Corpus, h: HeadsConfig) -> Callable[[Measure], HeadStatistics]:
    """What ``task=heads`` keeps of each measure's maps of ``corpus`` where ``extract.keep_maps=false``."""
    return lambda measure: HeadStatistics(corpus, h, measure)


def read_patterns(store: StatisticsStore, h: HeadsConfig) -> PatternTotals:
    return PatternTotals(store.num_layers, store.num_heads, h.punct_upos, h.pattern_rows).load(store.totals())


def read_distances(store: StatisticsStore) -> DistanceTotals:
    return DistanceTotals(store.num_layers * store.num_heads).load(store.totals())


def read_trees(store: StatisticsStore) -> TreeTotals:
    return TreeTotals(store.num_layers * store.num_heads, ALL_DIRECTIONS).load(store.totals())


def first_sentences(indices: np.ndarray, first: Optional[int]) -> np.ndarray:
    """The sentences of ``indices`` among the first ``first`` of the corpus (skipped ones are not replaced)."""
    return indices if first is None else indices[indices < first]


def patterns_of(store: AttentionStore | StatisticsStore, corpus: Corpus, h: HeadsConfig) -> pd.DataFrame:
    """The patterns table of every sentence of the store: from the maps, or from the totals kept instead."""
    if isinstance(store, StatisticsStore):
        return read_patterns(store, h).table()
    return attention_patterns(store, corpus, store.indices, list(h.punct_upos), h.pattern_rows)


def distances_of(store: AttentionStore | StatisticsStore, h: HeadsConfig) -> tuple[np.ndarray, int]:
    """Mean head distances over the first ``heads.distance_sentences`` sentences, and the rows averaged."""
    if isinstance(store, StatisticsStore):
        return read_distances(store).mean()
    return head_distances(store, first_sentences(store.indices, h.distance_sentences))


def trees_of(store: AttentionStore | StatisticsStore, corpus: Corpus, h: HeadsConfig,
             directions: Sequence[Direction]) -> pd.DataFrame:
    """Tree scores over the first ``heads.tree_sentences`` sentences."""
    if isinstance(store, StatisticsStore):
        return read_trees(store).table(store.num_layers, store.num_heads, directions)
    return tree_scores(store, corpus, first_sentences(store.indices, h.tree_sentences), directions)
