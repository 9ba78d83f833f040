"""``task=probe probe=distance|depth``: structural probes on one layer's word vectors (``probe.features=hidden``)
or on head context vectors (``probe.features=heads``: one head, or all heads of ``probe.layer`` side by side).

Trained on the train split (``probe.max_train_sentences``: a seeded subsample of whole sentences; at most that
many words), stopped early on ``dev`` (the eval split when there is none), scored on the
eval split with :func:`probing.probes.structural.score`. Punctuation (``probe.punct_upos``) is left out of
UUAS and root accuracy when ``probe.exclude_punct`` (Hewitt and Manning's convention); DSpr and NSpr read
every word, as their code does.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
import pandas as pd

from probing.config import to_plain
from probing.probes.data import ProbeResult, ProbeSplit, punct_tags
from probing.probes.features import HeadSelection, word_vectors
from probing.probes.structural.probe import Regimen, Sentences, StructuralProbe, score_by_length
from probing.store import VectorStore


def split_sentences(pcfg: Any, split: ProbeSplit, sel: HeadSelection) -> Sentences:
    """Every word of the split's sentences with its selected vector, gold head and punctuation mark."""
    if not isinstance(split.store, VectorStore):
        raise ValueError(f"probe={pcfg.kind} reads word vectors: set probe.features=hidden or heads")
    words = split.words(False, punct_tags(pcfg))
    source = np.clip(words.pos + pcfg.word_offset, 0, words.n - 1)  # probe.word_offset: a neighbour's vector
    vectors = word_vectors(split.store, words.sent, source, sel)
    starts = np.flatnonzero(words.pos == 0)  # rows of one sentence are contiguous, from word 0
    lengths = words.n[starts]
    punct = words.punct if pcfg.exclude_punct else np.zeros(len(words), dtype=bool)
    return Sentences(vectors, starts, lengths, words.head, punct)


def by_length(kind: str, per: dict[int, float]) -> pd.DataFrame:
    """DSpr or NSpr of every sentence length as a table (the headline averages lengths 5-50)."""
    return pd.DataFrame({"metric": "dspr" if kind == "distance" else "nspr", "length": list(per),
                         "value": list(per.values())})


def regimen(pcfg: Any, seed: int) -> Regimen:
    """The estimator's settings: ``probe.regimen``, ``probe.rank`` and the run's seed."""
    return Regimen(rank=pcfg.rank, seed=seed, **to_plain(pcfg.regimen))


def run_structural(pcfg: Any, train: ProbeSplit, ev: ProbeSplit, sel: HeadSelection, seed: int,
                   dev: Optional[ProbeSplit] = None) -> ProbeResult:
    """Fit a distance or depth probe (``pcfg.kind``) on ``train``, stop on ``dev`` (None: ``ev``), score ``ev``."""
    kind = str(pcfg.kind)
    tr, te = split_sentences(pcfg, train, sel), split_sentences(pcfg, ev, sel)
    dv = te if dev is None else split_sentences(pcfg, dev, sel)
    probe = StructuralProbe(kind, regimen(pcfg, seed)).fit(tr, dv)
    pred = probe.predict(te)
    scores, per_length, terms = score_by_length(kind, pred, te)
    metrics: dict[str, Any] = dict(scores)
    metrics.update({
        "n_train": int(len(tr.heads)), "n_train_sentences": len(tr), "n_eval": int(len(te.heads)), "n_features": int(tr.vectors.shape[1]),
        "rank": int(probe.probe_.proj.shape[1]), "epochs": int(probe.epochs_),
        "best_epoch": int(probe.best_epoch_), "dev_loss": float(probe.dev_loss_),
        "stop_split": ev.name if dev is None else dev.name,
    })
    metrics["objective"] = metrics["uuas" if kind == "distance" else "root_accuracy"]
    return ProbeResult(metrics, {"structural_by_length": by_length(kind, per_length)}, terms)
