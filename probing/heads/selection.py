"""Held-out selection of the best head per relation.

The in-sample best head is the maximum over every layer, head and direction, and its accuracy is biased upward
by the choice (the winner's curse); so is the best offset's. Here the head and the offset are chosen on one part
of the sentences and scored on another: on a second split (``heads.select_split``), or, on one split, by two-fold
cross-fitting (chosen on one half of the sentences, scored on the other, both ways; the two scores averaged,
with their resamples paired). Intervals are bootstrap percentiles over the scoring sentences.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from probing.config import Direction
from probing.heads.head_accuracy import RelationCounts
from probing.stats.bootstrap import percentile_interval
from probing.stats.multiplicity import bootstrap_p


@dataclass(frozen=True)
class Part:
    """The counts of one part of the data, per group of directions counted together (one group for an
    encoder; one per direction for a causal model, whose directions score different arcs)."""

    groups: Sequence[tuple[Sequence[Direction], RelationCounts]]


@dataclass(frozen=True)
class Pick:
    """A relation's head and offset as chosen on one part and scored on another, with their resamples."""

    direction: str
    layer: int
    head: int
    offset: int
    n: int
    accuracy: float
    baseline: float
    acc_samples: Optional[np.ndarray]  # (B,)
    base_samples: Optional[np.ndarray]


def _row(counts: RelationCounts, relation: str) -> Optional[int]:
    return counts.relations.index(relation) if relation in counts.relations else None


def choose(part: Part, relation: str, lh: int, directions_kept: Optional[set[str]] = None
           ) -> Optional[tuple[int, int, int]]:
    """``(group, column, offset index)`` of the most accurate head of ``relation`` on ``part`` (ties: first
    group, first direction, lowest layer and head, as :func:`probing.schema.best_heads` breaks them), or None
    where the part has no arc of it. ``directions_kept``: the directions a group must include one of (a causal
    model's directions count different arcs, and one with a handful of them would win by chance); None: all."""
    best = None
    for g, (directions, counts) in enumerate(part.groups):
        r = _row(counts, relation)
        if r is None or (directions_kept is not None and not {str(d) for d in directions} & directions_kept):
            continue
        tot = counts.totals[r]
        d = len(directions)
        n = tot[d * lh]
        if n == 0:
            continue
        j = int(np.argmax(tot[:d * lh]))
        acc = tot[j] / n
        if best is None or acc > best[0]:
            best = (acc, g, j, int(np.argmax(tot[d * lh + 1:])))
    return None if best is None else best[1:]


def score(part: Part, relation: str, choice: tuple[int, int, int], lh: int, n_heads: int) -> Optional[Pick]:
    """The chosen head and offset of ``choice`` scored on ``part``."""
    g, j, k = choice
    directions, counts = part.groups[g]
    r = _row(counts, relation)
    d = len(directions)
    if r is None or counts.totals[r][d * lh] == 0:
        return None
    tot = counts.totals[r]
    n = int(tot[d * lh])
    acc_s = base_s = None
    if counts.boot is not None:
        boot = counts.boot[r].astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            acc_s, base_s = boot[:, j] / boot[:, d * lh], boot[:, d * lh + 1 + k] / boot[:, d * lh]
    layer, head = divmod(j % lh, n_heads)
    return Pick(str(directions[j // lh]), layer, head, k, n, tot[j] / n, tot[d * lh + 1 + k] / n, acc_s, base_s)


def held_out(relations: Sequence[str], folds: Sequence[tuple[Part, Part]], lh: int, n_heads: int,
             offsets: Sequence[int], ci: float, kept: Optional[dict[str, set[str]]] = None) -> pd.DataFrame:
    """One row per relation: each fold's head chosen on its first part and scored on its second, the
    accuracies (and baselines) averaged over the folds, resample by resample for the intervals. ``kept``: per
    relation, the directions the choice may take (those the scored data has ``min_count`` arcs of; None: all)."""
    rows = []
    for rel in relations:
        picks = []
        for select, scoring in folds:
            choice = choose(select, rel, lh, None if kept is None else kept.get(rel, set()))
            pick = None if choice is None else score(scoring, rel, choice, lh, n_heads)
            if pick is not None:
                picks.append(pick)
        if len(picks) != len(folds):
            continue
        row = {"relation": rel, "held_out_n": sum(p.n for p in picks),
               "held_out_accuracy": float(np.mean([p.accuracy for p in picks])),
               "held_out_baseline_accuracy": float(np.mean([p.baseline for p in picks])),
               "held_out_heads": ", ".join(f"{p.layer}-{p.head} {p.direction} ({int(offsets[p.offset]):+d})"
                                           for p in picks)}
        row["held_out_gain"] = row["held_out_accuracy"] - row["held_out_baseline_accuracy"]
        row.update(_intervals(picks, ci))
        rows.append(row)
    return pd.DataFrame(rows)


def _intervals(picks: Sequence[Pick], ci: float) -> dict[str, float]:
    """Percentile intervals of the folds' mean accuracy and mean gain, resample b of every fold together."""
    if any(p.acc_samples is None for p in picks):
        return {k: np.nan for k in ("held_out_ci_low", "held_out_ci_high", "held_out_gain_ci_low",
                                    "held_out_gain_ci_high", "held_out_p")}
    acc = np.mean([p.acc_samples for p in picks], axis=0)
    gain = acc - np.mean([p.base_samples for p in picks], axis=0)
    (lo, hi), (glo, ghi) = (percentile_interval(x[:, None], ci) for x in (acc, gain))
    return {"held_out_ci_low": float(lo[0]), "held_out_ci_high": float(hi[0]),
            "held_out_gain_ci_low": float(glo[0]), "held_out_gain_ci_high": float(ghi[0]),
            "held_out_p": bootstrap_p(gain)}


def count_part(store, corpus, indices, directions: Sequence[Direction], offsets: Sequence[int],
               label_sets: Sequence, bootstrap: int, seed: int, chunk_words: int, block_mb: float) -> dict:
    """``{label set: Part}`` of the sentences ``indices`` of ``store``: one group of directions, or one a
    direction for a causal model's store (each over the arcs it can see)."""
    from probing.heads.head_accuracy import count_relations

    groups = [[d] for d in directions] if store.causal else [list(directions)]
    per = [(g, count_relations(store, corpus, indices, g, offsets, label_sets, bootstrap, seed, chunk_words,
                               block_mb, reachable=store.causal)) for g in groups]
    return {ls: Part([(g, counts[ls]) for g, counts in per]) for ls in per[0][1]}


def halves(indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two halves of the sentences for cross-fitting: even and odd positions of the store's order (both
    halves span the corpus, whatever its order)."""
    return indices[0::2], indices[1::2]
