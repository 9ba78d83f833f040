"""Head detectors at word level: what kind of head each one is, each score beside its null.

A detector names a target for every query word: the previous word, the next word, the word itself, the first
word, the punctuation words, the earlier occurrences of the same word form (lower-cased), and, on sentences
made of a random word sequence repeated twice, the word right after the first occurrence of the query's word
(induction: query ``k + i`` of a ``2k``-word sequence, target ``i + 1``). A head's **score** is the attention
mass its query rows put on their targets, averaged over the sentence's queries that have a target, then over
the sentences that have such a query.

Its **null** is the positional expectation of the same head: each query row's mass on words spread uniformly
over the keys the query can reach (every word of the sentence; for a causal store, the words up to and including
the query), i.e. ``row mass x |targets| / |reachable keys|``, averaged like the score. A head that attends
uniformly sits at its null whatever its mass on special tokens; one with no preference for the target scores
about its null. ``next`` has no reachable target in a causal store and is not reported there.

The **test** is one-sided, of a pre-set effect: score > null + ``heads.detector_min_gain`` (a head whose gain is
real but tiny is no head of that kind). The bootstrap over sentences (:mod:`probing.stats.bootstrap`, the same
resamples for every head) gives ``score - null`` per resample, its p-value is ``(1 + #{gain <= min_gain}) / (1 + B)``
(:func:`probing.stats.multiplicity.bootstrap_p`), adjusted across the heads of each detector
(``heads.multiplicity``, Benjamini-Hochberg by default); the score's interval is the percentile interval of the
same resamples. Computed chunk by chunk over the stored word maps (similar lengths padded together), numpy over
sentences, heads and positions; the resampled totals are accumulated per chunk, so nothing per sentence is kept.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import pandas as pd

from probing.config import Detector, Multiplicity
from probing.corpus import Corpus, Sentence
from probing.errors import ProbingError
from probing.heads.rows import as_float32
from probing.progress import progress
from probing.stats.bootstrap import percentile_interval, resample_counts
from probing.stats.multiplicity import adjust, bootstrap_p
from probing.store import AttentionStore
from probing.store.chunks import iter_chunks

WORD_DETECTORS = tuple(d for d in Detector if d is not Detector.induction)  # read from the corpus's own store
_RESAMPLE_BLOCK = 128  # resamples multiplied at a time: (block, chunk sentences) weights


def reachable(n: np.ndarray, size: int, causal: bool) -> np.ndarray:
    """``(B, N, N)`` bool: key ``k`` is reachable from query ``q`` of a sentence of ``n`` words (both words of
    it; a causal query reaches itself and its left only)."""
    pos = np.arange(size)
    valid = pos[None, :] < np.asarray(n)[:, None]
    out = valid[:, :, None] & valid[:, None, :]
    return out & (pos[None, :] <= pos[:, None])[None] if causal else out


def targets(detector: Detector, n: np.ndarray, size: int, causal: bool, punct: Optional[np.ndarray] = None,
            forms: Optional[np.ndarray] = None) -> np.ndarray:
    """``(B, N, N)`` bool: the keys each query of a padded chunk of ``n``-word sentences targets, among those
    it reaches (``punct``: ``(B, N)`` punctuation words; ``forms``: ``(B, N)`` word-form ids)."""
    d = Detector(detector)
    reach = reachable(n, size, causal)
    q, k = np.arange(size)[:, None], np.arange(size)[None, :]
    if d is Detector.previous:
        t = k == q - 1
    elif d is Detector.next:
        t = k == q + 1
    elif d is Detector.self:
        t = k == q
    elif d is Detector.first:
        t = (k == 0) & (q >= 1)  # the first word's own row is its self, not a preference for the first word
    elif d is Detector.punctuation:
        t = punct[:, None, :]
    elif d is Detector.duplicate:
        t = (forms[:, :, None] == forms[:, None, :]) & (k < q)
    else:  # induction: 2k words, query k + i -> key i + 1
        half = (np.asarray(n) // 2)[:, None, None]
        t = (q >= half) & (k == q - half + 1)
    return reach & t


class DetectorTotals:
    """Per detector and head: the score and null summed over sentences, and the same sums under every
    bootstrap resample (``weights``: ``(B, S)`` counts over the analysis's sentences; None: no intervals)."""

    def __init__(self, detectors: Sequence[Detector], n_heads: int, weights: Optional[np.ndarray]):
        self.detectors = [Detector(d) for d in detectors]
        d = len(self.detectors)
        self.weights = weights
        self.score = np.zeros((d, n_heads))
        self.null = np.zeros((d, n_heads))
        self.sentences = np.zeros(d, dtype=np.int64)
        self.queries = np.zeros(d, dtype=np.int64)
        b = 0 if weights is None else len(weights)
        self.boot_score = np.zeros((b, d, n_heads))
        self.boot_gain = np.zeros((b, d, n_heads))
        self.boot_sentences = np.zeros((b, d))

    def add(self, rows: np.ndarray, words: np.ndarray, n: np.ndarray, causal: bool, stochastic: bool,
            punct: np.ndarray, forms: np.ndarray) -> None:
        """A chunk: ``rows`` its sentences' positions in the analysis order, ``words`` ``(B, L, H, N, N)`` padded
        word maps (rows normalised over the words unless ``stochastic``), ``n`` words per sentence."""
        b, layers, heads, size = words.shape[0], words.shape[1], words.shape[2], words.shape[-1]
        # float64: a uniform row's mass on its target then equals its null to the bit (gain exactly 0)
        a = as_float32(words).astype(np.float64).reshape(b, layers * heads, size, size)
        if not stochastic:
            a = a / np.maximum(a.sum(axis=-1, keepdims=True), np.finfo(np.float64).tiny)
        mass = a.sum(axis=-1)  # (B, LH, N): each query row's mass on words
        n_reach = np.maximum(reachable(n, size, causal).sum(axis=-1), 1)  # (B, N)
        per_score = np.empty((len(self.detectors), b, layers * heads))
        per_null = np.empty_like(per_score)
        has = np.empty((len(self.detectors), b))
        for j, d in enumerate(self.detectors):
            t = targets(d, n, size, causal, punct, forms)
            query = t.any(axis=-1)  # (B, N): the queries that have a target
            n_query = query.sum(axis=-1)
            on_target = np.einsum("bhqk,bqk->bhq", a, t.astype(np.float64))
            expected = mass * t.sum(axis=-1)[:, None, :] / n_reach[:, None, :]  # product first: exact
            scale = (query / np.maximum(n_query, 1)[:, None])[:, None, :]  # mean over the sentence's queries
            per_score[j] = (on_target * scale).sum(axis=-1)
            per_null[j] = (expected * scale).sum(axis=-1)
            has[j] = n_query > 0
            self.queries[j] += int(n_query.sum())
        self.score += per_score.sum(axis=1)  # sentences without a query add 0 to every sum
        self.null += per_null.sum(axis=1)
        self.sentences += has.sum(axis=1).astype(np.int64)
        if self.weights is None:
            return
        gain = per_score - per_null
        for start in range(0, len(self.weights), _RESAMPLE_BLOCK):
            w = self.weights[start:start + _RESAMPLE_BLOCK, rows].astype(np.float64)  # (R, B)
            self.boot_score[start:start + len(w)] += np.einsum("rb,dbh->rdh", w, per_score)
            self.boot_gain[start:start + len(w)] += np.einsum("rb,dbh->rdh", w, gain)
            self.boot_sentences[start:start + len(w)] += w @ has.T

    def table(self, num_heads: int, ci: float, multiplicity: Multiplicity, alpha: float, min_gain: float
              ) -> pd.DataFrame:
        """One row per detector with at least one scored sentence and head (``layer, head`` 0-based); the test
        is of ``score - null > min_gain``."""
        with np.errstate(invalid="ignore", divide="ignore"):
            score = self.score / self.sentences[:, None]
            null = self.null / self.sentences[:, None]
            boot = self.boot_score / self.boot_sentences[..., None]
            gain = self.boot_gain / self.boot_sentences[..., None]
        lo, hi = percentile_interval(boot, ci) if len(boot) else (np.full_like(score, np.nan),) * 2
        p = np.apply_along_axis(bootstrap_p, 0, gain - min_gain) if len(gain) else np.full_like(score, np.nan)
        frames = []
        n_all = score.shape[1]
        for j, d in enumerate(self.detectors):
            if self.sentences[j] == 0:
                continue
            p_adj = adjust(p[j], Multiplicity(multiplicity))
            frames.append(pd.DataFrame({
                "detector": str(d), "layer": np.arange(n_all) // num_heads, "head": np.arange(n_all) % num_heads,
                "score": score[j], "null": null[j], "ci_low": lo[j], "ci_high": hi[j], "p": p[j],
                "p_adjusted": p_adj, "passes": pd.array(np.where(np.isnan(p_adj), None, p_adj < alpha),
                                                       dtype="boolean"),
                "n_sentences": int(self.sentences[j]), "n_queries": int(self.queries[j])}))
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
            columns=["detector", "layer", "head", "score", "null", "ci_low", "ci_high", "p", "p_adjusted", "passes",
                     "n_sentences", "n_queries"])


def _word_features(corpus: Corpus, indices: np.ndarray, size: int, punct_upos: set[str]
                   ) -> tuple[np.ndarray, np.ndarray]:
    """``(B, N)`` punctuation masks and lower-cased word-form ids of the chunk's sentences, padded with
    False and -1."""
    punct = np.zeros((len(indices), size), dtype=bool)
    forms = np.full((len(indices), size), -1, dtype=np.int64)
    vocab: dict[str, int] = {}
    for b, i in enumerate(indices):
        s = corpus[int(i)]
        if s.upos:
            punct[b, :len(s)] = [u in punct_upos for u in s.upos]
        forms[b, :len(s)] = [vocab.setdefault(w.lower(), len(vocab)) for w in s.words]
    return punct, forms


def detector_table(store: AttentionStore, corpus: Corpus, detectors: Sequence[Detector], punct_upos: Sequence[str],
                   bootstrap: int, ci: float, seed: int, multiplicity: Multiplicity, alpha: float, min_gain: float,
                   block_mb: float,
                   max_sentences: int = 512) -> pd.DataFrame:
    """The detectors table of every sentence of ``store`` (built from ``corpus``): a row per detector, layer
    and head. ``next`` is dropped for a causal store."""
    idx = store.indices
    wanted = [Detector(d) for d in detectors if not (store.causal and Detector(d) is Detector.next)]
    weights = resample_counts(len(idx), bootstrap, seed) if bootstrap > 0 else None
    totals = DetectorTotals(wanted, store.num_layers * store.num_heads, weights)
    punct = set(punct_upos)
    chunks = iter_chunks(store, idx, max_sentences, block_mb)
    for chunk in progress(chunks, "head detectors", unit="chunk"):
        p, f = _word_features(corpus, chunk.indices, chunk.words.shape[-1], punct)
        totals.add(chunk.rows, chunk.words, chunk.n, store.causal, store.stochastic, p, f)
    store.close()
    return totals.table(store.num_heads, ci, multiplicity, alpha, min_gain)


def induction_corpus(corpus: Corpus, sequences: int, words: Sequence[int], seed: int) -> Corpus:
    """``sequences`` sentences, each a random sequence of ``words[0]..words[1]`` distinct words of ``corpus``
    (its alphabetic word forms, drawn with ``seed``) followed by the same sequence again; no trees."""
    if len(words) != 2 or not 1 <= words[0] <= words[1]:
        raise ProbingError(f"heads.induction_words={list(words)}: need [min, max] with 1 <= min <= max")
    vocab = sorted({w for s in corpus for w in s.words if w.isalpha()})
    if len(vocab) < words[1]:
        raise ProbingError(f"heads.induction_words={list(words)}: {corpus.name} has only {len(vocab)} distinct "
                           "alphabetic words to draw a sequence from; lower induction_words")
    rng = np.random.default_rng(seed)
    lengths = rng.integers(words[0], words[1] + 1, size=sequences)
    out = []
    for s, k in enumerate(lengths):
        seq = tuple(vocab[j] for j in rng.choice(len(vocab), size=int(k), replace=False))
        out.append(Sentence(f"induction-{s}", seq + seq))
    return Corpus(f"{corpus.name}-induction", corpus.split, tuple(out))


def induction_table(store: AttentionStore, corpus: Corpus, bootstrap: int, ci: float, seed: int,
                    multiplicity: Multiplicity, alpha: float, min_gain: float, block_mb: float) -> pd.DataFrame:
    """The ``induction`` rows of the detectors table, from the store of :func:`induction_corpus`'s sentences."""
    return detector_table(store, corpus, [Detector.induction], (), bootstrap, ci, seed, multiplicity, alpha, min_gain,
                          block_mb)
