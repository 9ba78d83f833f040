"""Minimum description length of a probe's labels, online code (Voita and Titov 2020, "Information-Theoretic
Probing with Minimum Description Length", Sec. 2.2; their code: lena-voita/description-length-probing).

The training items are shuffled with the seed and cut at ``int(f * N)`` for the fractions :data:`FRACTIONS`
(0.1 % ... 50 %, 100 %; ``control_tasks/mdl_configs/online_l0.yml``, ``regimen.inds``). The first block is
sent with the uniform code (``log2 K`` bits an item); every later block is sent with a probe trained on the
items before it, the data the receiver already has. The online codelength is the sum, in bits; the uniform
codelength is ``N log2 K``; compression is their ratio.

Each block's probe (:func:`fit_softmax`) is a softmax regression over all K classes on standardised features,
trained as their regimen trains theirs (``control_tasks/control_tasks/regimen.py``, ``train_until_convergence``):
Adam at ``lr``, the rate halved whenever the held-out loss does not fall (``ReduceLROnPlateau``, factor 0.5,
patience 0), at most ``max_epochs`` epochs, stopping once the held-out cross-entropy has not fallen by
:data:`MIN_IMPROVEMENT` for ``patience`` epochs, and the best held-out epoch's weights kept. Three differences,
all deliberate:

- the held-out items are a seeded ``validation_fraction`` of the items before the block (so the code uses only
  transmitted data); ``run_experiment.py`` stops every block's probe on the treebank's dev set instead;
- the probe is linear; theirs (``online_l0.yml``: ``probe_hidden_layers: 2``, ``maximum_rank: 1000``;
  ``probe.py``, ``OneWordNNLabelProbe``) is an MLP with two hidden layers of 1,000 ReLUs;
- weights start at zero, so the untrained probe is the uniform code, and it is a candidate (epoch 0): a block is
  coded by a trained probe only where one beat the uniform code on the held-out items by ``MIN_IMPROVEMENT``
  (theirs starts from random weights and keeps the best epoch from the first on).

A class the prefix never showed still gets probability from the softmax. A block whose prefix has fewer than
two items (nothing to hold out) is sent with the uniform code. Their notebook
(``mdl_eval_notebooks/Eval_MDL_online_code.ipynb``) adds the summed torch cross-entropy of the later blocks, in
nats, to the first block's ``train_targets * log2(num_classes)`` bits; here every block is in bits.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn
from torch.nn import functional as F

from probing.probes.structural.probe import bounded_threads

FRACTIONS = (0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.0625, 0.125, 0.25, 0.5, 1.0)
# the least fall of the held-out cross-entropy (nats an item) that counts as an improvement (their regimen's
# 0.001)
MIN_IMPROVEMENT = 1e-3
LR_FACTOR = 0.5  # the learning rate's cut when the held-out loss does not fall (their scheduler_factor)

# fit(X_train, y_train, X_validation, y_validation, K, seed) -> (log-probabilities in nats of X, (m, K); the
# epoch whose weights were kept)
Fit = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, int],
               tuple[Callable[[np.ndarray], np.ndarray], int]]


@dataclass(frozen=True)
class MdlSettings:
    """How each block's probe is trained (``probe.mdl_*``): the held-out share of the transmitted items,
    Adam's learning rate, items a step, most epochs, and epochs without improvement before stopping."""

    validation_fraction: float
    lr: float
    batch_size: int
    max_epochs: int
    patience: int

    @classmethod
    def of(cls, pcfg: Any) -> "MdlSettings":
        """The ``probe.mdl_*`` settings of a probe config."""
        return cls(pcfg.mdl_validation_fraction, pcfg.mdl_lr, pcfg.mdl_batch_size, pcfg.mdl_max_epochs,
                   pcfg.mdl_patience)

    def __post_init__(self) -> None:
        if not 0.0 < self.validation_fraction < 1.0:
            raise ValueError(f"probe.mdl_validation_fraction must lie in (0, 1), got {self.validation_fraction}")
        if self.batch_size < 1 or self.max_epochs < 1 or self.patience < 1:
            raise ValueError("probe.mdl_batch_size, mdl_max_epochs and mdl_patience must be at least 1")


@dataclass(frozen=True)
class OnlineCode:
    """An online codelength: ``codelength_bits`` (online), ``uniform_bits`` (``N log2 K``), ``compression``
    (uniform / online), ``n_items``, ``n_classes``, and ``blocks`` (one row a block: ``block``, ``start``,
    ``end``, ``train_items``, ``validation_items``, ``epochs``, ``bits``, ``new_type_items``,
    ``new_type_bits``; block 0 is the uniform one)."""

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


def validation_size(prefix: int, fraction: float) -> int:
    """Items held out of a prefix of ``prefix`` items: ``ceil(fraction * prefix)``, at least one, leaving at
    least one to train on (0 for a prefix under two items)."""
    if prefix < 2:
        return 0
    return int(min(prefix - 1, max(1, np.ceil(fraction * prefix))))


def fit_softmax(settings: MdlSettings) -> Fit:
    """A softmax-regression :data:`Fit` trained to its best held-out cross-entropy (the module docstring)."""

    def fit(Xtr: np.ndarray, ytr: np.ndarray, Xva: np.ndarray, yva: np.ndarray, k: int, seed: int):
        mu = Xtr.mean(axis=0, dtype=np.float64)
        sd = Xtr.std(axis=0, dtype=np.float64)
        sd[sd == 0] = 1.0

        def tensor(X: np.ndarray) -> torch.Tensor:
            return torch.from_numpy(((X - mu) / sd).astype(np.float32))

        xt, yt = tensor(Xtr), torch.from_numpy(np.asarray(ytr, dtype=np.int64))
        xv, yv = tensor(Xva), torch.from_numpy(np.asarray(yva, dtype=np.int64))
        with bounded_threads():
            lin = nn.Linear(xt.shape[1], k)
            nn.init.zeros_(lin.weight)
            nn.init.zeros_(lin.bias)
            opt = torch.optim.Adam(lin.parameters(), lr=settings.lr)
            sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=LR_FACTOR, patience=0)
            rng = np.random.default_rng(seed)
            steps = max(1, int(np.ceil(len(yt) / settings.batch_size)))
            # epoch 0, the untrained probe, is the uniform code: a probe is kept only where it beats it
            best, best_state, best_epoch = float(np.log(k)), copy.deepcopy(lin.state_dict()), 0
            for epoch in range(1, settings.max_epochs + 1):
                for idx in np.array_split(rng.permutation(len(yt)), steps):
                    ix = torch.from_numpy(idx)
                    opt.zero_grad()
                    F.cross_entropy(lin(xt[ix]), yt[ix]).backward()
                    opt.step()
                with torch.no_grad():
                    held = float(F.cross_entropy(lin(xv), yv))
                sched.step(held)
                if held < best - MIN_IMPROVEMENT:
                    best, best_state, best_epoch = held, copy.deepcopy(lin.state_dict()), epoch
                elif best_epoch < epoch - (settings.patience - 1):
                    break
            lin.load_state_dict(best_state)

        def log_proba(X: np.ndarray) -> np.ndarray:
            with bounded_threads(), torch.no_grad():
                return F.log_softmax(lin(tensor(X)), dim=1).double().numpy()

        return log_proba, best_epoch

    return fit


def first_occurrences(types: np.ndarray) -> np.ndarray:
    """Whether each item is the first of its type in this order."""
    first = np.zeros(len(types), bool)
    first[np.unique(types, return_index=True)[1]] = True
    return first


def online_code(fit: Fit, X: np.ndarray, y: np.ndarray, seed: int, validation_fraction: float,
                classes: Sequence | None = None, fractions: Sequence[float] = FRACTIONS,
                types: np.ndarray | None = None) -> OnlineCode:
    """Online codelength of labels ``y`` given features ``X``: block ``b`` is sent with a probe from ``fit``
    trained on the items before it less a seeded ``validation_fraction`` of them, which stop its training.
    ``classes``: the K labels of the code (None: those of ``y``). ``types`` (an item's word type, say): each
    block also counts its items whose type no earlier item had, and the bits spent on them."""
    y = np.asarray(y)
    n = len(y)
    classes = np.unique(y) if classes is None else np.unique(np.asarray(classes))
    k = len(classes)
    if n == 0 or k < 2:
        raise ValueError(f"MDL needs items of at least two classes, got {n} items of {k} classes")
    if not np.all(np.isin(y, classes)):
        raise ValueError("MDL: some labels are not among the given classes")
    rng = np.random.default_rng(seed)
    order = rng.permutation(n)
    Xs, ys = X[order], np.searchsorted(classes, y[order])
    new = None if types is None else first_occurrences(np.asarray(types)[order])

    def new_types(lo: int, hi: int, item_bits: np.ndarray) -> dict[str, float]:
        if new is None:
            return {"new_type_items": np.nan, "new_type_bits": np.nan}
        return {"new_type_items": int(new[lo:hi].sum()), "new_type_bits": float(item_bits[new[lo:hi]].sum())}

    ends = block_ends(n, fractions)
    log2k = float(np.log2(k))
    rows = [{"block": 0, "start": 0, "end": int(ends[0]), "train_items": 0, "validation_items": 0, "epochs": 0,
             "bits": float(ends[0] * log2k), **new_types(0, int(ends[0]), np.full(int(ends[0]), log2k))}]
    for b in range(len(ends) - 1):
        lo, hi = int(ends[b]), int(ends[b + 1])
        if hi == lo:
            continue
        n_val = validation_size(lo, validation_fraction)
        if n_val == 0:
            item_bits, epochs = np.full(hi - lo, log2k), 0
        else:
            held = rng.permutation(lo)
            va, tr = np.sort(held[:n_val]), np.sort(held[n_val:])
            log_proba, epochs = fit(Xs[tr], ys[tr], Xs[va], ys[va], k, seed + b)
            item_bits = -log_proba(Xs[lo:hi])[np.arange(hi - lo), ys[lo:hi]] / np.log(2.0)  # nats -> bits
        rows.append({"block": b + 1, "start": lo, "end": hi, "train_items": lo - n_val, "validation_items": n_val,
                     "epochs": int(epochs), "bits": float(item_bits.sum()), **new_types(lo, hi, item_bits)})
    blocks = pd.DataFrame(rows)
    online = float(blocks["bits"].sum())
    uniform = float(n * log2k)
    return OnlineCode(online, uniform, uniform / online, n, k, blocks)


def mdl_metrics(settings: MdlSettings, X: np.ndarray, y: np.ndarray, control: np.ndarray | None,
                seed: int, types: np.ndarray | None = None) -> tuple[dict[str, float], pd.DataFrame]:
    """``metrics.json`` entries and the per-block table of the online code of the task labels ``y`` and,
    given, of the control labels: ``codelength_bits``, ``uniform_codelength_bits``, ``compression``,
    ``control_codelength_bits``, ``control_compression``, ``codelength_ratio`` (control / task).
    ``types``: the word type each item's control label is a function of (:func:`online_code`)."""
    fit = fit_softmax(settings)
    task = online_code(fit, X, y, seed, settings.validation_fraction, types=types)
    metrics = {"codelength_bits": task.codelength_bits, "uniform_codelength_bits": task.uniform_bits,
               "compression": task.compression}
    tables = [task.blocks.assign(labels="task")]
    if control is not None and len(np.unique(control)) >= 2:
        ctl = online_code(fit, X, control, seed, settings.validation_fraction, types=types)
        metrics.update({"control_codelength_bits": ctl.codelength_bits,
                        "control_uniform_codelength_bits": ctl.uniform_bits,
                        "control_compression": ctl.compression,
                        "codelength_ratio": ctl.codelength_bits / task.codelength_bits})
        tables.append(ctl.blocks.assign(labels="control"))
    return metrics, pd.concat(tables, ignore_index=True)
