"""Minimum description length of a probe's labels, online code (Voita and Titov 2020, "Information-Theoretic
Probing with Minimum Description Length", Sec. 2.2; their code: lena-voita/description-length-probing,
``control_tasks/run_experiment.py`` and ``mdl_eval_notebooks/Eval_MDL_online_code.ipynb``).

The training items are shuffled with the seed and cut at ``int(f * N)`` for the fractions
:data:`FRACTIONS` (0.1 % ... 50 %, 100 %). The first block is sent with the uniform code (``log2 K`` bits an
item); every later block is sent with a probe trained on all the items before it. The online codelength is
the sum, in bits; the uniform codelength is ``N log2 K``; compression is their ratio. Their notebook adds
the torch cross-entropy (nats) to the uniform part (bits); here every block is converted to bits.

Two choices scikit-learn makes necessary (their torch probe always has an output for each of the K
classes): a probe's distribution is mixed with the uniform one, ``(1 - eps) p + eps / K`` (``eps`` =
:data:`UNIFORM_MIX`), so a class the prefix never showed still costs a finite ``log2(K / eps)`` bits at
most; and a prefix holding a single class (no classifier can be fitted) sends the next block with the
add-one frequencies of the prefix's labels.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd
from sklearn.exceptions import ConvergenceWarning

FRACTIONS = (0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.0625, 0.125, 0.25, 0.5, 1.0)
UNIFORM_MIX = 1e-3


@dataclass(frozen=True)
class OnlineCode:
    """An online codelength: ``codelength_bits`` (online), ``uniform_bits`` (``N log2 K``), ``compression``
    (uniform / online), ``n_items``, ``n_classes``, and ``blocks`` (one row a block: ``block``, ``start``,
    ``end``, ``train_items``, ``bits``; block 0 is the uniform one)."""

    codelength_bits: float
    uniform_bits: float
    compression: float
    n_items: int
    n_classes: int
    blocks: pd.DataFrame


def block_ends(n: int, fractions: Sequence[float] = FRACTIONS) -> np.ndarray:
    """Where each block ends: ``int(f * n)`` for every fraction (Voita and Titov's cut)."""
    f = np.asarray(fractions, dtype=np.float64)
    if len(f) < 2 or np.any(np.diff(f) <= 0) or f[0] <= 0 or f[-1] != 1.0:
        raise ValueError(f"MDL fractions must rise from above 0 to 1.0, got {list(fractions)}")
    return (f * n).astype(np.int64)


def _block_probs(model: Any, X: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """``(m, K)`` probabilities of ``classes`` from a fitted model that knows some of them."""
    p = model.predict_proba(X)
    out = np.zeros((len(X), len(classes)))
    out[:, np.searchsorted(classes, model.classes_)] = p
    return out


def online_code(make_model: Callable[[], Any], X: np.ndarray, y: np.ndarray, seed: int,
                classes: Sequence | None = None, fractions: Sequence[float] = FRACTIONS) -> OnlineCode:
    """Online codelength of labels ``y`` given features ``X`` under probes from ``make_model`` (a fresh
    scikit-learn classifier each block). ``classes``: the K labels of the uniform code (None: those of
    ``y``)."""
    y = np.asarray(y)
    n = len(y)
    classes = np.unique(y) if classes is None else np.unique(np.asarray(classes))
    k = len(classes)
    if n == 0 or k < 2:
        raise ValueError(f"MDL needs items of at least two classes, got {n} items of {k} classes")
    if not np.all(np.isin(y, classes)):
        raise ValueError("MDL: some labels are not among the given classes")
    order = np.random.default_rng(seed).permutation(n)
    Xs, ys = X[order], np.searchsorted(classes, y[order])
    ends = block_ends(n, fractions)
    rows = [{"block": 0, "start": 0, "end": int(ends[0]), "train_items": 0,
             "bits": float(ends[0] * np.log2(k))}]
    for b in range(len(ends) - 1):
        lo, hi = int(ends[b]), int(ends[b + 1])
        if hi == lo:
            continue
        seen = np.unique(ys[:lo])
        if len(seen) < 2:
            counts = np.bincount(ys[:lo], minlength=k) + 1.0
            p = np.broadcast_to(counts / counts.sum(), (hi - lo, k))
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                model = make_model().fit(Xs[:lo], classes[ys[:lo]])
            p = (1.0 - UNIFORM_MIX) * _block_probs(model, Xs[lo:hi], classes) + UNIFORM_MIX / k
        bits = float(-np.log2(p[np.arange(hi - lo), ys[lo:hi]]).sum())
        rows.append({"block": b + 1, "start": lo, "end": hi, "train_items": lo, "bits": bits})
    blocks = pd.DataFrame(rows)
    online = float(blocks["bits"].sum())
    uniform = float(n * np.log2(k))
    return OnlineCode(online, uniform, uniform / online, n, k, blocks)


def mdl_metrics(make_model: Callable[[], Any], X: np.ndarray, y: np.ndarray, control: np.ndarray | None,
                seed: int) -> tuple[dict[str, float], pd.DataFrame]:
    """``metrics.json`` entries and the per-block table of the online code of the task labels ``y`` and,
    given, of the control labels: ``codelength_bits``, ``uniform_codelength_bits``, ``compression``,
    ``control_codelength_bits``, ``control_compression``, ``codelength_ratio`` (control / task)."""
    task = online_code(make_model, X, y, seed)
    metrics = {"codelength_bits": task.codelength_bits, "uniform_codelength_bits": task.uniform_bits,
               "compression": task.compression}
    tables = [task.blocks.assign(labels="task")]
    if control is not None and len(np.unique(control)) >= 2:
        ctl = online_code(make_model, X, control, seed)
        metrics.update({"control_codelength_bits": ctl.codelength_bits,
                        "control_uniform_codelength_bits": ctl.uniform_bits,
                        "control_compression": ctl.compression,
                        "codelength_ratio": ctl.codelength_bits / task.codelength_bits})
        tables.append(ctl.blocks.assign(labels="control"))
    return metrics, pd.concat(tables, ignore_index=True)
