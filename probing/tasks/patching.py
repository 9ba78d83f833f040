"""``task=patching``: what heads cause. On minimal pairs (the grammar's agreement pairs, or the user's
``patching.pairs_file``) each head's output is copied from the corrupt side into the clean side, at every piece and
at named words (:mod:`probing.patching.effects`); so is each layer's input (the residual stream). The readout is the
model's own logit difference of the good and the bad word (a decoder with its causal-LM head) or frozen probes
reading the cue's number at the masked target, trained on held-out pairs with several seeds (an encoder).

Writes ``patching`` (every head and position: normalised effect with its bootstrap interval over pairs, the
two-sided p-value adjusted across heads, the attribution estimate), ``patching_residual``, ``patching_top`` (the
top heads chosen on one half of the pairs and scored on the other) and ``patching_atlas`` (each head's attention
accuracy on the pairs' own arcs beside its effect, and its quadrant), figures, and in ``metrics.json`` the clean
run's accuracy on the pairs first (an effect means little where the clean run is at chance).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Optional, Sequence

import numpy as np
import pandas as pd
import torch

from probing import schema
from probing.config import LmHead, PatchingConfig, PatchPosition, PatchReadout, RunConfig
from probing.corpus.minimal_pairs import MinimalPair, generate_pairs
from probing.corpus.pair_files import read_pairs
from probing.encoder import Encoder, architectures, load_encoder, model_label
from probing.errors import ProbingError
from probing.mixing.families import family_of
from probing.patching.atlas import atlas_table, offset_baseline, pointing, quadrant_counts
from probing.patching.batches import ALL, make_pair_batches, prepare
from probing.patching.effects import PairMetrics, patch_metrics
from probing.patching.paths import direct_metrics
from probing.patching.readouts import LogitDiff, ProbeDiff, fit_probe, side_vectors
from probing.patching.statistics import agreement, normalised, summary
from probing.stats.bootstrap import resample_counts
from probing.stats.heldout import halves
from probing.stats.multiplicity import resamples_needed
from probing.tasks.base import RunOutput, StageTimer, TaskResult

log = logging.getLogger(__name__)


def _pairs(pc: PatchingConfig, seed: int) -> tuple[list[MinimalPair], list, str]:
    """The scored pairs, those a pair file skipped, and the name of their source."""
    if pc.pairs_file:
        pairs, skipped = read_pairs(pc.pairs_file, pc.strict)
        return pairs, skipped, str(pc.pairs_file)
    if pc.n_pairs < 4:
        raise ProbingError(f"patching.n_pairs={pc.n_pairs}: at least 4 pairs are needed (two halves of two)")
    return generate_pairs(pc.kinds, pc.n_pairs, seed), [], "grammar:" + ",".join(str(k) for k in pc.kinds)


def _readout_kind(pc: PatchingConfig, cfg: RunConfig) -> PatchReadout:
    has_head = not cfg.model.random_init and any("CausalLM" in a or "LMHeadModel" in a
                                                 for a in architectures(cfg.model))
    kind = PatchReadout(pc.readout)
    if kind is PatchReadout.auto:
        return PatchReadout.logits if has_head else PatchReadout.probe
    if kind is PatchReadout.logits and not has_head:
        raise ProbingError(f"patching.readout=logits: model {cfg.model.name} has no trained causal-LM head; use "
                           "patching.readout=probe (or auto)")
    return kind


def _probe_readout(encoder: Encoder, pc: PatchingConfig, seed: int, scored: Sequence[MinimalPair], causal: bool
                   ) -> tuple[ProbeDiff, dict]:
    """Probes trained on held-out grammar pairs (both sides; a pair whose clean sentence is scored is left out),
    one a seed, and their accuracy on their own training vectors."""
    if any(not p.label for p in scored):
        raise ProbingError("patching.readout=probe needs each pair's label (the clean side's number: singular or "
                           "plural); the pair file has pairs without one")
    exclude = {p.clean.words for p in scored}
    weights, biases, signs, train_acc = [], [], [], []
    for s in range(pc.readout_seeds):
        drawn = generate_pairs(pc.kinds, pc.probe_pairs + len(exclude), seed + 1 + s)
        train = [p for p in drawn if p.clean.words not in exclude][:pc.probe_pairs]
        sides = prepare(encoder, train, causal)
        ok = [i for i, x in enumerate(sides) if not isinstance(x, str)]
        batches = make_pair_batches(encoder, sides, ok, pc.batch_size, pc.max_batch_tokens, causal, [ALL])
        x, idx, side = side_vectors(encoder.model, batches)
        labels = sorted({p.label for p in train})
        other = {labels[0]: labels[-1], labels[-1]: labels[0]}
        y = [train[i].label if sd == 0 else other[train[i].label] for i, sd in zip(idx, side)]
        w, b, positive = fit_probe(x, y, pc.C, pc.max_iter, seed + s)
        weights.append(w)
        biases.append(b)
        signs.append([1.0 if p.label == positive else -1.0 for p in scored])
        train_acc.append(float(np.mean(((x @ w + b) > 0) == (np.asarray(y) == positive))))
    readout = ProbeDiff(torch.tensor(np.stack(weights)), torch.tensor(biases, dtype=torch.float32),
                        torch.tensor(signs, dtype=torch.float32))
    return readout, {"probe_train_pairs": pc.probe_pairs, "probe_train_accuracy": float(np.mean(train_acc))}


def _position_rows(m: PairMetrics, has: dict, counts_for, pc: PatchingConfig, keys: dict) -> tuple[pd.DataFrame,
                                                                                                    pd.DataFrame]:
    """The ``patching`` and ``patching_residual`` rows: per position, over the pairs that have that word."""
    heads_rows, resid_rows = [], []
    n_layers, n_heads = m.heads[ALL].shape[:2]
    for name, hits in has.items():
        cols = np.flatnonzero(hits)
        if len(cols) < 2:
            continue
        counts = counts_for(len(cols))
        clean, corrupt = m.clean[:, cols], m.corrupt[:, cols]
        eff = normalised(m.heads[name][..., cols], clean, corrupt, counts)
        row = summary(eff, pc.ci, pc.multiplicity)
        frame = pd.DataFrame({**keys, "position": name, "layer": np.repeat(np.arange(n_layers), n_heads),
                              "head": np.tile(np.arange(n_heads), n_layers), "n_pairs": len(cols), **row,
                              "effect_seed_sd": eff.seed_sd.ravel()})
        if m.attribution:
            frame["attribution"] = normalised(m.attribution[name][..., cols] + clean, clean, corrupt,
                                              counts[:0]).point.ravel()
        heads_rows.append(frame)
        if m.residual:
            r = normalised(m.residual[name][..., cols], clean, corrupt, counts)
            resid_rows.append(pd.DataFrame({**keys, "position": name, "layer": np.arange(n_layers),
                                            "n_pairs": len(cols), **summary(r, pc.ci, pc.multiplicity)}))
    cat = lambda xs: pd.concat(xs, ignore_index=True) if xs else pd.DataFrame()  # noqa: E731
    return cat(heads_rows), cat(resid_rows)


def _power(pc: PatchingConfig, tests: int) -> dict:
    """Whether a head's test, adjusted across the ``tests`` heads of a position, can pass alone: the smallest
    bootstrap p-value, 1/(1+B), against alpha/tests (a warning when it cannot; several heads tied at that p-value
    may still pass together under BH)."""
    needed = resamples_needed(tests, pc.alpha)
    if pc.bootstrap < needed:
        log.warning("patching.bootstrap=%d: a head alone cannot pass a test adjusted across %d heads at alpha=%s "
                    "(only several tied at the smallest p-value can); %d or more resamples are needed", pc.bootstrap,
                    tests, pc.alpha, needed)
    return {"resamples": pc.bootstrap, "tests": tests, "resamples_needed": needed, "enough": pc.bootstrap >= needed}


def _pair_rows(m: PairMetrics, pairs: Sequence[MinimalPair], has: dict, keys: dict) -> pd.DataFrame:
    """Every pair's metric, clean, corrupt and with each head patched at each position it has, long (one row a
    pair, readout, position, layer and head; the clean and corrupt metrics repeated), for analyses by kind."""
    n_layers, n_heads, n_readouts, n = m.heads[ALL].shape
    frames = []
    for name, hits in has.items():
        cols = np.flatnonzero(hits)
        v = m.heads[name][..., cols]  # (L, H, S, n)
        idx = np.indices(v.shape).reshape(4, -1)
        frames.append(pd.DataFrame({"position": name, "pair": [pairs[i].id for i in cols[idx[3]]],
                                    "kind": [pairs[i].kind for i in cols[idx[3]]], "readout_seed": idx[2],
                                    "layer": idx[0], "head": idx[1], "patched": v.ravel(),
                                    "clean": m.clean[idx[2], cols[idx[3]]], "corrupt": m.corrupt[idx[2], cols[idx[3]]]}))
    return pd.DataFrame({**keys, **{c: v for c, v in pd.concat(frames, ignore_index=True).items()}})


def _top_heads(m: PairMetrics, pc: PatchingConfig, seed: int, keys: dict) -> pd.DataFrame:
    """The ``top_k`` heads by effect (position ``all``) on one half of the pairs, scored on the other half (their
    p-values adjusted across the k)."""
    choose, score = halves(m.clean.shape[-1], seed)
    chosen = normalised(m.heads[ALL][..., choose], m.clean[:, choose], m.corrupt[:, choose],
                        np.zeros((0, len(choose)))).point.ravel()
    top = np.argsort(-chosen, kind="stable")[: pc.top_k]
    n_heads = m.heads[ALL].shape[1]
    flat = m.heads[ALL].reshape(-1, *m.heads[ALL].shape[2:])[top][..., score]
    eff = normalised(flat, m.clean[:, score], m.corrupt[:, score], resample_counts(len(score), pc.bootstrap, seed))
    return pd.DataFrame({**keys, "rank": np.arange(1, len(top) + 1), "layer": top // n_heads, "head": top % n_heads,
                         "chosen_effect": chosen[top], "n_pairs": len(score),
                         **summary(eff, pc.ci, pc.multiplicity)}), choose, score


def _direct_paths(encoder: Encoder, batches: Sequence, readout, m: PairMetrics, top: pd.DataFrame,
                  score: np.ndarray, pc: PatchingConfig, seed: int) -> dict:
    """The top heads' direct effects on the scored half, in place in ``top`` (and their indirect rest)."""
    heads = [(int(r.layer), int(r.head)) for r in top.itertuples()]
    try:
        direct = direct_metrics(encoder.model, batches, readout, heads, ALL)
    except ValueError as e:  # a shared layer
        top["direct_effect"] = top["direct_ci_low"] = top["direct_ci_high"] = top["indirect_effect"] = np.nan
        return {"direct_paths": str(e)}
    eff = normalised(direct[..., score], m.clean[:, score], m.corrupt[:, score],
                     resample_counts(len(score), pc.bootstrap, seed))
    row = summary(eff, pc.ci, pc.multiplicity)
    top["direct_effect"], top["direct_ci_low"], top["direct_ci_high"] = row["effect"], row["effect_ci_low"], \
        row["effect_ci_high"]
    top["indirect_effect"] = top["effect"] - top["direct_effect"]
    return {}


def arc_relation(pair: MinimalPair) -> str:
    """The relation of the arc from target to cue (the cue's label where the target is its head: nsubj for
    agreement, det for determiners); ``no arc`` where they are not joined (a reflexive and its antecedent)."""
    cue = pair.roles["cue"]
    if pair.clean.heads is None:
        return "no tree"
    return pair.clean.relations[cue] if pair.clean.heads[cue] == pair.target else "no arc"


def _atlas(encoder: Encoder, pairs: Sequence[MinimalPair], m: PairMetrics, causal: bool, pc: PatchingConfig,
           seed: int, choose: np.ndarray, score: np.ndarray, keys: dict) -> tuple[Optional[pd.DataFrame], dict]:
    """Per relation of the pairs' target -> cue arcs, attention accuracy on them beside the effect, on the scored
    half (relations with fewer than 4 scored pairs, or 2 choosing ones, are not drawn)."""
    if any("cue" not in p.roles for p in pairs):
        return None, {"atlas": "not drawn: some pairs name no cue word"}
    points = pointing(encoder, pairs, causal, pc.batch_size)
    relation = np.array([arc_relation(p) for p in pairs])
    tables, per = [], {}
    for rel in sorted(set(relation[score]), key=lambda r: -np.sum(relation[score] == r)):
        sc, ch = score[relation[score] == rel], choose[relation[choose] == rel]
        if len(sc) < 4 or len(ch) < 2:
            continue
        offset, hit = offset_baseline(pairs, ch, sc, causal)
        counts = resample_counts(len(sc), pc.bootstrap, seed)
        eff = normalised(m.heads[ALL][..., sc], m.clean[:, sc], m.corrupt[:, sc], counts)
        n_layers, n_heads = eff.point.shape
        rows = pd.DataFrame({"layer": np.repeat(np.arange(n_layers), n_heads),
                             "head": np.tile(np.arange(n_heads), n_layers), **summary(eff, pc.ci, pc.multiplicity)})
        table, corr = atlas_table(points, hit, rows, eff.samples.reshape(len(eff.samples), -1), sc, counts, pc.ci,
                                  pc.alpha, pc.min_effect, pc.multiplicity)
        tables.append(pd.DataFrame({**keys, "relation": rel, "n_pairs": len(sc), **{c: table[c] for c in table}}))
        per[rel] = {"spearman": corr["rho"], "spearman_ci_low": corr["ci_low"], "spearman_ci_high": corr["ci_high"],
                    "offset": offset, "offset_baseline": float(hit[sc].mean()), "n_pairs": len(sc),
                    "quadrants": quadrant_counts(table)}
    if not tables:
        return None, {"atlas": "not drawn: no relation has 4 scored pairs"}
    first = next(iter(per))
    info = {"atlas_relation": first, **{f"atlas_{k}": v for k, v in per[first].items() if k != "n_pairs"},
            "atlas": per}
    return pd.concat(tables, ignore_index=True), info


def _usable(encoder: Encoder, pairs: list[MinimalPair], causal: bool) -> tuple[list, list, Counter]:
    """The pairs the model can take, their tokenised sides, and why the others were left out."""
    sides = prepare(encoder, pairs, causal)
    reasons = Counter(x for x in sides if isinstance(x, str))
    kept = [i for i, x in enumerate(sides) if not isinstance(x, str)]
    if len(kept) < 4:
        raise ProbingError(f"patching: {len(kept)} of {len(pairs)} pairs usable on {encoder.name} ({dict(reasons)})")
    return [pairs[i] for i in kept], [sides[i] for i in kept], reasons


def _write_figures(out: RunOutput, heads: pd.DataFrame, residual: pd.DataFrame, atlas: Optional[pd.DataFrame],
                   metrics: dict) -> None:
    from probing.figures import patching as figures

    fig_dir = out.dir / "figures"
    title = f"{metrics['model']} · {metrics['n_pairs']} pairs · {metrics['readout']}"
    for path in figures.effect_heatmaps(heads, title, fig_dir):
        out.figure(path)
    if len(residual):
        out.figure(figures.residual_heatmap(residual, title, fig_dir / "patching_residual.png"))
    if atlas is not None:
        for path in figures.atlas_scatters(atlas, metrics.get("atlas", {}), title, fig_dir):
            out.figure(path)


def from_config(cfg: RunConfig, out: RunOutput) -> TaskResult:
    pc: PatchingConfig = cfg.patching
    timer = StageTimer()
    pairs, file_skips, source = _pairs(pc, cfg.seed)
    kind = _readout_kind(pc, cfg)
    with timer("load", f"loading {cfg.model.name}"):
        encoder = load_encoder(cfg.model, LmHead.causal if kind is PatchReadout.logits else None)
    causal = family_of(encoder.model)[0].causal
    pairs, sides, reasons = _usable(encoder, pairs, causal)
    names = list(dict.fromkeys([ALL] + [str(PatchPosition(p)) for p in pc.positions]))
    batches = make_pair_batches(encoder, sides, range(len(pairs)), pc.batch_size, pc.max_batch_tokens, causal, names)
    metrics: dict = {"model": model_label(cfg.model), "pairs": source, "readout": str(kind), "n_pairs": len(pairs),
                     "n_pairs_skipped": len(file_skips) + sum(reasons.values()),
                     "skipped_reasons": {**dict(reasons), **({"pair file": len(file_skips)} if file_skips else {})}}
    if kind is PatchReadout.logits:
        readout = LogitDiff(encoder.lm_head)
    else:
        with timer("readout", f"training {pc.readout_seeds} probe readouts"):
            readout, info = _probe_readout(encoder, pc, cfg.seed, pairs, causal)
        metrics.update(info, readout_seeds=pc.readout_seeds)
    with timer("patching", f"patching {encoder.num_layers * encoder.num_heads} heads at {len(names)} positions "
                           f"on {len(pairs)} pairs"):
        m = patch_metrics(encoder.model, batches, readout, names, pc.replicas, pc.residual, pc.attribution)
    pairs, sides = [pairs[i] for i in m.pairs], [sides[i] for i in m.pairs]  # the columns follow the batches
    has = {n: np.array([n == ALL or n in s.words for s in sides]) for n in names}
    metrics.update(clean_accuracy=float((m.clean > 0).mean()), corrupt_accuracy=float((m.corrupt < 0).mean()),
                   clean_logit_difference=float(m.clean.mean()), corrupt_logit_difference=float(m.corrupt.mean()))
    keys = {"model": metrics["model"], "pairs": source, "readout": str(kind)}
    heads, residual = _position_rows(m, has, lambda n: resample_counts(n, pc.bootstrap, cfg.seed), pc, keys)
    out.table(schema.PATCHING.name, heads)
    metrics["power"] = _power(pc, encoder.num_layers * encoder.num_heads)
    out.table(schema.PATCHING_PAIRS.name, _pair_rows(m, pairs, has, keys))
    if len(residual):
        out.table(schema.PATCHING_RESIDUAL.name, residual)
    top, choose, score = _top_heads(m, pc, cfg.seed, keys)
    with timer("paths", f"the direct paths of the top {len(top)} heads"):
        metrics.update(_direct_paths(encoder, batches, readout, m, top, score, pc, cfg.seed))
    out.table(schema.PATCHING_TOP.name, top)
    metrics["top_heads"] = top[["layer", "head", "chosen_effect", "effect", "effect_ci_low", "effect_ci_high",
                                "direct_effect"]].to_dict("records")
    if m.attribution:
        agree = agreement(m.heads[ALL], m.attribution[ALL], m.clean, m.corrupt, pc.bootstrap, pc.ci, cfg.seed)
        metrics.update(attribution_spearman=agree["rho"], attribution_spearman_ci_low=agree["ci_low"],
                       attribution_spearman_ci_high=agree["ci_high"])
    with timer("atlas", "attention on the pairs' arcs"):
        atlas, info = _atlas(encoder, pairs, m, causal, pc, cfg.seed, choose, score, keys)
    metrics.update(info)
    if atlas is not None:
        out.table(schema.PATCHING_ATLAS.name, atlas)
    if pc.figures:
        _write_figures(out, heads, residual, atlas, metrics)
    metrics.update(timer.metrics())
    return out.result(metrics, console=_console(metrics, top))


def _console(metrics: dict, top: pd.DataFrame) -> str:
    lines = [f"{metrics['n_pairs']} pairs ({metrics['n_pairs_skipped']} skipped), readout {metrics['readout']}: "
             f"clean run right on {metrics['clean_accuracy']:.3f}, corrupt run on its own side "
             f"{metrics['corrupt_accuracy']:.3f}",
             "top heads (chosen on one half of the pairs, effect on the other; 0 = clean, 1 = corrupt):"]
    for r in top.itertuples():
        lines.append(f"  {r.layer}-{r.head}  {r.effect:+.3f} [{r.effect_ci_low:+.3f}, {r.effect_ci_high:+.3f}]"
                     f"  p_adj {r.p_adjusted:.3g}  direct {r.direct_effect:+.3f}")
    if "attribution_spearman" in metrics:
        lines.append(f"attribution vs activation patching: Spearman {metrics['attribution_spearman']:.3f} "
                     f"[{metrics['attribution_spearman_ci_low']:.3f}, {metrics['attribution_spearman_ci_high']:.3f}]")
    if "atlas_quadrants" in metrics:
        q = metrics["atlas_quadrants"]
        lines.append(f"atlas ({metrics['atlas_relation']}): attention accuracy on target->cue vs effect, Spearman "
                     f"{metrics['atlas_spearman']:.2f} "
                     f"[{metrics['atlas_spearman_ci_low']:.2f}, {metrics['atlas_spearman_ci_high']:.2f}]; "
                     + ", ".join(f"{k} {v}" for k, v in q.items()))
    return "\n".join(lines)
