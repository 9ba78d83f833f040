"""``task=probe``: load the train and eval splits, make sure their attention stores exist, run one probe.

A job first looks in its own run dir: when ``metrics.json`` there was written for the same config key
(model, data, extraction, probe settings, seed and the probe code's format version), it returns those
numbers without recomputing, so re-running a sweep into the same ``hydra.sweep.dir`` only computes the jobs
that are missing or failed (``probe.skip_complete=false`` turns this off).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from pathlib import Path
from typing import Any, Callable, Optional

import pandas as pd

from probing.config import enum_value, to_plain
from probing.corpus import Corpus
from probing.corpus.cache import load_corpus_cached
from probing.probes.data import ProbeResult, ProbeSplit
from probing.probes.features import HeadSelection, select_heads
from probing.results import write_table
from probing.tracking import Tracker

log = logging.getLogger(__name__)

# Bump when a change to the probe code changes its numbers: older results then no longer count as complete.
PROBE_FORMAT = 1
# Readers without splits: the probe holds out the last ``probe.eval_fraction`` of the one corpus.
SINGLE_SPLIT_KINDS = {"grammar", "conllu", "text"}
# Extraction settings that never change the maps (left out of the config key).
_VOLATILE_EXTRACT = ("batch_size", "max_batch_tokens", "progress", "cache_dir", "shard_mb")


def config_key(cfg: Any) -> str:
    """A hash of everything that changes a probe's numbers."""
    extract = {k: v for k, v in to_plain(cfg.extract).items() if k not in _VOLATILE_EXTRACT}
    data = {k: v for k, v in to_plain(cfg.data).items() if k not in ("split", "index")}
    probe = {k: v for k, v in to_plain(cfg.probe).items() if k != "skip_complete"}
    inputs = {"format": PROBE_FORMAT, "model": to_plain(cfg.model), "data": data, "extract": extract,
              "probe": probe}
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()[:16]


def completed(out_dir: Path, key: str) -> Optional[dict]:
    """The metrics of a finished probe run in ``out_dir`` with this config key, else None."""
    path = Path(out_dir) / "metrics.json"
    try:
        metrics = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if metrics.get("task") != "probe" or metrics.get("config_key") != key:
        return None
    return {k: v for k, v in metrics.items() if k not in ("task", "seconds")}


def _store(cfg: Any, corpus: Corpus):
    from probing.pipeline import describe_store, ensure_store

    report = ensure_store(cfg.model, corpus, cfg.extract)
    log.info(describe_store(report, corpus))
    return report.store


def load_splits(cfg: Any) -> tuple[ProbeSplit, ProbeSplit, str]:
    """The train and eval sides, and a note saying how they were made."""
    from probing.pipeline import ProbingError

    pcfg = cfg.probe
    kind = enum_value(cfg.data.kind)
    if kind in SINGLE_SPLIT_KINDS or pcfg.train_split == pcfg.eval_split:
        split = None if kind in SINGLE_SPLIT_KINDS else pcfg.train_split
        corpus = load_corpus_cached(cfg.data, split, cfg.extract.cache_dir)
        store = _store(cfg, corpus)
        idx = store.indices
        if not 0 < pcfg.eval_fraction < 1:
            raise ProbingError(f"probe.eval_fraction={pcfg.eval_fraction} must be between 0 and 1")
        cut = int(round(len(idx) * (1 - pcfg.eval_fraction)))
        if cut < 1 or cut >= len(idx):
            raise ProbingError(f"{len(idx)} sentences cannot be split into train and eval "
                               f"(probe.eval_fraction={pcfg.eval_fraction})")
        label = corpus.name if kind in SINGLE_SPLIT_KINDS else f"{corpus.name}-{pcfg.train_split}"
        note = (f"one corpus ({label}, {len(idx)} sentences with maps): first {cut} sentences train, "
                f"last {len(idx) - cut} eval (probe.eval_fraction={pcfg.eval_fraction})")
        return (ProbeSplit(f"{label}[0:{cut}]", corpus, store, idx[:cut]),
                ProbeSplit(f"{label}[{cut}:{len(idx)}]", corpus, store, idx[cut:]), note)
    sides = []
    for split in (pcfg.train_split, pcfg.eval_split):
        corpus = load_corpus_cached(cfg.data, split, cfg.extract.cache_dir)
        store = _store(cfg, corpus)
        sides.append(ProbeSplit(split, corpus, store, store.indices))
    note = f"train on {cfg.data.name} {pcfg.train_split}, evaluate on {cfg.data.name} {pcfg.eval_split}"
    return sides[0], sides[1], note


def _runner(kind: str) -> Callable[[Any, ProbeSplit, ProbeSplit, HeadSelection], ProbeResult]:
    if kind == "relation":
        from probing.probes.relation import run_relation
        return run_relation
    if kind == "arc":
        from probing.probes.arc import run_arc
        return run_arc
    if kind == "edge":
        from probing.probes.edge import run_edge
        return run_edge
    raise ValueError(f"unknown probe.kind {kind!r}")


def heads_label(layer: Optional[int], head: Optional[int]) -> str:
    if layer is None and head is None:
        return "all"
    if head is None:
        return f"L{layer}"
    if layer is None:
        return f"H{head}"
    return f"L{layer}H{head}"


def scores_table(metrics: dict, ident: dict) -> pd.DataFrame:
    """Tidy headline numbers: one row per metric, with the run's identity columns."""
    rows = [{**ident, "metric": k, "value": float(v)} for k, v in metrics.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)]
    df = pd.DataFrame(rows)
    for col in ("layer", "head"):
        df[col] = pd.array(df[col], dtype="Int64")
    return df


def run_probe(cfg: Any, out_dir: Path, tracker: Tracker) -> dict:
    """Run the probe ``cfg.probe`` and write its tables into ``out_dir``; returns the headline metrics."""
    from probing.pipeline import ProbingError

    pcfg = cfg.probe
    kind = enum_value(pcfg.kind)
    key = config_key(cfg)
    if pcfg.skip_complete:
        done = completed(out_dir, key)
        if done is not None:
            log.info("%s already holds complete results for this config (key %s): not recomputed",
                     out_dir, key)
            return {**done, "reused_results": True}
    start = time.perf_counter()
    train, ev, note = load_splits(cfg)
    store = train.store
    try:
        sel = select_heads(store.num_layers, store.num_heads, pcfg.layer, pcfg.head)
        result = _runner(kind)(pcfg, train, ev, sel)
    except ValueError as e:
        raise ProbingError(f"probe={kind}: {e}") from e
    ident = {"model": cfg.model.name, "corpus": train.corpus.name, "train_split": train.name,
             "eval_split": ev.name, "probe": kind, "layer": pcfg.layer, "head": pcfg.head,
             "heads": heads_label(pcfg.layer, pcfg.head)}
    metrics = {**ident, "n_heads": len(sel), "split_note": note, "train_sentences": int(len(train.indices)),
               "eval_sentences": int(len(ev.indices)), "exclude_punct": pcfg.exclude_punct,
               "feature_set": pcfg.feature_set, **result.metrics, "config_key": key, "reused_results": False,
               "probe_seconds": round(time.perf_counter() - start, 3)}
    tables = {"probe_scores": scores_table(result.metrics, ident)}
    for name, df in result.tables.items():
        tables[name] = df.assign(**{k: v for k, v in ident.items() if k not in df.columns})
    for name, df in tables.items():
        if "layer" in df.columns:
            df["layer"] = pd.array(df["layer"], dtype="Int64")
            df["head"] = pd.array(df["head"], dtype="Int64")
        write_table(df, out_dir, name)
        tracker.log_table(name, df)
    log.info("probe=%s heads=%s: %s", kind, ident["heads"], ", ".join(
        f"{k}={v:.4f}" for k, v in result.metrics.items() if isinstance(v, float)))
    return metrics
