"""Edge probe: is there a dependency arc between words a and b (either direction)?

Positives are the gold arcs as unordered pairs (a < b); negatives are pairs of the same sentence with no
arc, drawn with the probe's seed, ``negatives_per_positive`` per positive (balanced by default): uniformly
among a sentence's non-arcs (``probe.negatives=uniform``), or (``distance_matched``) among the split's non-arcs
of each distance ``b - a``, as many per distance as the gold arcs have (:func:`distance_matched`), so that word
distance alone cannot tell arcs from non-arcs. The trivial baseline is a logistic regression on that distance
alone, fitted on train. Features are ``A_k[a, b]`` (fwd: the left word looks right) and ``A_k[b, a]`` (bwd).
Binary logistic regression; ROC-AUC and accuracy. The control task attaches each word type by the arc control's
rule (first word, last word or ROOT; Hewitt and Liang 2019): a pair is a control arc when one word's rule attaches it to the other.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sklearn.metrics import accuracy_score, roc_auc_score

from probing.config import Negatives
from probing.probes.baselines import majority_accuracy
from probing.probes.control import control_edges
from probing.probes.data import ProbeResult, ProbeSplit, punct_tags
from probing.probes.features import HeadSelection, pair_features
from probing.probes.margins import AucMargin, margin_metrics
from probing.probes.mdl import MdlSettings, mdl_metrics
from probing.probes.pairs import Words, gold_arcs
from probing.probes.relation import fit_quietly, make_classifier

# the edge probe's trivial baseline for ROC-AUC (the margin is over it)
EDGE_BASELINES = ("baseline_distance_roc_auc",)


def edge_pairs(words: Words, exclude_punct: bool, negatives_per_positive: int, seed: int,
               negatives: Negatives = Negatives.uniform
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(sent, a, b, label, type_a, type_b)`` of positive and sampled negative pairs, a < b (``negatives``:
    how the negatives are drawn, see the module's docstring)."""
    matched = Negatives(negatives) is Negatives.distance_matched
    arcs = all_arcs = gold_arcs(words, exclude_punct)
    a_all, b_all = np.minimum(all_arcs.pos, all_arcs.head), np.maximum(all_arcs.pos, all_arcs.head)
    a_pos, b_pos = np.minimum(arcs.pos, arcs.head), np.maximum(arcs.pos, arcs.head)
    rng = np.random.default_rng(seed)
    allowed = ~words.punct if exclude_punct else np.ones(len(words), dtype=bool)
    # rows of one sentence are contiguous: split everything by sentence once
    bounds = np.flatnonzero(np.diff(words.sent)) + 1
    sent_rows = np.split(np.arange(len(words)), bounds)
    sent_ids = words.sent[np.concatenate([[0], bounds])]
    lo_all = np.searchsorted(all_arcs.sent, sent_ids, "left")
    hi_all = np.searchsorted(all_arcs.sent, sent_ids, "right")
    n_pos = np.searchsorted(arcs.sent, sent_ids, "right") - np.searchsorted(arcs.sent, sent_ids, "left")
    neg_s, neg_a, neg_b = [], [], []
    for rows, lo, hi, npos in zip(sent_rows, lo_all, hi_all, n_pos):  # one numpy step per sentence
        ok = np.flatnonzero(allowed[rows])
        if len(ok) < 2 or npos == 0:
            continue
        ia, ib = np.triu_indices(len(ok), 1)
        pa, pb = ok[ia], ok[ib]
        n = int(words.n[rows[0]])
        is_arc = np.isin(pa * n + pb, a_all[lo:hi] * n + b_all[lo:hi])
        pool = np.flatnonzero(~is_arc)
        k = len(pool) if matched else min(len(pool), int(npos) * negatives_per_positive)
        if k == 0:
            continue
        pick = pool if matched else np.sort(rng.choice(pool, size=k, replace=False))
        neg_s.append(np.full(k, words.sent[rows[0]]))
        neg_a.append(pa[pick])
        neg_b.append(pb[pick])
    ns, na, nb = (np.concatenate(xs) if xs else np.zeros(0, dtype=np.int64) for xs in (neg_s, neg_a, neg_b))
    if matched:  # every non-arc was kept: draw from them per distance
        pick = distance_matched(nb - na, b_pos - a_pos, negatives_per_positive, rng)
        ns, na, nb = ns[pick], na[pick], nb[pick]
    sent = np.concatenate([arcs.sent, ns])
    a, b = np.concatenate([a_pos, na]), np.concatenate([b_pos, nb])
    label = np.concatenate([np.ones(len(arcs), dtype=np.int64), np.zeros(len(ns), dtype=np.int64)])
    base = np.searchsorted(words.sent, sent, side="left")  # row of each pair's sentence's first word
    return sent, a, b, label, words.word[base + a], words.word[base + b]


def distance_matched(pool_distance: np.ndarray, gold_distance: np.ndarray, per_positive: int,
                     rng: np.random.Generator) -> np.ndarray:
    """Positions (ascending) in a pool of candidate non-arcs: ``per_positive`` of them per gold arc of each
    distance, drawn without replacement; where a distance has fewer candidates than that (adjacent words,
    about half of whose pairs are arcs), all of them and the rest drawn again from them, so the histograms
    match exactly (a distance without candidates gets none)."""
    d = np.asarray(pool_distance, dtype=np.int64)
    if len(d) == 0:
        return np.zeros(0, dtype=np.int64)
    size = max(int(d.max()), int(np.max(gold_distance, initial=0))) + 1
    want = np.bincount(np.asarray(gold_distance, dtype=np.int64), minlength=size) * per_positive
    have = np.bincount(d, minlength=size)
    order = np.lexsort((rng.random(len(d)), d))  # by distance, shuffled within each
    ds = d[order]
    rank = np.arange(len(ds)) - np.searchsorted(ds, ds, side="left")  # position within its distance
    picks = [order[rank < want[ds]]]
    for dist in np.flatnonzero((want > have) & (have > 0)):  # short distances: draw again, with replacement
        picks.append(rng.choice(order[ds == dist], size=int(want[dist] - have[dist]), replace=True))
    return np.sort(np.concatenate(picks))


def distance_tv(distance: np.ndarray, label: np.ndarray) -> float:
    """Total variation between the word-distance distributions of the negatives and the positives (0: matched)."""
    d, y = np.asarray(distance, dtype=np.int64), np.asarray(label).astype(bool)
    hist = [np.bincount(d[m], minlength=d.max() + 1) / max(m.sum(), 1) for m in (y, ~y)]
    return float(0.5 * np.abs(hist[0] - hist[1]).sum())


def repeat_share(sent: np.ndarray, a: np.ndarray, b: np.ndarray, label: np.ndarray) -> float:
    """The share of negatives that repeat another negative pair (``distance_matched`` at a short distance)."""
    neg = np.asarray(label) == 0
    if not neg.any():
        return 0.0
    keys = np.stack([np.asarray(x)[neg] for x in (sent, a, b)], 1)
    return float(1.0 - len(np.unique(keys, axis=0)) / len(keys))


def run_edge(pcfg: Any, train: ProbeSplit, ev: ProbeSplit, sel: HeadSelection, seed: int) -> ProbeResult:
    """Train on ``train``'s pairs, score on ``ev``'s: ROC-AUC, accuracy, the majority and distance baselines,
    the margin of ROC-AUC over the distance baseline's (with its per-sentence terms), control."""
    if pcfg.negatives_per_positive < 1:
        raise ValueError(f"probe.negatives_per_positive must be >= 1, got {pcfg.negatives_per_positive}")
    sides = []
    for k, split in enumerate((train, ev)):
        words = split.words(False, punct_tags(pcfg))
        s, a, b, y, ta, tb = edge_pairs(words, pcfg.exclude_punct, pcfg.negatives_per_positive, seed + k,
                                        pcfg.negatives)
        X, names = pair_features(split.store, s, a, b, sel, pcfg.feature_set, list(pcfg.neighbour_offsets))
        n = words.n[np.searchsorted(words.sent, s, side="left")]  # each pair's sentence length
        sides.append((X, y, control_edges(ta, tb, a, b, n, seed) if pcfg.control else None, b - a, (s, a, b)))
    (Xtr, ytr, ctr, dtr, _), (Xte, yte, cte, dte, (ste, ate, bte)) = sides
    if len(np.unique(ytr)) < 2 or len(np.unique(yte)) < 2:
        raise ValueError("the edge probe needs both arcs and non-arcs in train and eval")
    model, converged = fit_quietly(make_classifier(pcfg, seed), Xtr, ytr)
    score = model.predict_proba(Xte)[:, 1]
    dist_tr, dist_te = dtr[:, None].astype(np.float64), dte[:, None].astype(np.float64)
    by_distance, _ = fit_quietly(make_classifier(pcfg, seed), dist_tr, ytr)
    base_score = by_distance.predict_proba(dist_te)[:, 1]
    metrics: dict[str, Any] = {
        "roc_auc": float(roc_auc_score(yte, score)),
        "accuracy": float(accuracy_score(yte, model.predict(Xte))),
        "majority_accuracy": majority_accuracy(ytr, yte),
        "baseline_distance_roc_auc": float(roc_auc_score(yte, base_score)),
        "baseline_distance_accuracy": float(accuracy_score(yte, by_distance.predict(dist_te))),
        "negative_distance_tv": distance_tv(dte, yte),
        "negative_repeat_share": repeat_share(ste, ate, bte, yte),
        "n_train": int(len(ytr)), "n_eval": int(len(yte)), "n_features": int(Xtr.shape[1]),
        "positive_share_train": float(ytr.mean()), "converged": converged,
    }
    metrics.update(margin_metrics(metrics, "roc_auc", EDGE_BASELINES))
    terms = {"margin": AucMargin(len(ev.indices), np.searchsorted(ev.indices, ste), yte, score, base_score)}
    if pcfg.control:
        if len(np.unique(ctr)) == 2 and len(np.unique(cte)) == 2:
            cmodel, cconv = fit_quietly(make_classifier(pcfg, seed), Xtr, ctr)
            metrics["control_roc_auc"] = float(roc_auc_score(cte, cmodel.predict_proba(Xte)[:, 1]))
            metrics["control_accuracy"] = float(accuracy_score(cte, cmodel.predict(Xte)))
            metrics["control_majority_accuracy"] = majority_accuracy(ctr, cte)
            metrics["selectivity"] = metrics["accuracy"] - metrics["control_accuracy"]
            metrics["control_converged"] = cconv
    metrics["objective"] = metrics["roc_auc"]
    tables = {"edge_weights": pd.DataFrame({"feature": names, "weight": model[-1].coef_[0]})}
    if pcfg.mdl:  # online codes of the training pairs' labels
        mdl, tables["mdl_blocks"] = mdl_metrics(MdlSettings.of(pcfg), Xtr, ytr, ctr, seed)
        metrics.update(mdl)
    return ProbeResult(metrics, tables, terms)
