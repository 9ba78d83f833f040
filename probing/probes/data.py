"""What a probe run reads (a split: corpus + store + sentences) and what it returns (metrics + tables)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from probing.corpus import Corpus
from probing.probes.pairs import Words, corpus_words
from probing.store import AttentionStore


@dataclass(frozen=True)
class ProbeSplit:
    """The sentences of one side of a probe (train or eval): corpus indices that have maps in ``store``.

    ``name`` says where they come from (``train``, ``dev``, or ``grammar[0:320]`` for a held-out cut).
    """

    name: str
    corpus: Corpus
    store: AttentionStore
    indices: np.ndarray

    def words(self, collapse_subtypes: bool, punct_upos: tuple[str, ...]) -> Words:
        return corpus_words(self.corpus, self.indices, collapse_subtypes, punct_upos)


@dataclass
class ProbeResult:
    """Headline numbers (plain names, scalars) and tidy tables of one probe run."""

    metrics: dict[str, Any]
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)


def subsample_rows(n_rows: int, limit: int | None, seed: int) -> np.ndarray:
    """Row indices of a seeded subsample of at most ``limit`` rows, in ascending order (all rows for None)."""
    if limit is None or limit >= n_rows:
        return np.arange(n_rows)
    if limit <= 0:
        raise ValueError(f"probe.max_train_arcs must be positive, got {limit}")
    return np.sort(np.random.default_rng(seed).choice(n_rows, size=limit, replace=False))


def punct_tags(pcfg: Any) -> tuple[str, ...]:
    """The UPOS tags that count as punctuation for ``probe.exclude_punct``."""
    return tuple(pcfg.punct_upos)
