"""Relation probe: which dependency relation does a gold arc carry, from the attention between its words?

Features per arc (dependent i, head j): ``A_k[i, j]`` and ``A_k[j, i]`` in the selected heads (optionally at
neighbouring offsets); a multinomial logistic regression (scikit-learn, lbfgs) on standardised features.
The control task gives each dependent type a random relation drawn from the training distribution (Hewitt
and Liang 2019), so it is learnable wherever a probe can tell word types apart.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, confusion_matrix, f1_score, precision_recall_fscore_support
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

from probing.config import LabelSet, enum_value
from probing.probes.baselines import LookupClassifier, clipped_offset, majority_accuracy, majority_label
from probing.probes.control import control_relations
from probing.probes.data import ProbeResult, ProbeSplit, punct_tags
from probing.probes.features import HeadSelection, pair_features
from probing.probes.margins import accuracy_margin_terms, margin_metrics
from probing.probes.mdl import MdlSettings, mdl_metrics
from probing.probes.pairs import Words, gold_arcs


def make_classifier(pcfg: Any, seed: int) -> Pipeline:
    """Standardised features into L2 logistic regression (lbfgs) with the probe's C, max_iter and
    class weights."""
    fit = pcfg.linear
    class_weight = enum_value(fit.class_weight)  # None or "balanced", as scikit-learn spells them
    return make_pipeline(StandardScaler(), LogisticRegression(
        C=fit.C, max_iter=fit.max_iter, class_weight=class_weight, random_state=seed, solver="lbfgs"))


def fit_quietly(model: Pipeline, X: np.ndarray, y: np.ndarray) -> tuple[Pipeline, bool]:
    """Fit, returning whether lbfgs converged (its warning is recorded in the metrics, not printed)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model.fit(X, y)
    return model, not any(issubclass(w.category, ConvergenceWarning) for w in caught)


def relation_data(pcfg: Any, split: ProbeSplit, sel: HeadSelection):
    """Gold arcs of a split and their features
    ``(arcs, X, feature names)``."""
    arcs = gold_arcs(split.words(LabelSet(pcfg.label_set) is LabelSet.base, punct_tags(pcfg)), pcfg.exclude_punct)
    X, names = pair_features(split.store, arcs.sent, arcs.pos, arcs.head, sel, pcfg.feature_set,
                             list(pcfg.neighbour_offsets))
    return arcs, X, names


# the relation probe's trivial baselines, each a metric of its own; the margin is over the best of them
RELATION_BASELINES = ("majority_accuracy", "baseline_offset_accuracy", "baseline_offset_pos_accuracy")


def relation_baselines(tr: Words, te: Words, ytr: np.ndarray, window: int) -> dict[str, np.ndarray]:
    """Each baseline's correct-or-not per eval arc: the majority label; the most frequent label of the arc's
    signed offset to its head (clipped to ``-window..window``); of that offset and the dependent's UPOS (an
    unseen pair backs off to the offset). All are fitted on the training arcs."""
    yte = te.relation.astype(str)
    off_tr, off_te = clipped_offset(tr.pos, tr.head, window), clipped_offset(te.pos, te.head, window)
    offset = LookupClassifier().fit(off_tr[:, None], ytr).predict(off_te[:, None])
    both = LookupClassifier().fit(np.stack([off_tr, tr.upos], 1), ytr).predict(np.stack([off_te, te.upos], 1))
    return {"majority_accuracy": yte == majority_label(ytr), "baseline_offset_accuracy": offset == yte,
            "baseline_offset_pos_accuracy": both == yte}


def run_relation(pcfg: Any, train: ProbeSplit, ev: ProbeSplit, sel: HeadSelection, seed: int) -> ProbeResult:
    """Train on ``train``'s gold arcs, score on ``ev``'s: accuracy, macro-F1, per-relation F1, confusion,
    the trivial baselines (:func:`relation_baselines`) and the margin over the best, control accuracy and
    selectivity; per-sentence terms of accuracy and margin for intervals over eval sentences."""
    tr, Xtr, names = relation_data(pcfg, train, sel)
    te, Xte, _ = relation_data(pcfg, ev, sel)  # every evaluation arc
    if len(tr) == 0 or len(te) == 0:
        raise ValueError("no arcs to probe in the train or eval sentences")
    ytr, yte = tr.relation.astype(str), te.relation.astype(str)
    if len(np.unique(ytr)) < 2:
        raise ValueError("the relation probe needs at least two relations in the training arcs")
    model, converged = fit_quietly(make_classifier(pcfg, seed), Xtr, ytr)
    pred = model.predict(Xte)
    labels = sorted(set(yte))  # macro-F1 over the relations that occur in the evaluation data
    metrics: dict[str, Any] = {
        "accuracy": float(accuracy_score(yte, pred)),
        "macro_f1": float(f1_score(yte, pred, labels=labels, average="macro", zero_division=0)),
        "n_train": int(len(ytr)), "n_eval": int(len(yte)), "n_features": int(Xtr.shape[1]),
        "n_classes": int(len(model.classes_)), "converged": converged,
    }
    base = relation_baselines(tr, te, ytr, pcfg.best_offset_max)
    metrics.update({k: float(np.mean(v)) for k, v in base.items()})
    metrics.update(margin_metrics(metrics, "accuracy", RELATION_BASELINES))
    item_sentence, n_sent = np.searchsorted(ev.indices, te.sent), len(ev.indices)
    terms = {"accuracy": accuracy_margin_terms(item_sentence, pred == yte, np.zeros(len(yte)), n_sent),
             "margin": accuracy_margin_terms(item_sentence, pred == yte, base[metrics["margin_baseline"]], n_sent)}
    prec, rec, f1, support = precision_recall_fscore_support(yte, pred, labels=labels, zero_division=0)
    per_rel = pd.DataFrame({"relation": labels, "support": support, "precision": prec, "recall": rec,
                            "f1": f1, "probe": "task"})
    cm_labels = sorted(set(yte) | set(pred))
    cm = confusion_matrix(yte, pred, labels=cm_labels)
    gi, pi = np.nonzero(cm)
    confusion = pd.DataFrame({"gold": np.asarray(cm_labels)[gi], "predicted": np.asarray(cm_labels)[pi],
                              "count": cm[gi, pi]})
    tables = {"relation_f1": per_rel, "confusion": confusion}
    ctr = control_relations(tr.word, ytr, seed).astype(str) if pcfg.control else None
    if pcfg.control:
        cte = control_relations(te.word, ytr, seed).astype(str)
        cmodel, cconv = fit_quietly(make_classifier(pcfg, seed), Xtr, ctr)
        cpred = cmodel.predict(Xte)
        metrics["control_accuracy"] = float(accuracy_score(cte, cpred))
        metrics["control_macro_f1"] = float(f1_score(cte, cpred, labels=sorted(set(cte)), average="macro",
                                                     zero_division=0))
        metrics["control_majority_accuracy"] = majority_accuracy(ctr, cte)
        metrics["selectivity"] = metrics["accuracy"] - metrics["control_accuracy"]
        metrics["control_converged"] = cconv
    if pcfg.mdl:  # online codes of the training arcs' labels
        mdl, tables["mdl_blocks"] = mdl_metrics(MdlSettings.of(pcfg), Xtr, ytr, ctr, seed, tr.word)
        metrics.update(mdl)
    metrics["objective"] = metrics["accuracy"]
    coef = model[-1].coef_
    classes = model.classes_
    if coef.shape[0] == 1:  # binary: sklearn keeps one row for the positive class
        coef, classes = coef, classes[1:]
    ci, fi = np.meshgrid(np.arange(len(classes)), np.arange(len(names)), indexing="ij")
    tables["relation_weights"] = pd.DataFrame({"relation": classes[ci.ravel()],
                                               "feature": np.asarray(names)[fi.ravel()],
                                               "weight": coef.ravel()})
    return ProbeResult(metrics, tables, terms)
