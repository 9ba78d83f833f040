"""The sentence and corpus types every reader produces."""

from __future__ import annotations

import hashlib
import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterator, Optional, Sequence


@dataclass(frozen=True)
class Sentence:
    """One sentence of words with an optional gold dependency tree.

    ``heads[i]`` is the 0-based index of word i's head, -1 for the root. ``relations`` keep UD subtypes
    (``nmod:poss``); :func:`base_relation` collapses them. Trees are ``None`` for raw text.
    """

    id: str
    words: tuple[str, ...]
    heads: Optional[tuple[int, ...]] = None
    relations: Optional[tuple[str, ...]] = None
    upos: Optional[tuple[str, ...]] = None

    def __post_init__(self) -> None:
        # one string object per distinct word, relation and tag, so a corpus of a million words takes a few
        # megabytes rather than a string per token (and its cached pickle shares them too)
        for name in ("words", "relations", "upos"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, tuple(map(sys.intern, value)))

    def __len__(self) -> int:
        return len(self.words)

    @property
    def has_tree(self) -> bool:
        return self.heads is not None

    @property
    def text(self) -> str:
        return " ".join(self.words)


def base_relation(relation: str) -> str:
    """``nmod:poss`` -> ``nmod``: the universal relation without its language-specific subtype."""
    return relation.split(":", 1)[0]


@dataclass(frozen=True)
class Skip:
    """A sentence left out, and why (a malformed tree under ``strict=false``, or too long for the model)."""

    source: str
    line: Optional[int]
    sentence_id: Optional[str]
    reason: str
    kind: str = "malformed"

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line is not None else self.source
        sid = f" (sentence {self.sentence_id})" if self.sentence_id else ""
        return f"{where}{sid}: {self.reason}"


@dataclass(frozen=True)
class Corpus:
    """An ordered collection of sentences from one source and split."""

    name: str
    split: str
    sentences: tuple[Sentence, ...]
    skipped: tuple[Skip, ...] = field(default=())

    def __len__(self) -> int:
        return len(self.sentences)

    def __iter__(self) -> Iterator[Sentence]:
        return iter(self.sentences)

    def __getitem__(self, i: int) -> Sentence:
        return self.sentences[i]

    @property
    def has_trees(self) -> bool:
        return all(s.has_tree for s in self.sentences)

    def fingerprint(self) -> str:
        """A hash of the content (ids, words, trees): two corpora with equal fingerprints are the same data.
        Computed once (a corpus and its sentences are immutable): every store of an extraction is keyed by it."""
        cached = self.__dict__.get("_fingerprint")
        if cached is None:
            h = hashlib.sha256()
            for s in self.sentences:
                h.update(json.dumps([s.id, s.words, s.heads, s.relations, s.upos]).encode())
                h.update(b"\n")
            cached = h.hexdigest()[:16]
            object.__setattr__(self, "_fingerprint", cached)
        return cached

    def skip_summary(self) -> dict[str, int]:
        """How many sentences were skipped for each kind of reason."""
        return dict(Counter(s.kind for s in self.skipped))

    def head(self, n: Optional[int]) -> "Corpus":
        """The first ``n`` sentences (all when ``n`` is None)."""
        if n is None:
            return self
        return Corpus(self.name, self.split, self.sentences[:n], self.skipped)

    def with_skipped(self, extra: Sequence[Skip]) -> "Corpus":
        return Corpus(self.name, self.split, self.sentences, self.skipped + tuple(extra))
