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
    """Headline numbers (plain names, scalars) and tidy tables of one probe run; ``terms``: headline metrics
    as per-sentence terms of the eval sentences (structural probes), for intervals over sentences."""

    metrics: dict[str, Any]
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    terms: dict[str, Any] = field(default_factory=dict)


def sample_sentences(n: int, limit: int | None, seed: int, key: str) -> np.ndarray:
    """Positions of a seeded subsample of at most ``limit`` of ``n`` sentences, in ascending order (all for
    None); ``key``: the config key named in an error."""
    if limit is not None and limit <= 0:
        raise ValueError(f"{key} must be positive, got {limit}")
    if limit is None or limit >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=limit, replace=False))


def subsample_sentences(split: ProbeSplit, limit: int | None, seed: int) -> ProbeSplit:
    """A seeded subsample of whole sentences of ``split`` (``probe.max_train_sentences``; all for None)."""
    keep = sample_sentences(len(split.indices), limit, seed, "probe.max_train_sentences")
    if len(keep) == len(split.indices):
        return split
    return ProbeSplit(f"{split.name}[{len(keep)} of {len(split.indices)} sentences]", split.corpus, split.store,
                      split.indices[keep])


def punct_tags(pcfg: Any) -> tuple[str, ...]:
    """The UPOS tags that count as punctuation for ``probe.exclude_punct``."""
    return tuple(pcfg.punct_upos)
