"""Fitting the arc probe: a damped Newton method over passes of blocks, several probes in lockstep.

The objective of each probe is the mean cross-entropy of its gold heads (a softmax over each dependent's
word candidates and ROOT) plus ``alpha/2 * ||weights||^2``: convex, smooth, with about 200 parameters but
millions of candidate rows. L-BFGS needs ~200 passes over the data; Newton needs ~10, each pass giving the
loss, the gradient (exact, every block) and the Hessian (from a fixed sample of blocks: it only sets the
step, so the optimum is the exact one). Each step is checked by an Armijo backtracking line search. The
task probe and its control task read the same features, so both are fitted in the same passes: a pass
builds each block once and scores it for every probe.

Parameters are laid out as ``theta = [w (F word-candidate weights), r (F_root ROOT weights), b (ROOT bias)]``.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.linalg import blas
from threadpoolctl import threadpool_limits

from probing.probes.arc.blocks import ArcBlock, ArcBlocks

log = logging.getLogger(__name__)

HESSIAN_ROWS = 600_000  # candidate rows sampled for the Hessian (every k-th block), about 1/8 of EWT train
HESSIAN_WINDOW = 4  # iterates whose Hessian samples are pooled
WARM_SHARE = 0.125  # share of the sentences whose optimum starts a fit on large data
WARM_MIN_ROWS = 4 * HESSIAN_ROWS  # candidate rows from which the warm start pays
WARM_TOL_FACTOR = 10.0  # the warm start is only a starting point: a looser gradient tolerance
_ARMIJO = 1e-4
_MAX_HALVINGS = 30
# Scores are float32 products of float32 weights, so the loss is known to about float32's precision: a
# Newton step whose predicted decrease is below this share of the loss cannot be judged by the loss
_LOSS_RESOLUTION = 8 * float(np.finfo(np.float32).eps)


@dataclass(frozen=True)
class Evaluation:
    """One probe at one ``theta``: the penalised mean loss and its gradient."""

    loss: float
    grad: np.ndarray


@dataclass(frozen=True)
class Fit:
    """A fitted probe: parameters, iterations, final loss, whether the gradient tolerance was met."""

    theta: np.ndarray
    n_iter: int
    loss: float
    converged: bool


def n_params(data: ArcBlocks) -> int:
    return data.n_features + data.n_root_features + 1


def _block_scores(block: ArcBlock, thetas: np.ndarray, f: int) -> tuple[np.ndarray, np.ndarray]:
    """``(C, P)`` word-candidate and ``(D, P)`` ROOT scores of every probe, float64."""
    sw = (block.X @ thetas[:, :f].T.astype(np.float32)).astype(np.float64)
    sr = (block.R @ thetas[:, f:-1].T.astype(np.float32)).astype(np.float64) + thetas[:, -1]
    return sw, sr


def _softmax(sw: np.ndarray, sr: np.ndarray, sizes: np.ndarray, starts: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per dependent and probe: log partition ``(D, P)`` and the probabilities of words ``(C, P)`` and ROOT."""
    ne = sizes > 0  # a one-word sentence has only ROOT
    m = sr.copy()
    if ne.any():
        m[ne] = np.maximum(m[ne], np.maximum.reduceat(sw, starts[ne], axis=0))
    ew = np.exp(sw - np.repeat(m, sizes, axis=0))
    er = np.exp(sr - m)
    z = er.copy()
    if ne.any():
        z[ne] += np.add.reduceat(ew, starts[ne], axis=0)
    return np.log(z) + m, ew / np.repeat(z, sizes, axis=0), er / z


def block_log_proba(block: ArcBlock, thetas: np.ndarray, f: int) -> tuple[np.ndarray, np.ndarray]:
    """``(log p(ROOT) (D, P), log p(word candidate) (C, P))`` of every probe on one block."""
    sw, sr = _block_scores(block, thetas, f)
    log_z, _, _ = _softmax(sw, sr, block.sizes, block.starts)
    return sr - log_z, sw - np.repeat(log_z, block.sizes, axis=0)


def block_predict(block: ArcBlock, theta: np.ndarray, f: int) -> np.ndarray:
    """Each dependent's predicted head in its block (-1 = ROOT); the first maximum wins, ties go to ROOT."""
    sw, sr = _block_scores(block, theta[None, :], f)
    sw, sr = sw[:, 0], sr[:, 0]
    sizes, starts = block.sizes, block.starts
    out = np.full(len(sizes), -1, dtype=np.int64)
    ne = sizes > 0
    if not ne.any():
        return out
    best = np.full(len(sizes), -np.inf)
    best[ne] = np.maximum.reduceat(sw, starts[ne])
    seg = np.repeat(np.arange(len(sizes)), sizes)
    hits = np.flatnonzero(sw == best[seg])
    first_seg, first_at = np.unique(seg[hits], return_index=True)
    local = hits[first_at] - starts[first_seg]
    wins = best[first_seg] > sr[first_seg]
    out[first_seg[wins]] = local[wins]
    return out


def _hessian(block: ArcBlock, pw: np.ndarray, pr: np.ndarray) -> np.ndarray:
    """Sum over the block's dependents of the covariance of their candidates' feature vectors under the
    model (the Hessian of the summed cross-entropy): word candidates are ``(X_c, 0, 0)``, ROOT ``(0, R_d, 1)``.
    ``sum_c p_c x_c x_c^T`` is one SYRK of the rows scaled by ``sqrt(p)`` (half a GEMM's work); each
    dependent's mean ``m_d = sum_c p_c x_c`` is a sparse product."""
    X, sizes = block.X, block.sizes
    d = len(sizes)
    rt = np.concatenate([block.R, np.ones((d, 1), np.float32)], axis=1)
    pwf = pw.astype(np.float32)
    upper = blas.ssyrk(1.0, X * np.sqrt(pwf)[:, None], trans=1).astype(np.float64)  # upper triangle
    hxx = np.triu(upper) + np.triu(upper, 1).T
    seg = sparse.csr_matrix((pwf, np.arange(len(pwf)), np.r_[0, np.cumsum(sizes)]), shape=(d, len(pwf)))
    mx = np.asarray(seg @ X, dtype=np.float32)
    hxx -= (mx.T @ mx).astype(np.float64)
    prf = pr.astype(np.float32)
    hrr = ((rt * (prf * (1 - prf))[:, None]).T @ rt).astype(np.float64)
    hxr = -(mx.T @ (rt * prf[:, None])).astype(np.float64)
    return np.block([[hxx, hxr], [hxr.T, hrr]])


def _block_loss_grad(block: ArcBlock, thetas: np.ndarray, golds: np.ndarray, f: int
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Summed cross-entropy ``(P,)`` and gradient ``(P, n_params)`` of one block (numpy)."""
    sizes, starts = block.sizes, block.starts
    sw, sr = _block_scores(block, thetas, f)
    log_z, pw, pr = _softmax(sw, sr, sizes, starts)
    g = golds[:, block.rows].T  # (D, P)
    is_word = g >= 0
    dep, prob = np.nonzero(is_word)
    gold_rows = starts[dep] + g[dep, prob]
    gold_score = sr.copy()
    gold_score[dep, prob] = sw[gold_rows, prob]
    gw = pw.copy()
    gw[gold_rows, prob] -= 1.0
    gr = pr - ~is_word
    grad = np.concatenate([(block.X.T @ gw.astype(np.float32)).T, (block.R.T @ gr.astype(np.float32)).T,
                           gr.sum(axis=0)[:, None]], axis=1)
    return (log_z - gold_score).sum(axis=0), grad


def evaluate(data: ArcBlocks, thetas: np.ndarray, golds: np.ndarray, alpha: float) -> list[Evaluation]:
    """One pass: for each probe p (``thetas[p]``, gold heads ``golds[p]`` as block-local indices, -1 = ROOT)
    the penalised mean loss and its gradient (the source's compiled pass when it has one)."""
    if hasattr(data, "loss_grad"):
        loss, grad = data.loss_grad(thetas, golds)
    else:
        loss, grad = np.zeros(len(thetas)), np.zeros(thetas.shape)
        for block in data.blocks():
            lb, gb = _block_loss_grad(block, thetas, golds, data.n_features)
            loss += lb
            grad += gb
    d = max(data.n_dependents, 1)
    out = []
    for p in range(len(thetas)):
        w = thetas[p, :-1]
        g_p = grad[p] / d
        g_p[:-1] += alpha * w
        out.append(Evaluation(float(loss[p] / d + 0.5 * alpha * w @ w), g_p))
    return out


def hessian_sample(data: ArcBlocks, thetas: np.ndarray, stride: int, phase: int
                   ) -> tuple[np.ndarray, int]:
    """Summed Hessians ``(P, n, n)`` of the cross-entropy over the blocks ``b % stride == phase``, and how
    many dependents they hold."""
    hess = np.zeros((len(thetas), thetas.shape[1], thetas.shape[1]))
    count = 0
    for block in data.blocks(stride, phase):
        sw, sr = _block_scores(block, thetas, data.n_features)
        _, pw, pr = _softmax(sw, sr, block.sizes, block.starts)
        count += len(block.sizes)
        for p in range(len(thetas)):
            hess[p] += _hessian(block, pw[:, p], pr[:, p])
    return hess, count


def hessian_stride(data: ArcBlocks) -> int:
    """Every how many blocks the Hessian is sampled so that it sees about :data:`HESSIAN_ROWS` candidates
    (blocks hold about the same number of rows, so the stride is the ratio of rows)."""
    total = int(np.sum(data.sizes)) + data.n_dependents
    return max(1, total // HESSIAN_ROWS)


class _Curvature:
    """A probe's Hessian estimate: the mean over the samples of its last ``window`` iterates, each from another
    phase of blocks, so that near the optimum every block is soon seen. A step shorter than Newton's says the
    curvature is still changing: the pool then restarts from the newest sample."""

    def __init__(self, window: int):
        self.window, self.samples = window, []

    def add(self, hess: np.ndarray, count: int, full_step: bool) -> None:
        self.samples = ((self.samples if full_step else []) + [(hess, count)])[-self.window:]

    def matrix(self, alpha: float) -> np.ndarray:
        h = sum(s for s, _ in self.samples) / max(sum(c for _, c in self.samples), 1)
        idx = np.arange(len(h) - 1)
        h[idx, idx] += alpha  # the penalty (the bias is not penalised)
        return h


def _direction(h: np.ndarray, grad: np.ndarray) -> np.ndarray:
    """The Newton step ``-H^-1 g`` (a tiny ridge when H is singular, e.g. a feature that is always 0)."""
    try:
        return -np.linalg.solve(h, grad)
    except np.linalg.LinAlgError:
        ridge = 1e-8 * max(float(np.trace(h)) / len(h), 1e-12)
        return -np.linalg.solve(h + ridge * np.eye(len(h)), grad)


def _backtrack(step: float, f0: float, slope: float, f_step: float) -> float:
    """The next, shorter step of an Armijo line search: the minimum of the quadratic through ``f(0)``,
    ``f'(0)`` and ``f(step)``, kept within [0.1, 0.5] of the step (Nocedal and Wright, 3.5)."""
    curv = f_step - f0 - slope * step
    t = -slope * step * step / (2 * curv) if curv > 0 else 0.5 * step
    return float(min(max(t, 0.1 * step), 0.5 * step))


def _unresolved_step_helps(step: float, slope: float, before: Evaluation, after: Evaluation) -> bool:
    """A full Newton step so close to the optimum that its predicted decrease ``-slope`` is below the loss's
    float32 resolution: the loss cannot tell it from a worse point, so the step is judged by the gradient it
    leaves (accepted when the largest gradient component shrinks). Without this a fit stalls a step short of
    its tolerance wherever the BLAS kernel's rounding makes that last loss come out no lower."""
    if step != 1.0 or -slope > _LOSS_RESOLUTION * max(1.0, abs(before.loss)):
        return False
    return float(np.max(np.abs(after.grad))) < float(np.max(np.abs(before.grad)))


def warm_start_rows(data: ArcBlocks) -> np.ndarray | None:
    """Dependents of a seeded sample of :data:`WARM_SHARE` of the sentences, when the data is big enough for a
    first fit on them to pay (a few full passes then finish the job); else None."""
    sent = getattr(data, "sent", None)
    if sent is None or int(np.sum(data.sizes)) < WARM_MIN_ROWS:
        return None
    uniq = np.unique(sent)
    keep = np.random.default_rng(0).random(len(uniq)) < WARM_SHARE
    return np.flatnonzero(np.isin(sent, uniq[keep]))


def newton(data: ArcBlocks, golds: np.ndarray, alpha: float, max_iter: int, tol: float,
           names: tuple[str, ...] = ()) -> list[Fit]:
    """:func:`_newton` with one BLAS thread: the compiled kernels use every core, and BLAS threads left
    spinning beside them make the Hessian about nine times slower on 2 cores."""
    with threadpool_limits(1, user_api="blas"):
        return _newton(data, golds, alpha, max_iter, tol, names, warm_start=True)


def _newton(data: ArcBlocks, golds: np.ndarray, alpha: float, max_iter: int, tol: float,
            names: tuple[str, ...], warm_start: bool) -> list[Fit]:
    """Fit one probe per row of ``golds``; stop when ``max |gradient| <= tol`` or after ``max_iter`` Newton
    steps. On large data the start is the optimum for a sample of the sentences (same ``alpha``), else zero.
    Every iteration is logged (loss, max gradient, step length, seconds)."""
    n_p, start = len(golds), time.perf_counter()
    names = names or tuple(f"probe {p}" for p in range(n_p))
    thetas = np.zeros((n_p, n_params(data)))
    rows = warm_start_rows(data) if warm_start else None
    if rows is not None and len(rows):
        warm = _newton(data.subset(rows), golds[:, rows], alpha, max_iter, WARM_TOL_FACTOR * tol,
                       tuple(f"{n}, warm start on {len(rows)} dependents" for n in names), warm_start=False)
        thetas = np.stack([w.theta for w in warm])
    stride = hessian_stride(data)
    evs = evaluate(data, thetas, golds, alpha)
    curv = [_Curvature(min(stride, HESSIAN_WINDOW)) for _ in range(n_p)]
    it = np.zeros(n_p, dtype=int)
    last_step = np.zeros(n_p)
    done = np.array([float(np.max(np.abs(e.grad))) <= tol for e in evs])
    stalled = np.zeros(n_p, dtype=bool)
    while True:
        active = np.flatnonzero(~(done | stalled) & (it < max_iter))
        if len(active) == 0:
            break
        hess, count = hessian_sample(data, thetas[active], stride, int(it[active[0]]) % stride)
        for a, p in enumerate(active):
            curv[p].add(hess[a], count, last_step[p] == 1.0)
        dirs = {p: _direction(curv[p].matrix(alpha), evs[p].grad) for p in active}
        steps = {p: 1.0 for p in active}
        pending, halvings = list(active), 0
        while pending:
            trial = np.stack([thetas[p] + steps[p] * dirs[p] for p in pending])
            still = []
            for p, th, ev in zip(pending, trial, evaluate(data, trial, golds[pending], alpha)):
                slope = float(evs[p].grad @ dirs[p])
                accept = (ev.loss <= evs[p].loss + _ARMIJO * steps[p] * slope
                          or _unresolved_step_helps(steps[p], slope, evs[p], ev))
                if accept or halvings >= _MAX_HALVINGS:
                    if accept or ev.loss < evs[p].loss:
                        thetas[p], evs[p] = th, ev
                    else:  # no decrease left along the Newton direction: the loss is flat at float precision
                        stalled[p] = True
                    it[p] += 1
                    last_step[p] = steps[p]
                    gmax = float(np.max(np.abs(evs[p].grad)))
                    done[p] = gmax <= tol
                    log.info("arc probe (%s): iteration %d, loss %.6f, max gradient %.2e, step %.3g (%.1f s)%s",
                             names[p], it[p], evs[p].loss, gmax, steps[p], time.perf_counter() - start,
                             "; stalled at float precision" if stalled[p] and not done[p] else "")
                else:
                    steps[p] = _backtrack(steps[p], evs[p].loss, slope, ev.loss)
                    still.append(p)
            pending, halvings = still, halvings + 1
    return [Fit(thetas[p].copy(), int(it[p]), evs[p].loss, bool(done[p])) for p in range(n_p)]
