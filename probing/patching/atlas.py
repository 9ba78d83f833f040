"""The atlas: where each head looks on the pairs' own arcs beside what patching it does.

A head points on a pair when, in the clean sentence (whole, with its good word), its largest word-level attention
from the target goes to the cue (the subject a verb agrees with, the determiner of a noun, a reflexive's
antecedent). A causal model predicts the target from the word before it, so there its row is that word's, over the
words it can see: where the model reads the target, does the head look at the cue? The direction is fixed before looking, so
nothing is chosen on the scored pairs but the positional baseline: the offset from target to cue most common on the
choosing half, scored on the other half. A head *points* when its accuracy beats that baseline (the lower end of
the interval of the difference above 0) and *matters* when its patching effect exceeds ``patching.min_effect`` (the
one-sided bootstrap test, adjusted across heads): with a few hundred pairs a head can move the readout by a
thousandth of the way to the corrupt run and pass a test of "not 0".
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from probing.alignment import pool_attention
from probing.config import Multiplicity, Pooling
from probing.corpus.minimal_pairs import MinimalPair
from probing.encoder import Encoder, length_batches
from probing.patching.statistics import rank_correlation
from probing.stats.bootstrap import percentile_interval
from probing.stats.multiplicity import adjust

QUADRANTS = {(True, True): "points and matters", (True, False): "points, does not matter",
             (False, True): "matters without pointing", (False, False): "neither"}


def pointing(encoder: Encoder, pairs: Sequence[MinimalPair], causal: bool, batch_size: int = 32
             ) -> np.ndarray:
    """``(L, H, N)``: whether each head's largest attention from the target word (a causal model: the word before
    it) goes to the cue word."""
    toks = encoder.tokenize([p.clean.words for p in pairs])
    bad = [(p.id, t) for p, t in zip(pairs, toks) if isinstance(t, str)]
    if bad:
        raise ValueError(f"pair {bad[0][0]}: {bad[0][1]}")
    out = np.zeros((encoder.num_layers, encoder.num_heads, len(pairs)), dtype=bool)
    order = sorted(range(len(pairs)), key=lambda i: len(toks[i].input_ids))
    for group in length_batches([len(toks[i].input_ids) for i in order], batch_size, 8192):
        idx = [order[j] for j in group]
        attn, pos, m = encoder.attention([toks[i] for i in idx])
        words = pool_attention(attn, pos, m, Pooling.mean_sum)  # (B, L, H, M, M)
        for row, i in enumerate(idx):
            p, start = pairs[i], toks[i].prefix
            n = len(p.clean)
            read = p.target - 1 if causal else p.target  # where the model reads the target from
            scores = words[row, :, :, start + read, start:start + n].clone()  # (L, H, n) over the sentence's words
            if causal:
                scores[..., read + 1:] = -np.inf
            out[:, :, i] = (scores.argmax(-1) == p.roles["cue"]).cpu().numpy()
    return out


def offset_baseline(pairs: Sequence[MinimalPair], choose: np.ndarray, score: np.ndarray, causal: bool = False
                    ) -> tuple[int, np.ndarray]:
    """The offset from the read word (the target; a causal model: the word before it) to the cue most common on the
    ``choose`` pairs (ties: the nearest), and ``(N,)`` whether each pair has it."""
    offsets = np.array([p.roles["cue"] - p.target + int(causal) for p in pairs])
    values, counts = np.unique(offsets[choose], return_counts=True)
    best = values[np.lexsort((np.abs(values), -counts))[0]]
    return int(best), offsets == best


def atlas_table(points: np.ndarray, baseline_hit: np.ndarray, effects: pd.DataFrame, effect_samples: np.ndarray,
                scored: np.ndarray, counts: np.ndarray, ci: float, alpha: float, min_effect: float,
                multiplicity: Multiplicity) -> tuple[pd.DataFrame, dict]:
    """One row a head on the ``scored`` pairs: attention accuracy with its interval, the baseline, whether it
    points, the patching effect (``effects``: one row a head, layer-major, on the same pairs, with
    ``p_adjusted``), whether it matters and its quadrant; and Spearman's rho over heads of accuracy with effect,
    with a bootstrap interval over the scored pairs (``counts (B, N)`` and ``effect_samples (B, L·H)`` drawn
    from the same resamples)."""
    n_layers, n_heads = points.shape[:2]
    hits = points[:, :, scored].reshape(n_layers * n_heads, -1).astype(float)  # (LH, N)
    base = baseline_hit[scored].astype(float)
    acc = hits.mean(1)
    rows = pd.DataFrame({"layer": np.repeat(np.arange(n_layers), n_heads), "head": np.tile(np.arange(n_heads), n_layers),
                         "attention_accuracy": acc, "offset_baseline": base.mean()})
    corr = {"rho": float(rank_correlation(acc, effects["effect"].to_numpy())), "ci_low": float("nan"),
            "ci_high": float("nan")}
    if len(counts):
        w = counts.astype(float) / len(scored)
        acc_s, base_s = w @ hits.T, w @ base  # (B, LH), (B,)
        lo, hi = percentile_interval(acc_s, ci)
        dlo, _ = percentile_interval(acc_s - base_s[:, None], ci)
        r = rank_correlation(acc_s, effect_samples)
        clo, chi = percentile_interval(r[:, None], ci)
        corr.update(ci_low=float(clo[0]), ci_high=float(chi[0]))
    else:
        lo = hi = dlo = np.full(len(acc), np.nan)
    rows["attention_ci_low"], rows["attention_ci_high"] = lo, hi
    rows["points"] = dlo > 0
    for col in ("effect", "effect_ci_low", "effect_ci_high", "p_adjusted"):
        rows[col] = effects[col].to_numpy()
    # matters: the one-sided bootstrap test of effect > min_effect, adjusted across heads
    if len(counts):
        ok = np.isfinite(effect_samples)
        p = (1 + ((effect_samples <= min_effect) & ok).sum(0)) / (1 + ok.sum(0))
    else:
        p = np.full(len(acc), np.nan)
    rows["p_matters"] = adjust(p, multiplicity)
    rows["matters"] = rows["p_matters"] < alpha
    rows["quadrant"] = [QUADRANTS[(bool(a), bool(b))] for a, b in zip(rows["points"], rows["matters"])]
    return rows, corr


def quadrant_counts(atlas: pd.DataFrame) -> dict:
    """Heads per quadrant (every quadrant named, zeros included)."""
    counts = atlas["quadrant"].value_counts()
    return {q: int(counts.get(q, 0)) for q in QUADRANTS.values()}
