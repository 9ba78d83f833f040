"""Clark et al.'s (2019) "Attn" probe: each word's head is a softmax over the sentence's words plus ROOT.

For dependent i and candidate head j, ``score(i, j) = sum_k w_k A_k[i, j] + u_k A_k[j, i]`` over the selected
heads k (the columns of ``X``). ROOT is scored from attention to and from the special tokens with weights of
its own plus a bias, ``score(i, ROOT) = sum_k r_k A_k[i, specials] + v_k A_k[specials, i] + b`` (``R``): the
paper does not say how ROOT is scored, and [SEP]/[CLS] carry most of many heads' mass, so sharing w would
tie the two. Trained by full-batch L-BFGS (scipy) on the mean cross-entropy plus an L2 penalty with
scikit-learn's convention for ``C`` (smaller C = stronger penalty; the bias is not penalised).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import minimize
from sklearn.base import BaseEstimator

from probing.probes.baselines import best_offset, offset_heads, right_branching_heads
from probing.probes.control import control_heads
from probing.probes.data import ProbeResult, ProbeSplit, punct_tags, subsample_rows
from probing.probes.features import HeadSelection, pair_features, root_features
from probing.probes.pairs import Candidates, Words, candidates, dependents

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ArcData:
    """Candidates of D dependents: ``X`` ``(C, F)`` word-candidate features grouped by dependent,
    ``R`` ``(D, F_root)`` ROOT features, ``sizes`` ``(D,)`` word candidates per dependent, and ``gold``
    ``(D,)`` the gold head's index within the dependent's block (-1 = ROOT), or None when unknown."""

    X: np.ndarray
    R: np.ndarray
    sizes: np.ndarray
    gold: np.ndarray | None = None

    @property
    def starts(self) -> np.ndarray:
        return np.cumsum(self.sizes) - self.sizes

    def __post_init__(self) -> None:
        if self.X.shape[0] != int(np.sum(self.sizes)):
            raise ValueError(f"X has {self.X.shape[0]} rows but sizes sum to {int(np.sum(self.sizes))}")
        if self.R.shape[0] != len(self.sizes):
            raise ValueError(f"R has {self.R.shape[0]} rows for {len(self.sizes)} dependents")
        if self.gold is not None and np.any(self.gold >= self.sizes):
            raise ValueError("a gold index is outside its dependent's candidates")


def _scores(theta: np.ndarray, data: ArcData) -> tuple[np.ndarray, np.ndarray]:
    f = data.X.shape[1]
    w, r, b = theta[:f], theta[f:-1], theta[-1]
    sw = (data.X @ w.astype(np.float32)).astype(np.float64)
    sr = (data.R @ r.astype(np.float32)).astype(np.float64) + b
    return sw, sr


def _normaliser(sw: np.ndarray, sr: np.ndarray, data: ArcData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per dependent: the log partition function, and the unnormalised (shifted) exps of words and ROOT."""
    sizes = data.sizes
    ne = sizes > 0  # a one-word sentence has only ROOT
    starts = data.starts[ne]
    m = sr.copy()
    if ne.any():
        m[ne] = np.maximum(m[ne], np.maximum.reduceat(sw, starts))
    ew = np.exp(sw - np.repeat(m, sizes))
    er = np.exp(sr - m)
    z = er.copy()
    if ne.any():
        z[ne] += np.add.reduceat(ew, starts)
    return np.log(z) + m, ew / np.repeat(z, sizes), er / z


def arc_loss(theta: np.ndarray, data: ArcData, alpha: float = 0.0) -> tuple[float, np.ndarray]:
    """Mean cross-entropy of the gold heads plus ``alpha/2 * ||weights||^2``, and its gradient."""
    if data.gold is None:
        raise ValueError("arc_loss needs gold heads")
    d = len(data.sizes)
    sw, sr = _scores(theta, data)
    log_z, pw, pr = _normaliser(sw, sr, data)
    is_word = data.gold >= 0
    gold_idx = data.starts[is_word] + data.gold[is_word]
    gold_score = sr.copy()
    gold_score[is_word] = sw[gold_idx]
    loss = float(np.mean(log_z - gold_score))
    gw = pw.copy()
    gw[gold_idx] -= 1.0
    gr = pr - (~is_word)
    grad = np.concatenate([
        (data.X.T @ gw.astype(np.float32)).astype(np.float64) / d,
        (data.R.T @ gr.astype(np.float32)).astype(np.float64) / d,
        [gr.sum() / d],
    ])
    weights = theta[:-1]
    loss += 0.5 * alpha * float(weights @ weights)
    grad[:-1] += alpha * weights
    return loss, grad


class ArcProbe(BaseEstimator):
    """A scikit-learn style estimator over :class:`ArcData`: ``fit(data)`` returns self; fitted
    ``coef_`` (F,), ``root_coef_`` (F_root,), ``root_intercept_``, ``n_iter_``, ``loss_``, ``converged_``.

    ``C`` follows LogisticRegression: the objective is ``C * sum CE + ||w||^2 / 2`` (scaled by 1/D).
    """

    def __init__(self, C: float = 1.0, max_iter: int = 1000, tol: float = 1e-4):
        self.C = C
        self.max_iter = max_iter
        self.tol = tol

    def fit(self, data: ArcData, y: None = None) -> "ArcProbe":
        if data.gold is None:
            raise ValueError("ArcProbe.fit needs ArcData with gold heads")
        if self.C <= 0:
            raise ValueError(f"C must be positive, got {self.C}")
        d = len(data.sizes)
        res = self._minimize(data, 1.0 / (self.C * d))
        f = data.X.shape[1]
        self.coef_ = res.x[:f].copy()
        self.root_coef_ = res.x[f:-1].copy()
        self.root_intercept_ = float(res.x[-1])
        self.n_iter_ = int(res.nit)
        self.loss_ = float(res.fun)
        self.converged_ = bool(res.success)
        return self

    def _minimize(self, data: ArcData, alpha: float) -> Any:
        """Full-batch L-BFGS from zero; the loss is logged every 25 evaluations, so a long fit is never silent."""
        start, calls = time.perf_counter(), [0]

        def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
            loss, grad = arc_loss(theta, data, alpha)
            calls[0] += 1
            if calls[0] % 25 == 0:
                log.info("arc probe: %d loss evaluations, loss %.5f (%.0f s)", calls[0], loss,
                         time.perf_counter() - start)
            return loss, grad

        theta0 = np.zeros(data.X.shape[1] + data.R.shape[1] + 1)
        res = minimize(objective, theta0, jac=True, method="L-BFGS-B",
                       options={"maxiter": self.max_iter, "gtol": self.tol, "ftol": 1e-12})
        log.info("arc probe: %d dependents x %d candidates, %d iterations, loss %.5f, %s (%.1f s)",
                 len(data.sizes), data.X.shape[0], res.nit, res.fun,
                 "converged" if res.success else f"not converged: {res.message}", time.perf_counter() - start)
        return res

    @property
    def theta_(self) -> np.ndarray:
        return np.concatenate([self.coef_, self.root_coef_, [self.root_intercept_]])

    def predict_log_proba(self, data: ArcData) -> tuple[np.ndarray, np.ndarray]:
        """Log-probabilities ``(log p(ROOT) (D,), log p(word candidate) (C,))``."""
        sw, sr = _scores(self.theta_, data)
        log_z, _, _ = _normaliser(sw, sr, data)
        return sr - log_z, sw - np.repeat(log_z, data.sizes)

    def predict(self, data: ArcData) -> np.ndarray:
        """Each dependent's predicted head as an index into its block (-1 = ROOT)."""
        sw, sr = _scores(self.theta_, data)
        sizes = data.sizes
        out = np.full(len(sizes), -1, dtype=np.int64)
        ne = sizes > 0
        if not ne.any():
            return out
        starts = data.starts
        best = np.full(len(sizes), -np.inf)
        best[ne] = np.maximum.reduceat(sw, starts[ne])
        seg = np.repeat(np.arange(len(sizes)), sizes)
        hits = np.flatnonzero(sw == best[seg])
        first_seg, first_at = np.unique(seg[hits], return_index=True)  # first maximum in each block
        local = hits[first_at] - starts[first_seg]
        wins = best[first_seg] > sr[first_seg]  # ties go to ROOT
        out[first_seg[wins]] = local[wins]
        return out

    def score(self, data: ArcData) -> float:
        """Attachment accuracy against ``data.gold``."""
        return float(np.mean(self.predict(data) == data.gold))


# ---- the arc probe task ----------------------------------------------------------------------------------

def arc_data(pcfg: Any, split: ProbeSplit, sel: HeadSelection, limit: int | None
             ) -> tuple[Words, Candidates, ArcData, list[str]]:
    """Dependents of a split (at most ``limit``, a seeded subsample), their candidates and features
    (gold = the treebank heads)."""
    deps = dependents(split.words(pcfg.collapse_subtypes, punct_tags(pcfg)), pcfg.exclude_punct)
    deps = deps.take(subsample_rows(len(deps), limit, pcfg.seed))
    cand = candidates(deps)
    X, names = pair_features(split.store, cand.sent, cand.query, cand.key, sel, pcfg.feature_set,
                             list(pcfg.neighbour_offsets))
    R, rnames = root_features(split.store, deps.sent, deps.pos, sel, pcfg.feature_set)
    return deps, cand, ArcData(X, R, cand.sizes, cand.local_index(deps.head)), names + rnames


def _heads(cand: Candidates, local: np.ndarray) -> np.ndarray:
    """Block-local predictions -> word indices (-1 = ROOT)."""
    return np.where(local >= 0, cand.key[cand.starts + np.maximum(local, 0)], -1)


def run_arc(pcfg: Any, train: ProbeSplit, ev: ProbeSplit, sel: HeadSelection) -> ProbeResult:
    """Train the Attn probe on ``train``, report UAS on ``ev`` beside right-branching, best-offset and the
    control task (each word type attaches to ROOT, the first or the last word)."""
    dtr, ctr, tr, names = arc_data(pcfg, train, sel, pcfg.max_train_arcs)
    dte, cte, te, _ = arc_data(pcfg, ev, sel, None)  # every evaluation dependent
    if len(dtr) == 0 or len(dte) == 0:
        raise ValueError("no dependents to probe in the train or eval sentences")
    probe = ArcProbe(C=pcfg.C, max_iter=pcfg.max_iter, tol=pcfg.tol).fit(tr)
    pred = _heads(cte, probe.predict(te))
    uas = float(np.mean(pred == dte.head))
    offset = best_offset(dtr.pos, dtr.n, dtr.head, pcfg.best_offset_max)
    metrics: dict[str, Any] = {
        "uas": uas,
        "accuracy": uas,
        "right_branching_uas": float(np.mean(right_branching_heads(dte.pos, dte.n) == dte.head)),
        "best_offset": offset,
        "best_offset_uas": float(np.mean(offset_heads(dte.pos, dte.n, offset) == dte.head)),
        "train_loss": probe.loss_, "n_iter": probe.n_iter_, "converged": probe.converged_,
        "n_train": int(len(dtr)), "n_eval": int(len(dte)), "n_train_candidates": int(tr.X.shape[0]),
        "n_features": int(tr.X.shape[1] + tr.R.shape[1] + 1),
    }
    weights = [pd.DataFrame({"feature": names, "weight": probe.theta_[:-1], "probe": "task"})]
    if pcfg.control:
        c_tr = control_heads(dtr.word, dtr.pos, dtr.n, pcfg.seed)
        c_te = control_heads(dte.word, dte.pos, dte.n, pcfg.seed)
        cprobe = ArcProbe(C=pcfg.C, max_iter=pcfg.max_iter, tol=pcfg.tol).fit(
            ArcData(tr.X, tr.R, tr.sizes, ctr.local_index(c_tr)))
        cpred = _heads(cte, cprobe.predict(te))
        metrics["control_uas"] = float(np.mean(cpred == c_te))
        metrics["control_accuracy"] = metrics["control_uas"]
        metrics["selectivity"] = uas - metrics["control_uas"]
        metrics["control_converged"] = cprobe.converged_
        weights.append(pd.DataFrame({"feature": names, "weight": cprobe.theta_[:-1], "probe": "control"}))
    metrics["objective"] = uas
    by_rel = (pd.DataFrame({"relation": dte.relation.astype(str), "correct": pred == dte.head})
              .groupby("relation", sort=True)["correct"].agg(["size", "mean"]).reset_index()
              .rename(columns={"size": "n", "mean": "uas"}))
    tables = {"arc_weights": pd.concat(weights, ignore_index=True), "arc_uas_by_relation": by_rel}
    return ProbeResult(metrics, tables)
