"""Relation accuracy of every head, with fixed-offset baselines and bootstrap intervals over sentences.

One pass over the store in chunks. Per chunk, every word's hits (all heads, both directions, every
offset) are summed per (relation, sentence); those per-sentence counts feed the running totals and, through
the resample-count matrix, every bootstrap resample at once (``boot += counts_of_resample @ per_sentence``).
Memory is the fixed-size accumulators plus one chunk, whatever the corpus size.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Iterator, Optional, Sequence

import numpy as np
import pandas as pd

from probing.buffers import release_free_memory
from probing.config import Direction, LabelSet
from probing.corpus import Corpus
from probing.corpus.sentence import base_relation
from probing.heads.scoring import offset_correct, pointers
from probing.progress import progress
from probing.schema import ALL
from probing.stats.bootstrap import percentile_interval, resample_counts
from probing.store import AttentionStore, StatisticsStore
from probing.store.chunks import iter_chunks, sentence_order

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RelationCounts:
    """Totals of one label set.

    ``relations``: names, ``ALL`` last. ``totals``: ``(R, F)`` with F = D*LH hits (direction-major), then the
    arc count, then K offset hits. ``boot``: ``(R, B, F)`` the same totals in each of B resamples, or None.
    """

    label_set: LabelSet
    relations: list[str]
    totals: np.ndarray
    boot: Optional[np.ndarray]


def relation_ids(corpus: Corpus, indices: np.ndarray) -> tuple[list[str], list[np.ndarray]]:
    """The labelled (``as_is``) relation vocabulary (sorted, ``ALL`` appended) and each sentence's ids."""
    # a tree without labels (e.g. an HF dataset without a relation column) still counts in ALL
    rels = [corpus[int(i)].relations or ("_",) * len(corpus[int(i)]) for i in indices]
    vocab = sorted({r for rs in rels for r in rs} - {ALL})
    lookup = {r: k for k, r in enumerate(vocab)}
    return vocab + [ALL], [np.fromiter((lookup[r] for r in rs), dtype=np.int64, count=len(rs)) for rs in rels]


def collapse(counts: RelationCounts) -> RelationCounts:
    """The ``base`` label set from the ``as_is`` one: totals (and every resample's totals) are sums over
    arcs, so a base relation's are the sums of its subtypes' rows (``nmod`` = ``nmod`` + ``nmod:poss`` + ...)."""
    names = [base_relation(r) if r != ALL else ALL for r in counts.relations]
    vocab = sorted(set(names) - {ALL}) + [ALL]
    target = np.array([vocab.index(r) for r in names])
    totals = np.zeros((len(vocab),) + counts.totals.shape[1:], dtype=counts.totals.dtype)
    np.add.at(totals, target, counts.totals)
    boot = None
    if counts.boot is not None:
        boot = np.zeros((len(vocab),) + counts.boot.shape[1:], dtype=counts.boot.dtype)
        for src, dst in enumerate(target):  # a few dozen relations
            boot[dst] += counts.boot[src]
    return RelationCounts(LabelSet.base, vocab, totals, boot)


class RelationAccumulator:
    """Running per-relation totals (and bootstrap totals) of one label set over chunks of sentences."""

    def __init__(self, relations: list[str], ids: list[np.ndarray], n_features: int,
                 weights_t: Optional[np.ndarray]):
        self.relations, self.ids = relations, ids
        self.n_sentences = len(ids)
        self.all_id = len(relations) - 1
        self.totals = np.zeros((len(relations), n_features), dtype=np.int64)
        self.weights_t = weights_t  # (S, B) uint8 resample counts, sentence-major for row gathers
        self.boot = (None if weights_t is None
                     else np.zeros((len(relations), weights_t.shape[1], n_features), dtype=np.float32))

    def add(self, rows: np.ndarray, n: np.ndarray, data: np.ndarray) -> None:
        """``data``: ``(W, F)`` int16 per-word features of the chunk's sentences ``rows`` (lengths ``n``),
        sentence by sentence."""
        rel = np.concatenate([self.ids[int(r)] for r in rows])
        sent = np.repeat(rows, n)
        key = rel * self.n_sentences + sent
        order = np.argsort(key, kind="stable")
        key = key[order]
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        per_key = np.add.reduceat(data[order], starts, axis=0)  # (K, F): one row per (relation, sentence)
        key_rel, key_sent = key[starts] // self.n_sentences, key[starts] % self.n_sentences
        # ALL: words are stored sentence by sentence, so its per-sentence rows need no sort
        sent_starts = np.r_[0, np.cumsum(n)[:-1]]
        per_sent = np.add.reduceat(data, sent_starts, axis=0)
        # keys are sorted by relation first, so each relation is one contiguous block
        rstarts = np.flatnonzero(np.r_[True, key_rel[1:] != key_rel[:-1]])
        rends = np.r_[rstarts[1:], len(key_rel)]
        self.totals[key_rel[rstarts]] += np.add.reduceat(per_key, rstarts, axis=0, dtype=np.int64)
        self.totals[self.all_id] += per_sent.sum(axis=0, dtype=np.int64)
        if self.boot is None:
            return
        for a, b in zip(rstarts, rends):
            self._resample(key_rel[a], key_sent[a:b], per_key[a:b])
        self._resample(self.all_id, rows, per_sent)

    def _resample(self, rel: int, sentences: np.ndarray, counts: np.ndarray, block: int = 2048) -> None:
        """``boot[rel] += weights[:, sentences] @ counts``, a bounded number of sentences at a time (the
        float copy of the weights is ``block x B``, whatever the group size)."""
        for a in range(0, len(sentences), block):
            w = self.weights_t[sentences[a:a + block]].astype(np.float32)  # (k, B)
            self.boot[rel] += w.T @ counts[a:a + block].astype(np.float32)

    def result(self) -> RelationCounts:
        return RelationCounts(LabelSet.as_is, self.relations, self.totals, self.boot)


def count_relations(store: AttentionStore, corpus: Corpus, indices: Optional[Sequence[int]],
                    directions: Sequence[Direction], offsets: Sequence[int], label_sets: Sequence[LabelSet],
                    bootstrap: int, seed: int, chunk_words: int, block_mb: float, reachable: bool = False
                    ) -> dict[LabelSet, RelationCounts]:
    """Hits of every head and offset per relation, for each label set (one pass over the store).

    ``reachable`` (one direction, a causal model's store): only the arcs that direction can see count, the
    head left of its dependent for ``dep_to_head``, right of it for ``head_to_dep`` (a word attends to itself
    and its left), so that no target a head cannot attend to is scored as a miss; root words count in neither.

    Two levels: sentences are read and scored in small blocks (``block_mb`` of maps, cache-sized), and
    their per-word hits are summed per (relation, sentence) in groups of about ``chunk_words`` words (bounded,
    so memory does not grow with the corpus; the bootstrap products run a bounded number of sentences at a time
    whatever the group). Only the labelled relations are counted; ``base`` is derived from them
    (:func:`collapse`)."""
    idx = sentence_order(store, indices)
    if len(idx) == 0:
        raise ValueError("no sentences to score")
    if not corpus.has_trees:
        raise ValueError(f"{corpus.name}: relation accuracy needs gold trees (this corpus has none)")
    label_sets = [LabelSet(ls) for ls in label_sets]
    if reachable and len(directions) != 1:
        raise ValueError("reachable arcs are counted one direction at a time")
    lh = store.num_layers * store.num_heads
    n_features = len(directions) * lh + 1 + len(offsets)
    weights_t = resample_counts(len(idx), bootstrap, seed, sentence_major=True) if bootstrap else None
    vocab, ids = relation_ids(corpus, idx)
    acc = RelationAccumulator(vocab, ids, n_features, weights_t)
    gold_heads = [np.asarray(corpus[int(i)].heads, dtype=np.int64) for i in idx]
    groups = word_groups(store.n_words[idx], chunk_words)
    for group in progress(groups, "relation accuracy", total=len(groups), unit="chunk"):
        rows, ns, parts = [], [], []
        for local, n, picks in word_pointers(store, idx[group], directions, block_mb):
            chunk_rows = group[local]
            parts.append(_word_features(picks, [gold_heads[int(r)] for r in chunk_rows], n, directions, offsets,
                                        reachable))
            rows.append(chunk_rows)
            ns.append(n)
        data = np.concatenate(parts)
        parts.clear()  # the blocks' copies go before the group is summed
        acc.add(np.concatenate(rows), np.concatenate(ns), data)
        del data
        release_free_memory()  # the group's temporaries, scattered through the heap, before the next group's
    as_is = acc.result()
    out = {LabelSet.as_is: as_is, LabelSet.base: collapse(as_is)}
    return {ls: out[ls] for ls in label_sets}


def word_groups(n_words: np.ndarray, chunk_words: int) -> list[np.ndarray]:
    """Positions shortest sentence first, cut into groups of at most ``chunk_words`` words (a longer
    sentence is a group of its own)."""
    order = np.argsort(n_words, kind="stable")
    total = np.cumsum(n_words[order])
    cuts, start, base = [], 0, 0
    while start < len(order):
        end = max(start + 1, int(np.searchsorted(total, base + chunk_words, side="right")))
        cuts.append(order[start:end])
        base, start = int(total[end - 1]), end
    return cuts


def word_pointers(store: AttentionStore | StatisticsStore, indices: np.ndarray, directions: Sequence[Direction],
                  block_mb: float) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Every head's pick for every word of ``indices``, a block at a time: ``(positions in indices, lengths,
    (W, D, L*H) int16 picks)``, from the maps (:func:`~probing.heads.scoring.pointers`) or, for a store that kept
    them instead of the maps (``extract.keep_maps=false``), read as they were made from the same maps."""
    if isinstance(store, StatisticsStore):
        which = [list(Direction).index(Direction(d)) for d in directions]  # a record's first axis
        picks = [store.pointers(int(i))[which].transpose(2, 0, 1) for i in indices]  # (n, D, LH) each
        yield np.arange(len(indices)), store.n_words[indices].astype(np.int64), np.concatenate(picks)
        store.close()
        return
    for chunk in iter_chunks(store, indices, len(indices), block_mb):
        yield chunk.rows, chunk.n, pointers(chunk.words, chunk.n, directions)


def _word_features(picks: np.ndarray, heads: list[np.ndarray], n: np.ndarray, directions: Sequence[Direction],
                   offsets: Sequence[int], reachable: bool = False) -> np.ndarray:
    """``(W, D*LH + 1 + K)`` int16 per word: head hits (a head's pick is the gold head; ROOT's -1 never is), a 1
    (the arc count), offset hits; all zero for a word whose arc the one direction cannot see when
    ``reachable``."""
    gold = np.concatenate(heads)
    position = np.concatenate([np.arange(k) for k in n])
    length = np.repeat(n, n)
    hits = picks == gold[:, None, None]  # (W, D, LH)
    off = offset_correct(gold, position, length, offsets)
    # int16: per-sentence sums stay far below 32767 (that many words in one sentence)
    out = np.concatenate([hits.reshape(len(hits), -1), np.ones((len(hits), 1), dtype=bool), off],
                         axis=1).astype(np.int16)
    if reachable:
        seen = (gold >= 0) & (gold < position) if directions[0] == Direction.dep_to_head else gold > position
        out *= seen[:, None]
    return out


def accuracy_table(counts: RelationCounts, directions: Sequence[Direction], offsets: Sequence[int],
                   num_layers: int, num_heads: int, min_count: int, ci: float, skip_relations: Sequence[str]
                   ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Tidy tables from the totals: one row per (relation, direction, layer, head) with accuracy, CI,
    best baseline and the CI of the difference; and one row per (relation, offset) for the baselines.

    Relations with fewer than ``min_count`` arcs, and those in ``skip_relations``, are left out; ``ALL`` always stays.
    The best baseline is the offset with the highest accuracy on the full data (ties: first in ``offsets``).
    """
    lh, d, k = num_layers * num_heads, len(directions), len(offsets)
    layer = np.repeat(np.arange(num_layers), num_heads)
    head = np.tile(np.arange(num_heads), num_layers)
    rows, base_rows = [], []
    for r, name in enumerate(counts.relations):
        tot = counts.totals[r]
        n = int(tot[d * lh])
        if name != ALL and (n < min_count or name in skip_relations):
            continue
        if n == 0:
            continue
        correct = tot[:d * lh].reshape(d, lh)
        off = tot[d * lh + 1:]
        best = int(np.argmax(off))
        boot = counts.boot[r] if counts.boot is not None else None
        acc_ci = diff_ci = off_ci = (np.full((d, lh), np.nan), np.full((d, lh), np.nan))
        off_ci = (np.full(k, np.nan), np.full(k, np.nan))
        if boot is not None:
            with np.errstate(invalid="ignore", divide="ignore"):
                bn = boot[:, d * lh][:, None]
                bacc = boot[:, :d * lh] / bn  # (B, D*LH)
                boff = boot[:, d * lh + 1:] / bn  # (B, K)
            lo, hi = percentile_interval(bacc, ci)
            acc_ci = (lo.reshape(d, lh), hi.reshape(d, lh))
            lo, hi = percentile_interval(bacc - boff[:, best:best + 1], ci)
            diff_ci = (lo.reshape(d, lh), hi.reshape(d, lh))
            off_ci = percentile_interval(boff, ci)
        for j, direction in enumerate(directions):
            rows.append(pd.DataFrame({
                "label_set": str(counts.label_set), "relation": name, "direction": str(direction),
                "layer": layer, "head": head, "n": n, "correct": correct[j].astype(np.int64),
                "accuracy": correct[j] / n, "ci_low": acc_ci[0][j], "ci_high": acc_ci[1][j],
                "baseline_offset": int(offsets[best]), "baseline_accuracy": off[best] / n,
                "gain": correct[j] / n - off[best] / n, "gain_ci_low": diff_ci[0][j], "gain_ci_high": diff_ci[1][j],
            }))
        base_rows.append(pd.DataFrame({
            "label_set": str(counts.label_set), "relation": name, "offset": np.asarray(offsets, dtype=np.int64),
            "n": n, "correct": off.astype(np.int64), "accuracy": off / n, "ci_low": off_ci[0],
            "ci_high": off_ci[1], "best": np.arange(k) == best,
        }))
    if not rows:
        return pd.DataFrame(), pd.DataFrame()
    return pd.concat(rows, ignore_index=True), pd.concat(base_rows, ignore_index=True)

