"""Importance scores as tidy rows, with percentile intervals from a bootstrap over evaluation sentences:
score drops of gate settings (:func:`drop_rows`, with a one-sided bootstrap p-value of harm), normalised gradient
importance (:func:`gradient_rows`), the pruning curves beside the all-heads-ablated floor (:func:`pruning_rows`),
the costliest head per relation chosen on one half of the sentences and scored on the other
(:func:`heldout_rows`), and the link between attention accuracy and ablation importance (:func:`link_rows`,
Spearman over heads).

A resample is a row of sentence counts ``w`` (probing's bootstrap convention), so every resampled score is a
ratio of weighted sums; nothing is recomputed.
"""

from __future__ import annotations

import warnings
from typing import Mapping, Optional, Sequence

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from probing.config import Multiplicity
from probing.importance.scores import Sums
from probing.schema import ALL
from probing.stats.bootstrap import resample_counts
from probing.stats.heldout import halves as split_halves
from probing.stats.multiplicity import adjust, bootstrap_p, bootstrap_p_two_sided


def _interval(samples: np.ndarray, ci: float) -> tuple[np.ndarray, np.ndarray]:
    with warnings.catch_warnings():  # a score undefined in every resample has an undefined interval: NaN, said
        warnings.simplefilter("ignore", RuntimeWarning)  # in the table, not as a warning on the console
        lo, hi = np.nanpercentile(samples, [50 * (1 - ci), 50 * (1 + ci)], axis=0)
    return lo, hi


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def kept_groups(groups: Sequence[str], n: np.ndarray, min_count: int) -> list[int]:
    """Indices of the groups with at least ``min_count`` arcs in all (``all`` always)."""
    tot = n.sum(0)
    return [g for g, name in enumerate(groups) if name == ALL or tot[g] >= min_count]


def _weighted(weights: np.ndarray, sets: np.ndarray) -> np.ndarray:
    """``weights (n, S)``, ``sets (A, S, G)`` -> ``(n, A, G)`` weighted sums, as one BLAS product."""
    a, s, g = sets.shape
    return (weights @ sets.transpose(1, 0, 2).reshape(s, a * g)).reshape(len(weights), a, g)


def changes(sums: Sums, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(n, A, G)`` score drop (clean − gated) and loss change (gated − clean) of every setting, for each row
    of sentence ``weights (n, S)``."""
    n = weights @ sums.n  # (n, G)
    score0, loss0 = _ratio(weights @ sums.clean_hits, n), _ratio(weights @ sums.clean_loss, n)
    return (score0[:, None] - _ratio(_weighted(weights, sums.hits), n[:, None]),
            _ratio(_weighted(weights, sums.loss), n[:, None]) - loss0[:, None])


def harm_p(samples: np.ndarray) -> np.ndarray:
    """``(n, ...)`` bootstrap resamples -> ``(...)`` one-sided p-values of "above 0" (an ablation that costs),
    :func:`probing.stats.multiplicity.bootstrap_p` elementwise: ``(1 + #{s <= 0}) / (1 + B)`` over the defined
    resamples, NaN where none is (and where there are no resamples)."""
    ok = np.isfinite(samples)
    defined = ok.sum(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = (1 + (ok & (np.where(ok, samples, 1) <= 0)).sum(0)) / (1 + defined)
    return np.where(defined > 0, p, np.nan)


def drop_rows(sums: Sums, groups: Sequence[str], keep: Sequence[int], labels: Sequence[dict], metric: str,
              weights: np.ndarray, ci: float) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """One row per setting (``labels[a]``: its layer, head, method) and kept group, for two metrics: the
    readout score's drop (``<metric>_drop``) and the loss change (``loss_change``), each with the one-sided
    bootstrap p-value of harm (:func:`harm_p`; adjusted later, across a family the caller knows). Also returns
    the point drops ``(A, G)`` and their resamples ``(n, A, G)``."""
    score, loss = (x[0] for x in changes(sums, np.ones((1, len(sums.sentences)))))
    if len(weights) and len(labels):  # no settings (method=gradient): no resamples to take
        s_samp, l_samp = changes(sums, weights)
        (lo, hi), (llo, lhi) = _interval(s_samp, ci), _interval(l_samp, ci)
        p, lp = harm_p(s_samp), harm_p(l_samp)
    else:
        s_samp = np.zeros((0,) + score.shape)
        lo = hi = llo = lhi = p = lp = np.full_like(score, np.nan)
    n = sums.n.sum(0)
    rows = []
    for a, lab in enumerate(labels):
        for g in keep:
            rows.append({**lab, "relation": groups[g], "metric": f"{metric}_drop", "n": int(n[g]),
                         "score": score[a, g], "ci_low": lo[a, g], "ci_high": hi[a, g], "p": p[a, g]})
            rows.append({**lab, "relation": groups[g], "metric": "loss_change", "n": int(n[g]),
                         "score": loss[a, g], "ci_low": llo[a, g], "ci_high": lhi[a, g], "p": lp[a, g]})
    return pd.DataFrame(rows), score, s_samp


def adjust_drops(table: pd.DataFrame, multiplicity: Multiplicity) -> pd.Series:
    """``p_adjusted`` of an importance table: ``p`` adjusted across the heads (method ablation) or the layers
    (layer_in) of one relation and metric, each such set a family; NaN where ``p`` is (gradient rows)."""
    return table.groupby(["method", "relation", "metric"], sort=False)["p"].transform(
        lambda p: pd.Series(adjust(p.to_numpy(float), multiplicity), index=p.index))


def halves(sentences: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A seeded split of the evaluation sentences (``sentences (S,)``, corpus indices in column order) into
    the half a head is chosen on and the half it is scored on: two ``(S,)`` boolean masks, the selection half
    of :func:`probing.stats.heldout.halves` over the sentences in corpus order choosing."""
    choose = np.isin(sentences, np.sort(sentences)[split_halves(len(sentences), seed)[0]])
    return choose, ~choose


def scoring_weights(score: np.ndarray, sentences: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """``(n, S)`` bootstrap counts over the scoring half only (:func:`resample_counts` over its sentences in
    corpus order; 0 for the choosing half)."""
    cols = np.flatnonzero(score)[np.argsort(sentences[score], kind="stable")]
    w = np.zeros((n_resamples, len(sentences)))
    w[:, cols] = resample_counts(len(cols), n_resamples, seed)
    return w


def heldout_rows(sums: Sums, groups: Sequence[str], keep: Sequence[int], n_heads: int, split: tuple,
                 weights: np.ndarray, ci: float, passing: Mapping[str, tuple[int, int]]) -> pd.DataFrame:
    """Per kept group, the head whose single ablation costs most on the choosing half (``split``: the masks of
    :func:`halves`; ``sums``: the single-head settings only, flat ``layer · H + head``; ties: the lowest), its
    drop there (``chosen_drop``), and its drop on the scoring half with the interval of ``weights`` (resamples of
    the scoring half, :func:`scoring_weights`); ``passing[group]``: heads tested and heads whose drop passes the
    adjusted test on all sentences."""
    choose, score = split
    chosen = changes(sums, choose[None].astype(float))[0][0]  # (A, G)
    point = changes(sums, score[None].astype(float))[0][0]
    samp = changes(sums, weights)[0] if len(weights) else np.zeros((0,) + point.shape)
    lo, hi = _interval(samp, ci) if len(weights) else (np.full_like(point, np.nan),) * 2
    n = (score[:, None] * sums.n).sum(0)
    rows = []
    for g in keep:
        if np.isnan(chosen[:, g]).all():
            continue
        a = int(np.nanargmax(chosen[:, g]))
        tested, passed = passing.get(groups[g], (0, 0))
        rows.append({"relation": groups[g], "layer": a // n_heads, "head": a % n_heads,
                     "chosen_drop": chosen[a, g], "n": int(n[g]), "score": point[a, g], "ci_low": lo[a, g],
                     "ci_high": hi[a, g], "heads_tested": tested, "heads_passing": passed})
    return pd.DataFrame(rows, columns=["relation", "layer", "head", "chosen_drop", "n", "score", "ci_low",
                                       "ci_high", "heads_tested", "heads_passing"])


def pruning_rows(names: Sequence[tuple[str, Optional[int]]], counts: Sequence[int], sums: Sums,
                 groups: Sequence[str], keep: Sequence[int], weights: np.ndarray, ci: float,
                 random: str, mean_name: str) -> pd.DataFrame:
    """The pruning curves as rows: ``sums`` holds ``len(names) · len(counts)`` settings, order after order
    (``names[o]``: its name and seed), point after point. Each point's score has a bootstrap interval over the
    evaluation sentences; the orders named ``random`` also give their mean curve (``mean_name``), each resample's
    mean over the orders on the same sentences (jointly resampled). Beside every point: the unablated score (the
    curve's first point), the all-heads-ablated ``floor`` (its last, every order's alike) and
    ``share_to_floor``, how much of the room between them the point has lost, ``(unablated − score) /
    (unablated − floor)``."""
    o, c = len(names), len(counts)
    n = sums.n.sum(0)
    point = _ratio(sums.hits.sum(1), n).reshape(o, c, -1)  # (O, C, G)
    samp = (_ratio(_weighted(weights, sums.hits), (weights @ sums.n)[:, None]).reshape(len(weights), o, c, -1)
            if len(weights) else np.zeros((0, o, c, point.shape[-1])))
    order = [name for name, _ in names]
    seed = [s for _, s in names]
    rnd = [i for i, name in enumerate(order) if name == random]
    if rnd:
        point = np.concatenate([point, point[rnd].mean(0, keepdims=True)])
        samp = np.concatenate([samp, samp[:, rnd].mean(1, keepdims=True)], 1)
        order, seed = order + [mean_name], seed + [None]
    lo, hi = _interval(samp, ci) if len(weights) else (np.full_like(point, np.nan),) * 2
    clean, floor = point[:, :1], point[:, -1:]  # (O', 1, G)
    share = _ratio(clean - point, np.broadcast_to(clean - floor, point.shape))
    kept = np.asarray(keep)
    oi, ci_, gi = (x.ravel() for x in np.meshgrid(np.arange(len(order)), np.arange(c), kept, indexing="ij"))
    total = counts[-1]
    return pd.DataFrame({
        "order": np.asarray(order, dtype=object)[oi], "seed": pd.array(np.asarray(seed, dtype=object)[oi],
                                                                       dtype="Int64"),
        "fraction_removed": np.round(np.asarray(counts)[ci_] / total, 4), "relation": np.asarray(groups)[gi],
        "heads_removed": np.asarray(counts)[ci_], "score": point[oi, ci_, gi], "ci_low": lo[oi, ci_, gi],
        "ci_high": hi[oi, ci_, gi], "unablated": clean[oi, 0, gi], "floor": floor[oi, 0, gi],
        "share_to_floor": share[oi, ci_, gi]})


def normalised_gradient(grads: np.ndarray, w: Optional[np.ndarray] = None) -> np.ndarray:
    """``(S, L, H)`` per-sentence |∂L/∂ξ| -> ``(L, H)`` ``E|∂L/∂ξ|`` divided by its L2 norm within each layer
    (Michel et al. 2019)."""
    w = np.ones(grads.shape[0]) if w is None else w
    imp = np.einsum("s,slh->lh", w, grads) / w.sum()
    norm = np.linalg.norm(imp, axis=1, keepdims=True)
    return _ratio(imp, norm)


def gradient_rows(grads: np.ndarray, weights: np.ndarray, ci: float) -> pd.DataFrame:
    """One row per head: its normalised gradient importance with a bootstrap interval."""
    point = normalised_gradient(grads)
    if len(weights):
        lo, hi = _interval(np.stack([normalised_gradient(grads, w) for w in weights]), ci)
    else:
        lo = hi = np.full_like(point, np.nan)
    n_layers, n_heads = point.shape
    return pd.DataFrame([{"layer": layer, "head": h, "method": "gradient", "relation": ALL,
                          "metric": "gradient", "n": int(grads.shape[0]), "score": point[layer, h],
                          "ci_low": lo[layer, h], "ci_high": hi[layer, h]}
                         for layer in range(n_layers) for h in range(n_heads)])


def _spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman correlation of each row of ``x`` (``(K,)`` or ``(n, K)``, paired with ``y``'s rows) with each
    row of ``y (n, K)`` (average ranks for ties; NaN where a row has a NaN or no spread)."""
    rx = rankdata(np.atleast_2d(x), axis=-1)
    ry = rankdata(y, axis=-1)
    rx, ry = rx - rx.mean(-1, keepdims=True), ry - ry.mean(-1, keepdims=True)
    return _ratio((ry * rx).sum(-1), np.sqrt((rx ** 2).sum(-1) * (ry ** 2).sum(-1)))


def link_rows(accuracy: pd.DataFrame, importance: np.ndarray, samples: np.ndarray, groups: Sequence[str],
              keep: Sequence[int], n_layers: int, n_heads: int, ci: float,
              accuracy_samples: Optional[Mapping[tuple[str, str], np.ndarray]] = None) -> pd.DataFrame:
    """For each kept relation and direction of ``accuracy`` (a heads table: relation, direction, layer, head,
    accuracy): Spearman over heads between attention accuracy and single-head ablation importance
    ``importance (L·H, G)``, with the interval of its bootstrap ``samples (n, L·H, G)``.

    ``accuracy_samples[(relation, direction)] (n, L·H)``: attention accuracy in the same ``n`` resamples of
    the same sentences, paired row by row with ``samples`` (the interval then covers both sides:
    ``ci_resampled`` = ``importance+attention``); without it attention accuracy is held at its full-sample
    value (``importance``). ``p``: the one-sided bootstrap p-value of rho > 0 from the same resamples
    (:func:`probing.stats.multiplicity.bootstrap_p`), to be adjusted across the table's relations;
    ``p_two_sided``: of rho != 0 (:func:`probing.stats.multiplicity.bootstrap_p_two_sided`)."""
    rows = []
    for (rel, direction), t in accuracy.groupby(["relation", "direction"], sort=True):
        if rel not in groups or groups.index(rel) not in keep:
            continue
        g = groups.index(rel)
        acc = np.full(n_layers * n_heads, np.nan)
        acc[t["layer"].to_numpy(int) * n_heads + t["head"].to_numpy(int)] = t["accuracy"].to_numpy(float)
        if np.isnan(acc).any():
            continue
        rho = float(_spearman_rows(acc, importance[None, :, g])[0])
        paired = None if accuracy_samples is None else accuracy_samples.get((rel, str(direction)))
        resampled = _spearman_rows(acc if paired is None else paired, samples[:, :, g]) if len(samples) else None
        lo, hi = _interval(resampled, ci) if resampled is not None else (np.nan, np.nan)
        rows.append({"relation": rel, "direction": str(direction), "n_heads": n_layers * n_heads, "rho": rho,
                     "ci_low": float(lo), "ci_high": float(hi),
                     "ci_resampled": "importance" if paired is None else "importance+attention",
                     "p": bootstrap_p(resampled) if resampled is not None else np.nan,
                     "p_two_sided": bootstrap_p_two_sided(resampled) if resampled is not None else np.nan})
    return pd.DataFrame(rows, columns=["relation", "direction", "n_heads", "rho", "ci_low", "ci_high",
                                       "ci_resampled", "p", "p_two_sided"])
