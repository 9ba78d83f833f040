"""Clark et al.'s (2019) "Attn" probe: each word's head is a softmax over the sentence's words plus ROOT (for a
causal model, over the words on its left, the only ones its heads can attend to, plus ROOT).

For dependent i and candidate head j, ``score(i, j) = sum_k w_k A_k[i, j] + u_k A_k[j, i]`` over the selected
heads k (the columns of ``X``). ROOT is scored from attention to and from the special tokens with weights of
its own plus a bias, ``score(i, ROOT) = sum_k r_k A_k[i, specials] + v_k A_k[specials, i] + b`` (``R``): the
paper does not say how ROOT is scored, and [SEP]/[CLS] carry most of many heads' mass, so sharing w would
tie the two. Trained by a damped Newton method (:mod:`probing.probes.arc.solver`) on the mean cross-entropy
plus an L2 penalty with scikit-learn's convention for ``C`` (smaller C = stronger penalty; the bias is not
penalised). Features come in blocks built from the store (:mod:`probing.probes.arc.blocks`), so a probe on all
of a treebank never holds its whole design matrix.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from threadpoolctl import threadpool_limits

from probing.config import LabelSet
from probing.probes.arc.blocks import ArcBlocks, ArcData, StoreArcData
from probing.probes.arc.solver import Fit, block_log_proba, block_predict, evaluate, newton
from probing.probes.baselines import best_offset, chain_offset, offset_heads, right_branching_heads
from probing.probes.control import control_heads
from probing.probes.data import ProbeResult, ProbeSplit, punct_tags
from probing.probes.features import HeadSelection, pair_feature_names, root_feature_names
from probing.probes.margins import accuracy_margin_terms, margin_metrics
from probing.probes.pairs import Words, dependents

log = logging.getLogger(__name__)


def arc_loss(theta: np.ndarray, data: ArcData, alpha: float = 0.0) -> tuple[float, np.ndarray]:
    """Mean cross-entropy of the gold heads plus ``alpha/2 * ||weights||^2``, and its gradient."""
    if data.gold is None:
        raise ValueError("arc_loss needs gold heads")
    ev = evaluate(data, np.asarray(theta, dtype=np.float64)[None, :], data.gold[None, :], alpha)[0]
    return ev.loss, ev.grad


class ArcProbe(BaseEstimator):
    """A scikit-learn style estimator over arc-probe blocks (:class:`ArcData` in memory, or
    :class:`StoreArcData` built from a store): ``fit(data, y)`` returns self (``y``: gold heads as block-local
    indices, -1 = ROOT; default ``data.gold``); fitted ``coef_`` (F,), ``root_coef_`` (F_root,),
    ``root_intercept_``, ``n_iter_`` (Newton steps), ``loss_``, ``converged_``.

    ``C`` follows LogisticRegression: the objective is ``C * sum CE + ||w||^2 / 2`` (scaled by 1/D); ``tol``
    bounds the largest gradient component at the optimum.
    """

    def __init__(self, C: float = 1.0, max_iter: int = 1000, tol: float = 1e-4):
        self.C = C
        self.max_iter = max_iter
        self.tol = tol

    def fit(self, data: ArcBlocks, y: np.ndarray | None = None) -> "ArcProbe":
        fit_probes([self], data, [_gold(data, y)])
        return self

    def _set(self, fit: Fit, f: int) -> None:
        self.coef_ = fit.theta[:f].copy()
        self.root_coef_ = fit.theta[f:-1].copy()
        self.root_intercept_ = float(fit.theta[-1])
        self.n_iter_, self.loss_, self.converged_ = fit.n_iter, fit.loss, fit.converged

    @property
    def theta_(self) -> np.ndarray:
        return np.concatenate([self.coef_, self.root_coef_, [self.root_intercept_]])

    def predict_log_proba(self, data: ArcData) -> tuple[np.ndarray, np.ndarray]:
        """Log-probabilities ``(log p(ROOT) (D,), log p(word candidate) (C,))`` of in-memory data."""
        block = next(ArcData(data.X, data.R, data.sizes, block_rows=max(len(data.X), 1)).blocks())
        log_root, log_word = block_log_proba(block, self.theta_[None, :], data.X.shape[1])
        return log_root[:, 0], log_word[:, 0]

    def predict(self, data: ArcBlocks) -> np.ndarray:
        """Each dependent's predicted head as an index into its block (-1 = ROOT)."""
        out = np.empty(data.n_dependents, dtype=np.int64)
        theta = self.theta_
        with threadpool_limits(1, user_api="blas"):  # blocks come from numba kernels: see arc_solver.newton
            for block in data.blocks():
                out[block.rows] = block_predict(block, theta, data.n_features)
        return out

    def score(self, data: ArcBlocks, y: np.ndarray | None = None) -> float:
        """Attachment accuracy against ``y`` (default ``data.gold``)."""
        return float(np.mean(self.predict(data) == _gold(data, y)))


def _gold(data: ArcBlocks, y: np.ndarray | None) -> np.ndarray:
    gold = y if y is not None else getattr(data, "gold", None)
    if gold is None:
        raise ValueError("the arc probe needs gold heads (y, or ArcData.gold)")
    gold = np.asarray(gold, dtype=np.int64)
    if gold.shape != (data.n_dependents,) or np.any(gold >= data.sizes) or np.any(gold < -1):
        raise ValueError("gold heads must be one block-local index (or -1 = ROOT) per dependent")
    return gold


def fit_probes(probes: list[ArcProbe], data: ArcBlocks, golds: list[np.ndarray],
               names: tuple[str, ...] = ()) -> list[ArcProbe]:
    """Fit several probes with the same hyperparameters on the same features in shared passes (a task probe
    and its control task: each block is built once per pass for both)."""
    if len({(p.C, p.max_iter, p.tol) for p in probes}) != 1:
        raise ValueError("probes fitted together share C, max_iter and tol")
    first = probes[0]
    if first.C <= 0:
        raise ValueError(f"C must be positive, got {first.C}")
    alpha = 1.0 / (first.C * max(data.n_dependents, 1))
    fits = newton(data, np.stack([_gold(data, g) for g in golds]), alpha, first.max_iter, first.tol, names)
    for probe, fit in zip(probes, fits):
        probe._set(fit, data.n_features)
    return probes


# ---- the arc probe task ----------------------------------------------------------------------------------

def arc_data(pcfg: Any, split: ProbeSplit, sel: HeadSelection, reachable_only: bool = False
             ) -> tuple[Words, StoreArcData]:
    """Dependents of a split (at most ``limit``, a seeded subsample) and their candidates' features, built
    from the store block by block; ``reachable_only``: only the dependents whose gold head is a candidate."""
    deps = dependents(split.words(LabelSet(pcfg.label_set) is LabelSet.base, punct_tags(pcfg)), pcfg.exclude_punct)
    if reachable_only:
        deps = deps.take(reachable(deps.pos, deps.head, True))
    data = StoreArcData(split.store, deps.sent, deps.pos, sel, pcfg.feature_set, list(pcfg.neighbour_offsets))
    return deps, data


def reachable(pos: np.ndarray, heads: np.ndarray, causal: bool) -> np.ndarray:
    """Whether each head (word index, -1 = ROOT) is among its dependent's candidates: always, or for a causal
    model's store when it is ROOT or a word on the dependent's left."""
    return heads < pos if causal else np.ones(len(pos), dtype=bool)


def control_targets(deps: Words, seed: int, causal: bool) -> np.ndarray:
    """The control task's heads (:func:`~probing.probes.control.control_heads`); for a causal model's store
    the rule ``last`` attaches a word to the last word it can see, the one before it (ROOT for the first)."""
    heads = control_heads(deps.word, deps.pos, deps.n, seed)
    return np.where(heads > deps.pos, deps.pos - 1, heads) if causal else heads


def local_index(pos: np.ndarray, heads: np.ndarray) -> np.ndarray:
    """Head word index -> index in the dependent's candidate block (the other words, in order); -1 = ROOT."""
    return np.where(heads >= 0, heads - (heads > pos), -1)


def word_index(pos: np.ndarray, local: np.ndarray) -> np.ndarray:
    """Block-local predictions -> word indices (-1 = ROOT)."""
    return np.where(local >= 0, local + (local >= pos), -1)


def _fit(pcfg: Any, dtr: Words, tr: StoreArcData, names: tuple[str, ...], seed: int) -> list[ArcProbe]:
    """The task probe, and the control task's beside it (``probe.control``), fitted in the same passes."""
    fit = pcfg.linear
    probes = [ArcProbe(C=fit.C, max_iter=fit.max_iter, tol=fit.tol)]
    golds = [local_index(dtr.pos, dtr.head)]
    if pcfg.control:
        probes.append(ArcProbe(C=fit.C, max_iter=fit.max_iter, tol=fit.tol))
        golds.append(local_index(dtr.pos, control_targets(dtr, seed, tr.causal)))
    return fit_probes(probes, tr, golds, names=("task", "control")[:len(probes)])


def _candidate_metrics(dte: Words, pred: np.ndarray, causal: bool) -> dict[str, Any]:
    """What the probe scores: ``candidates`` (``all`` words, or ``left`` for a causal model's store) and, for a
    causal store, the share of eval dependents whose gold head is a candidate and the UAS over them."""
    if not causal:
        return {"candidates": "all"}
    ok = reachable(dte.pos, dte.head, True)
    return {"candidates": "left", "reachable_share": float(ok.mean()),
            "uas_reachable": float(np.mean(pred[ok] == dte.head[ok])) if ok.any() else float("nan")}


# the arc probe's trivial baselines, each a metric of its own; the margin is over the best of them
ARC_BASELINES = ("right_branching_uas", "best_offset_uas", "chains_uas")


def arc_baselines(dtr: Words, dte: Words, best_offset_max: int) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The offsets chosen on the training dependents (``best_offset``: the best in
    ``-best_offset_max..best_offset_max``; ``chains_offset``: the chains' side, -1 or +1) and each baseline's
    correct-or-not per eval dependent: right-branching, the best offset, the chains."""
    chosen = {"best_offset": best_offset(dtr.pos, dtr.n, dtr.head, best_offset_max),
              "chains_offset": chain_offset(dtr.pos, dtr.n, dtr.head)}
    hit = {"right_branching_uas": right_branching_heads(dte.pos, dte.n) == dte.head,
           "best_offset_uas": offset_heads(dte.pos, dte.n, chosen["best_offset"]) == dte.head,
           "chains_uas": offset_heads(dte.pos, dte.n, chosen["chains_offset"]) == dte.head}
    return chosen, hit


def run_arc(pcfg: Any, train: ProbeSplit, ev: ProbeSplit, sel: HeadSelection, seed: int) -> ProbeResult:
    """Train the Attn probe on ``train``, report UAS on ``ev`` beside the trivial baselines
    (:func:`arc_baselines`) and the margin over the best, and the control task (each word type attaches to
    ROOT, the first or the last word), fitted in the same passes; per-sentence terms of UAS and margin.

    A causal model's store gives each dependent only the words on its left as candidates (and ROOT): the probe
    trains on the dependents whose gold head is among them, and is scored on every dependent (``uas``; a head
    on the right is never predicted) and on those (``uas_reachable``, ``reachable_share``)."""
    causal = bool(getattr(train.store, "causal", False))
    dtr, tr = arc_data(pcfg, train, sel, reachable_only=causal)
    dte, te = arc_data(pcfg, ev, sel)  # every evaluation dependent
    if len(dtr) == 0 or len(dte) == 0:
        raise ValueError("no dependents to probe in the train or eval sentences")
    names = (pair_feature_names(sel, pcfg.feature_set, list(pcfg.neighbour_offsets))
             + root_feature_names(sel, pcfg.feature_set))
    probes = _fit(pcfg, dtr, tr, names, seed)
    probe = probes[0]
    pred = word_index(dte.pos, probe.predict(te))
    uas = float(np.mean(pred == dte.head))
    chosen, base = arc_baselines(dtr, dte, pcfg.best_offset_max)
    metrics: dict[str, Any] = {
        "uas": uas,
        "accuracy": uas,
        **chosen, **{k: float(np.mean(v)) for k, v in base.items()},
        "train_loss": probe.loss_, "n_iter": probe.n_iter_, "converged": probe.converged_,
        "n_train": int(len(dtr)), "n_eval": int(len(dte)), "n_train_candidates": int(tr.sizes.sum()),
        "n_features": int(tr.n_features + tr.n_root_features + 1), **_candidate_metrics(dte, pred, causal),
    }
    weights = [pd.DataFrame({"feature": names, "weight": probe.theta_[:-1], "probe": "task"})]
    if pcfg.control:
        cprobe = probes[1]
        cpred = word_index(dte.pos, cprobe.predict(te))
        metrics["control_uas"] = float(np.mean(cpred == control_targets(dte, seed, causal)))
        metrics["control_accuracy"] = metrics["control_uas"]
        metrics["selectivity"] = uas - metrics["control_uas"]
        metrics["control_converged"] = cprobe.converged_
        weights.append(pd.DataFrame({"feature": names, "weight": cprobe.theta_[:-1], "probe": "control"}))
    metrics["objective"] = uas
    metrics.update(margin_metrics(metrics, "uas", ARC_BASELINES))
    item_sentence, n_sent, correct = np.searchsorted(ev.indices, dte.sent), len(ev.indices), pred == dte.head
    terms = {"uas": accuracy_margin_terms(item_sentence, correct, np.zeros(len(dte)), n_sent),
             "margin": accuracy_margin_terms(item_sentence, correct, base[metrics["margin_baseline"]], n_sent)}
    by_rel = (pd.DataFrame({"relation": dte.relation.astype(str), "correct": pred == dte.head})
              .groupby("relation", sort=True)["correct"].agg(["size", "mean"]).reset_index()
              .rename(columns={"size": "n", "mean": "uas"}))
    tables = {"arc_weights": pd.concat(weights, ignore_index=True), "arc_uas_by_relation": by_rel}
    return ProbeResult(metrics, tables, terms)
