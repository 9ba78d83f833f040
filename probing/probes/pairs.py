"""Word pairs for the probes, read from a corpus and the sentences its attention store holds.

:class:`Words` is every word of the selected sentences, flat (one row per word, with its sentence,
position, gold head and relation); probes pick their pairs from it with numpy:

* relation / edge probes: the gold arcs (dependent, head), root arcs excluded (the root has no head word);
* arc probe: for each dependent, every other word of its sentence as a candidate head, plus ROOT.

Word types are lower-cased surface forms (the bundled encoders are uncased), used by the control tasks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from probing.corpus import Corpus, base_relation


@dataclass(frozen=True)
class Words:
    """Every word of the selected sentences, one row each (shapes ``(N,)``).

    ``sent`` is the corpus index, ``pos`` the 0-based word index, ``n`` the sentence length,
    ``head`` the gold head's word index (-1: root), ``relation`` the gold label, ``word`` the lower-cased
    type, ``head_word`` the head's type ("<root>" for the root), ``punct`` whether the word's UPOS is in
    the punctuation set, ``upos`` the UPOS tag ("" where the corpus has none).
    """

    sent: np.ndarray
    pos: np.ndarray
    n: np.ndarray
    head: np.ndarray
    relation: np.ndarray
    word: np.ndarray
    head_word: np.ndarray
    punct: np.ndarray
    upos: np.ndarray

    def __len__(self) -> int:
        return len(self.sent)

    def take(self, mask: np.ndarray) -> "Words":
        """The rows where ``mask`` is true (or the rows of an index array)."""
        return Words(*(getattr(self, f)[mask] for f in _FIELDS))


_FIELDS = ("sent", "pos", "n", "head", "relation", "word", "head_word", "punct", "upos")


def corpus_words(corpus: Corpus, indices: Sequence[int], collapse_subtypes: bool, punct_upos: Sequence[str]
                 ) -> Words:
    """All words of the sentences ``indices`` (ascending corpus indices), which must have gold trees."""
    sent, pos, n, head, rel, word, head_word, punct, tags = [], [], [], [], [], [], [], [], []
    punct_set = set(punct_upos)
    for i in indices:
        s = corpus[int(i)]
        if s.heads is None or s.relations is None:
            raise ValueError(f"sentence {s.id} has no gold tree; probes need a treebank")
        k = len(s)
        sent.append(np.full(k, i, dtype=np.int64))
        pos.append(np.arange(k, dtype=np.int64))
        n.append(np.full(k, k, dtype=np.int64))
        head.append(np.asarray(s.heads, dtype=np.int64))
        rel.extend(base_relation(r) if collapse_subtypes else r for r in s.relations)
        lower = [w.lower() for w in s.words]
        word.extend(lower)
        head_word.extend(lower[h] if h >= 0 else "<root>" for h in s.heads)
        upos = s.upos or ("",) * k
        punct.append(np.fromiter((u in punct_set for u in upos), dtype=bool, count=k))
        tags.extend(upos)
    if not sent:
        raise ValueError("no sentences to probe")
    return Words(np.concatenate(sent), np.concatenate(pos), np.concatenate(n), np.concatenate(head),
                 np.asarray(rel, dtype=object), np.asarray(word, dtype=object),
                 np.asarray(head_word, dtype=object), np.concatenate(punct), np.asarray(tags, dtype=object))


def gold_arcs(words: Words, exclude_punct: bool) -> Words:
    """The dependents whose head is a word (root arcs dropped); punctuation dependents dropped on request."""
    keep = words.head >= 0
    if exclude_punct:
        keep &= ~words.punct
    return words.take(keep)


def dependents(words: Words, exclude_punct: bool) -> Words:
    """The words whose head the arc probe predicts (all, or all but punctuation)."""
    return words.take(~words.punct) if exclude_punct else words


@dataclass(frozen=True)
class Candidates:
    """Candidate heads of each dependent: every other word of its sentence (ROOT is implicit).

    Flat ``(C,)`` arrays ``sent``, ``query`` (the dependent's word index) and ``key`` (the candidate's
    word index), grouped by dependent in order; ``sizes[d]`` is dependent d's number of word candidates
    (``n - 1``), ``starts[d]`` where its block begins.
    """

    sent: np.ndarray
    query: np.ndarray
    key: np.ndarray
    sizes: np.ndarray
    starts: np.ndarray

    def local_index(self, heads: np.ndarray) -> np.ndarray:
        """Position of each dependent's head word within its block, -1 for ROOT."""
        pos_d = np.repeat(np.arange(len(self.sizes)), self.sizes)
        hit = self.key == np.repeat(heads, self.sizes)
        out = np.full(len(self.sizes), -1, dtype=np.int64)
        out[pos_d[hit]] = (np.arange(len(self.key)) - np.repeat(self.starts, self.sizes))[hit]
        return out


def candidates(deps: Words) -> Candidates:
    """Every (dependent, other word) pair of the dependents' sentences, vectorised."""
    n = deps.n
    total = int(n.sum())
    rep = np.repeat(np.arange(len(deps)), n)
    # j runs 0..n-1 inside each dependent's block
    block_start = np.repeat(np.cumsum(n) - n, n)
    j = np.arange(total) - block_start
    keep = j != deps.pos[rep]
    rep, j = rep[keep], j[keep]
    sizes = n - 1
    starts = np.cumsum(sizes) - sizes
    return Candidates(deps.sent[rep], deps.pos[rep], j, sizes, starts)
