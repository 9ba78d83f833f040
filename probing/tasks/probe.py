"""``task=probe``: load the train and eval splits, make sure their stores of ``probe.measure`` exist, probe.

A job first looks in its own run dir: when ``metrics.json`` there was written for the same config key
(model, data, extraction, probe settings, seed and the probe code's format version), it returns those
numbers without recomputing, so re-running a sweep into the same ``hydra.sweep.dir`` only computes the jobs
that are missing or failed (``probe.skip_complete=false`` turns this off).
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
import pandas as pd

from probing import schema
from probing.config import (
    DataConfig,
    DataKind,
    ExtractConfig,
    Features,
    Measure,
    ModelConfig,
    ProbeConfig,
    ProbeKind,
    Representation,
    RunConfig,
    to_plain,
)
from probing.corpus import Corpus
from probing.corpus.cache import load_corpus_cached
from probing.encoder import model_label
from probing.errors import ProbingError
from probing.extract import Stored, ensure_store, stored
from probing.probes.arc.probe import run_arc
from probing.probes.data import ProbeResult, ProbeSplit, subsample_sentences
from probing.probes.edge import run_edge
from probing.probes.features import HeadSelection, select_heads, vector_selection
from probing.probes.relation import run_relation
from probing.probes.structural.metrics import Terms, ratio_of_groups
from probing.probes.structural.run import run_structural
from probing.results import read_metrics
from probing.stats.bootstrap import percentile_interval, resample_counts
from probing.store import AttentionStore, VectorStore
from probing.tasks.base import SINGLE_SPLIT_KINDS, RunOutput, StageTimer, TaskResult, holdout, one_corpus
from probing.tasks.store_summary import describe_part, describe_store, part_metrics, store_use

log = logging.getLogger(__name__)

# Bump when a change to the probe code changes its numbers: older results then no longer count as complete.
PROBE_FORMAT = 9
# Extraction settings that never change the maps read (left out of the config key; ``measures`` only says which
# other stores are built beside ``probe.measure``'s, which is in the key).
_VOLATILE_EXTRACT = ("batch_size", "max_batch_tokens", "progress", "cache_dir", "shard_mb", "verify", "measures",
                     "representations", "trim_mb", "mmap_threshold_mb")


def config_key(model: ModelConfig, data: DataConfig, extract: ExtractConfig, probe: ProbeConfig, seed: int
               ) -> str:
    """A hash of everything that changes a probe's numbers (``model.init_seed`` only with ``random_init``)."""
    ex = {k: v for k, v in to_plain(extract).items() if k not in _VOLATILE_EXTRACT}
    da = {k: v for k, v in to_plain(data).items() if k not in ("split", "index")}
    pr = {k: v for k, v in to_plain(probe).items() if k != "skip_complete"}
    mo = to_plain(model)
    if not mo.get("random_init"):
        mo.pop("init_seed")
    inputs = {"format": PROBE_FORMAT, "model": mo, "data": da, "extract": ex, "probe": pr, "seed": seed}
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()[:16]


def completed(out_dir: Path, key: str) -> Optional[dict]:
    """The metrics of a finished probe run in ``out_dir`` with this config key, else None."""
    metrics = read_metrics(out_dir)
    if metrics.get("task") != "probe" or metrics.get("config_key") != key:
        return None
    return {k: v for k, v in metrics.items() if k not in ("task", "seconds")}


class _Stores:
    """The stores of ``measure`` a probe reads, each built or found once, recorded for ``run_meta.json``."""

    def __init__(self, model: ModelConfig, extract: ExtractConfig, measure: Stored):
        self.model, self.extract, self.measure, self.used = model, extract, stored(measure), []

    def __call__(self, corpus: Corpus) -> AttentionStore | VectorStore:
        report = ensure_store(self.model, corpus, self.extract, self.measure)
        log.info(describe_store(report, corpus))
        self.used.append(store_use(report, corpus))
        return report.store


def load_splits(data: DataConfig, probe: ProbeConfig, extract: ExtractConfig, stores: _Stores
                ) -> tuple[ProbeSplit, ProbeSplit, str]:
    """The train and eval sides, and a note saying how they were made."""
    if one_corpus(data, probe):
        single = DataKind(data.kind) in SINGLE_SPLIT_KINDS
        corpus = load_corpus_cached(data, None if single else probe.train_split, extract.cache_dir)
        store = stores(corpus)
        idx = store.indices
        cut = holdout(len(idx), probe, "probe")
        label = corpus.name if single else f"{corpus.name}-{probe.train_split}"
        note = (f"one corpus ({label}, {len(idx)} sentences with maps): first {cut} sentences train, "
                f"last {len(idx) - cut} eval (probe.eval_fraction={probe.eval_fraction})")
        return (ProbeSplit(f"{label}[0:{cut}]", corpus, store, idx[:cut]),
                ProbeSplit(f"{label}[{cut}:{len(idx)}]", corpus, store, idx[cut:]), note)
    sides = []
    for split in (probe.train_split, probe.eval_split):
        corpus = load_corpus_cached(data, split, extract.cache_dir)
        store = stores(corpus)
        sides.append(ProbeSplit(split, corpus, store, store.indices))
    note = f"train on {data.name} {probe.train_split}, evaluate on {data.name} {probe.eval_split}"
    return sides[0], sides[1], note


def load_dev_split(data: DataConfig, probe: ProbeConfig, extract: ExtractConfig, stores: _Stores,
                   ev: ProbeSplit) -> Optional[ProbeSplit]:
    """The split that stops a structural probe's training: ``probe.dev_split`` (None, or single-split
    data: the eval split, returned as None)."""
    if probe.dev_split is None or DataKind(data.kind) in SINGLE_SPLIT_KINDS:
        return None
    if probe.dev_split == probe.eval_split:
        return ev
    _check_dev(data, probe)
    corpus = load_corpus_cached(data, probe.dev_split, extract.cache_dir)
    store = stores(corpus)
    return ProbeSplit(probe.dev_split, corpus, store, store.indices)


def _check_dev(data: DataConfig, probe: ProbeConfig) -> None:
    if DataKind(data.kind) not in SINGLE_SPLIT_KINDS and probe.dev_split == probe.train_split:
        raise ProbingError(f"probe.dev_split={probe.dev_split} is the training split: early stopping needs "
                           "held-out sentences")


def splits_read(data: DataConfig, probe: ProbeConfig, kind: ProbeKind) -> list[Optional[str]]:
    """The splits whose stores the probe reads (None: a single-split source), as :func:`load_splits` and
    :func:`load_dev_split` take them."""
    if DataKind(data.kind) in SINGLE_SPLIT_KINDS:
        return [None]
    splits = [probe.train_split] if one_corpus(data, probe) else [probe.train_split, probe.eval_split]
    if kind in STRUCTURAL and probe.dev_split is not None:
        _check_dev(data, probe)  # before any part is extracted
        if probe.dev_split not in splits:
            splits.append(probe.dev_split)
    return splits


def _part_run(model: ModelConfig, data: DataConfig, extract: ExtractConfig, probe: ProbeConfig, kind: ProbeKind,
              reads: Stored) -> Optional[TaskResult]:
    """With ``extract.partition`` set: this part of every store the probe reads; the part's report while one
    of them waits for other parts (None once all are whole: the probe then runs on them)."""
    waiting = []
    for split in splits_read(data, probe, kind):
        corpus = load_corpus_cached(data, split, extract.cache_dir)
        report = ensure_store(model, corpus, extract, reads, partial=True)
        if not report.complete:
            waiting.append((report, corpus))
    if not waiting:
        return None
    part = part_metrics(*waiting[0], extract)
    part["complete"] = False
    part["waiting"] = [f"{c.name} {c.split}" for _, c in waiting]
    return TaskResult(part, console=describe_part(part))


# The probe of each kind (the results schema names each kind's headline metric).
RUNNERS: dict[ProbeKind, Callable[[ProbeConfig, ProbeSplit, ProbeSplit, HeadSelection, int], ProbeResult]] = {
    ProbeKind.relation: run_relation, ProbeKind.arc: run_arc, ProbeKind.edge: run_edge,
    ProbeKind.distance: run_structural, ProbeKind.depth: run_structural}
STRUCTURAL = (ProbeKind.distance, ProbeKind.depth)  # these also take the early-stopping split


def head_set(layer: Optional[int], head: Optional[int]) -> str:
    """``all``, ``L3``, ``H5`` or ``L3H5``: which heads a probe read."""
    if layer is None and head is None:
        return schema.ALL
    if head is None:
        return f"L{layer}"
    if layer is None:
        return f"H{head}"
    return f"L{layer}H{head}"


def across_seeds(results: list[ProbeResult], seeds: list[int], ci: float) -> tuple[ProbeResult, dict]:
    """The first seed's result with every number that all seeds report replaced by their mean, and the spread:
    each number's values per seed, sd and Student's t interval of the mean (None with one seed)."""
    from scipy import stats

    first = results[0]
    keys = [k for k, v in first.metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)
            and all(isinstance(r.metrics.get(k), (int, float)) for r in results)]
    values = {k: [float(r.metrics[k]) for r in results] for k in keys}
    n = len(results)
    spread: dict = {"seeds": seeds, "values": values, "sd": {}, "ci": {}, "level": ci}
    for k, v in values.items():
        a = np.asarray(v)
        if n > 1 and np.isfinite(a).all():
            sd = float(a.std(ddof=1))
            half = float(stats.t.ppf(0.5 + ci / 2, n - 1) * sd / np.sqrt(n))
            spread["sd"][k], spread["ci"][k] = sd, [float(a.mean()) - half, float(a.mean()) + half]
    # a count every seed agrees on (n_train, n_classes) stays the count; anything else is the seeds' mean
    metrics = {**first.metrics, **{k: first.metrics[k] if _is_count(first.metrics[k]) and len(set(v)) == 1
                                   else float(np.mean(v)) for k, v in values.items()}}
    return ProbeResult(metrics, first.tables), spread


def _is_count(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def headline(label: str, metrics: dict, sd: dict) -> str:
    """The console's one line: ``label`` then every score (mean ± the seeds' sd) and every count as it is."""
    parts = [f"{k}={v}" if _is_count(v) else f"{k}={v:.4f}" + (f" ± {sd[k]:.4f}" if k in sd else "")
             for k, v in metrics.items() if _is_count(v) or isinstance(v, float)]
    return f"{label}: " + ", ".join(parts)


def sentence_intervals(results: list[ProbeResult], n_resamples: int, ci: float, seed: int) -> dict:
    """``{metric: [low, high]}``: the percentile interval of the seeds' mean over ``n_resamples`` bootstrap
    resamples of the eval sentences, for every metric whose per-sentence terms each seed reports (the
    structural probes' scores, every probe's ``margin`` over its best baseline). :class:`Terms`: the seeds'
    numerators are averaged sentence by sentence, their denominators agree; a term that recomputes itself
    under sentence weights (``under``, as :class:`~probing.probes.margins.AucMargin`): the seeds' values under
    each resample are averaged."""
    out: dict[str, list[float]] = {}
    if not n_resamples or not results[0].terms:
        return out
    weights = resample_counts(_n_sentences(results[0].terms), n_resamples, seed).astype(np.float64)
    for k, t in results[0].terms.items():
        if isinstance(t, Terms):
            samples = ratio_of_groups(t._replace(num=np.mean([r.terms[k].num for r in results], axis=0)), weights)
        else:
            samples = np.mean([r.terms[k].under(weights) for r in results], axis=0)
        lo, hi = percentile_interval(samples, ci)
        out[k] = [float(lo), float(hi)]
    return out


def _n_sentences(terms: dict) -> int:
    t = next(iter(terms.values()))
    return len(t.num) if isinstance(t, Terms) else int(t.n_sentences)


def scores_table(metrics: dict, ident: dict, spread: Optional[dict] = None) -> pd.DataFrame:
    """Tidy headline numbers: one row per metric (the mean over seeds), with the run's identity columns, the
    seeds' sd and the t interval of the mean, and the interval over eval sentences (structural probes' scores,
    every probe's margin over its best baseline)."""
    spread = spread or {"sd": {}, "ci": {}, "seeds": [None]}
    nan2 = [np.nan, np.nan]
    rows = [{**ident, "metric": k, "value": float(v), "sd": spread["sd"].get(k, np.nan),
             "ci_low": spread["ci"].get(k, nan2)[0], "ci_high": spread["ci"].get(k, nan2)[1],
             "n_seeds": len(spread["seeds"]), "sentences_ci_low": spread.get("sentences_ci", {}).get(k, nan2)[0],
             "sentences_ci_high": spread.get("sentences_ci", {}).get(k, nan2)[1]}
            for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    df = pd.DataFrame(rows)
    for col in ("layer", "head"):
        df[col] = pd.array(df[col], dtype="Int64")
    return df


def _check(probe: ProbeConfig, kind: ProbeKind, measure: Measure, features: Features) -> None:
    """The combinations of probe settings that cannot run, each one line, before any store is built."""
    if features is not Features.attention and kind is ProbeKind.arc:
        raise ProbingError(f"probe=arc reads attention maps: probe.features={features} works with probe=relation "
                           "or probe=edge")
    if features is Features.attention and kind in STRUCTURAL:
        raise ProbingError(f"probe={kind} reads word vectors: set probe.features=hidden or heads (and probe.layer)")
    if features is Features.attention and not measure.per_head and probe.head not in (None, 0):
        raise ProbingError(f"probe.measure={measure} has one map per layer: probe.head must be unset or 0, "
                           f"not {probe.head}")
    if probe.word_offset and kind not in STRUCTURAL:
        raise ProbingError(f"probe.word_offset={probe.word_offset} applies to probe=distance and probe=depth, not "
                           f"probe={kind}")
    need = "regimen" if kind in STRUCTURAL else "linear"
    if getattr(probe, need) is None:
        raise ProbingError(f"probe={kind} is fitted by probe.{need}, which this config lacks (the probe group "
                           f"composes it: probe={kind})")
    if probe.seeds < 1 or not 0 < probe.ci < 1 or probe.bootstrap < 0:
        raise ProbingError(f"probe.seeds must be >= 1, probe.ci in (0, 1) and probe.bootstrap >= 0; got "
                           f"{probe.seeds}, {probe.ci}, {probe.bootstrap}")


def _fit_seeds(probe: ProbeConfig, kind: ProbeKind, whole: ProbeSplit, ev: ProbeSplit, dev: Optional[ProbeSplit],
               seeds: list[int], timer: StageTimer) -> tuple[HeadSelection, ProbeSplit, list[ProbeResult]]:
    """The heads or vectors read, the first seed's training side, and one fit per seed (each on its own
    subsample of the training sentences); a setting the data cannot serve is one line."""
    store = whole.store
    try:
        sel = (vector_selection(store, probe.layer, probe.head) if isinstance(store, VectorStore)
               else select_heads(store.num_layers, store.num_heads, probe.layer, probe.head))
        extra = {"dev": dev} if kind in STRUCTURAL else {}
        results, sides = [], []
        for s in seeds:
            train = subsample_sentences(whole, probe.max_train_sentences, s)
            sides.append(train)
            with timer(f"probe_seed{s}", f"probe={kind} on {len(train.indices)} training sentences, seed {s}"):
                results.append(RUNNERS[kind](probe, train, ev, sel, s, **extra))
    except ValueError as e:
        raise ProbingError(f"probe={kind}: {e}") from e
    return sel, sides[0], results


def run(model: ModelConfig, data: DataConfig, extract: ExtractConfig, probe: ProbeConfig, seed: int,
        out: RunOutput) -> TaskResult:
    """Run the probe ``probe`` and write its tables through ``out``; a run dir that already holds finished
    results for this config returns them (``probe.skip_complete``)."""
    kind, measure, features = ProbeKind(probe.kind), Measure(probe.measure), Features(probe.features)
    _check(probe, kind, measure, features)
    reads: Stored = measure if features is Features.attention else Representation(features.value)
    key = config_key(model, data, extract, probe, seed)
    if probe.skip_complete:
        done = completed(out.dir, key)
        if done is not None:
            log.info("%s already holds complete results for this config (key %s): not recomputed", out.dir, key)
            return TaskResult({**done, "reused_results": True})
    if extract.partition is not None:
        part = _part_run(model, data, extract, probe, kind, reads)
        if part is not None:
            return part
    timer = StageTimer()
    stores = _Stores(model, extract, reads)
    with timer("stores", f"the {reads} stores of the train and eval sides"):
        train, ev, note = load_splits(data, probe, extract, stores)
        dev = load_dev_split(data, probe, extract, stores, ev) if kind in STRUCTURAL else None
    seeds = [seed + k for k in range(probe.seeds)]
    sel, train, results = _fit_seeds(probe, kind, train, ev, dev, seeds, timer)
    result, spread = across_seeds(results, seeds, probe.ci)
    spread["sentences_ci"] = sentence_intervals(results, probe.bootstrap, probe.ci, seed)
    # features: what the probe read (attention maps, hidden or heads vectors); measure: the maps' measure
    ident = {"model": model_label(model), "corpus": train.corpus.name, "train_split": train.name,
             "eval_split": ev.name, "features": features.value,
             "measure": measure.value if features is Features.attention else None, "probe": kind.value,
             "layer": probe.layer,
             "head": probe.head, "head_set": head_set(probe.layer, probe.head)}
    metrics = {**ident, "n_heads": len(sel), "split_note": note, "train_sentences": int(len(train.indices)),
               "eval_sentences": int(len(ev.indices)), "exclude_punct": probe.exclude_punct,
               "feature_set": str(probe.feature_set), **result.metrics, "seeds": spread, "config_key": key,
               "reused_results": False, **timer.metrics()}
    tables = {schema.PROBE_SCORES.name: scores_table(result.metrics, ident, spread)}
    for name, df in result.tables.items():
        tables[name] = df.assign(**{k: v for k, v in ident.items() if k not in df.columns})
    for name, df in tables.items():
        if schema.LAYER in df.columns:
            df[schema.LAYER] = pd.array(df[schema.LAYER], dtype="Int64")
            df[schema.HEAD] = pd.array(df[schema.HEAD], dtype="Int64")
        out.table(name, df)
    # the console's headline, printed last: every score of the probe (uuas/dspr, accuracy/selectivity, bits)
    sd = spread["sd"]
    label = (f"probe={kind} features={features} head_set={ident['head_set']} ({ev.name}; mean of {len(seeds)} "
             "seeds, ± sd)")
    return out.result(metrics, stores.used, console=headline(label, result.metrics, sd))


def from_config(cfg: RunConfig, out: RunOutput) -> TaskResult:
    return run(cfg.model, cfg.data, cfg.extract, cfg.probe, cfg.seed, out)
