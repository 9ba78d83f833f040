"""What the dashboard reads: run dirs and sweep dirs, turned into :class:`Source` objects.

Every table is optional: a missing or unreadable table leaves its part of the dashboard out with a note,
never an error. A sweep dir whose jobs are heads (or importance) runs becomes one source per job (two
models side by side); a sweep of probe jobs becomes one source with one probe row per job x metric.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional

import pandas as pd

from probing import schema
from probing.config import LabelSet
from probing.corpus import split_name
from probing.results import read_metrics, read_run_config, read_table

log = logging.getLogger(__name__)


@dataclass
class Source:
    """One column of the dashboard: a run (or a sweep of probe jobs) and its tables (None where absent)."""

    path: Path
    label: str
    config: dict = field(default_factory=dict)
    metrics: dict = field(default_factory=dict)
    heads: Optional[pd.DataFrame] = None
    best: Optional[pd.DataFrame] = None  # task=heads: the best head per relation, in-sample and held out
    patterns: Optional[pd.DataFrame] = None
    mds: Optional[pd.DataFrame] = None
    detectors: Optional[pd.DataFrame] = None  # task=heads: each head's detector scores beside their nulls
    probes: Optional[pd.DataFrame] = None  # long: layer, head, metric, value (+ probe, model...)
    trees: Optional[pd.DataFrame] = None  # per head: method, direction, layer, head, uas (+ baselines)
    importance: Optional[pd.DataFrame] = None  # task=importance: per head (or layer) and relation, score
    pruning: Optional[pd.DataFrame] = None  # task=importance: score per order and fraction of heads removed
    importance_link: Optional[pd.DataFrame] = None  # task=importance: Spearman per relation and direction
    # task=importance: per relation the costliest head chosen on one half of the sentences, its drop on the other
    importance_heldout: Optional[pd.DataFrame] = None
    linked_heads: Optional[pd.DataFrame] = None  # the heads table of ``importance.heads_run`` (None: not given)
    patching: Optional[pd.DataFrame] = None  # task=patching: each head's effect per position
    patching_atlas: Optional[pd.DataFrame] = None  # task=patching: attention accuracy beside effect per head
    figures: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    measure: Optional[str] = None  # the map its tables score (probing.config.Measure); None: not recorded


def _read_table(run_dir: Path, name: str) -> Optional[pd.DataFrame]:
    try:
        return read_table(run_dir, name)
    except Exception as e:  # noqa: BLE001 - a damaged table must not stop the report
        log.warning("%s/%s: unreadable (%s: %s); left out", run_dir, name, type(e).__name__, e)
        return None


def _schema_table(run_dir: Path, table: schema.Table, need: tuple[str, ...]) -> Optional[pd.DataFrame]:
    """Table ``table`` of a run dir when it has the columns the dashboard draws (``need``), else None."""
    df = _read_table(run_dir, table.name)
    return df if df is not None and set(need) <= set(df.columns) else None


def is_run_dir(path: Path) -> bool:
    return any((path / f).exists() for f in (schema.METRICS_FILE, ".hydra", f"{schema.HEADS.name}.csv",
                                              f"{schema.HEADS.name}.parquet"))


def is_finished(path: Path) -> bool:
    """A run is finished when its ``metrics.json`` exists: runs write it after every table (the mark of a
    complete run dir), so a run that failed part-way has tables but no ``metrics.json``."""
    return (Path(path) / schema.METRICS_FILE).is_file()


def job_dirs(path: Path) -> list[Path]:
    """The job dirs of a Hydra sweep dir (numbered sub-dirs that are run dirs), in job order."""
    subs = [p for p in path.iterdir() if p.is_dir() and p.name.isdigit() and is_run_dir(p)]
    return sorted(subs, key=lambda p: int(p.name))


def patterns_long(df: Optional[pd.DataFrame]) -> Optional[pd.DataFrame]:
    """The (wide) ``patterns`` table as ``layer, head, metric, value`` rows, one per pattern metric."""
    if df is None:
        return None
    keys = [c for c in schema.PATTERNS.keys if c in df.columns]
    values = [c for c in schema.PATTERN_METRICS if c in df.columns]
    return df.melt(id_vars=keys, value_vars=values, var_name="metric", value_name="value") if values else None


def probe_rows(run_dir: Path, metrics: dict) -> Optional[pd.DataFrame]:
    """A probe run's numbers as long rows (its ``probe_scores`` table, or numbers of ``metrics.json``)."""
    df = _schema_table(run_dir, schema.PROBE_SCORES, ("metric", "value"))
    if df is not None:
        return df
    if metrics.get("task") != "probe":
        return None
    ident = {k: metrics.get(k) for k in ("model", "measure", "probe", "layer", "head")}
    rows = [{**ident, "metric": k, "value": v} for k, v in schema.metric_items(metrics)]
    return pd.DataFrame(rows) if rows else None


def load_run(run_dir: Path) -> Source:
    """One run dir as a source."""
    config = read_run_config(run_dir)
    metrics = read_metrics(run_dir)
    src = Source(run_dir, "", config, metrics)
    need = ("layer", "head", "relation", "direction", "accuracy")
    src.heads = _schema_table(run_dir, schema.HEADS, need)
    if src.heads is None and _read_table(run_dir, schema.HEADS.name) is not None:
        src.notes.append(f"heads table without {'/'.join(need)} columns: left out")
    src.best = _schema_table(run_dir, schema.BEST_HEADS, ("label_set", "relation", "direction", "layer", "head",
                                                           "held_out_accuracy"))
    src.patterns = patterns_long(_schema_table(run_dir, schema.PATTERNS, ("layer", "head")))
    src.mds = _schema_table(run_dir, schema.HEAD_MDS, ("layer", "head", "x", "y"))
    src.detectors = _schema_table(run_dir, schema.DETECTORS, ("detector", "layer", "head", "score", "null",
                                                               "p_adjusted", "passes"))
    src.probes = probe_rows(run_dir, metrics)
    src.trees = _schema_table(run_dir, schema.TREES, ("method", "direction", "layer", "head", "uas"))
    load_importance(src)
    src.patching = _schema_table(run_dir, schema.PATCHING, ("position", "layer", "head", "effect", "n_pairs"))
    src.patching_atlas = _schema_table(run_dir, schema.PATCHING_ATLAS, ("layer", "head", "attention_accuracy",
                                                                         "effect", "quadrant"))
    src.figures = sorted(p for p in run_dir.glob("**/*.png") if "wandb" not in p.relative_to(run_dir).parts)
    src.measure = measure_of(src)
    src.label = source_label(src)
    return src


def load_importance(src: Source) -> None:
    """A ``task=importance`` run's tables, and the heads table its link was computed against: the one of
    ``importance.heads_run`` when the run names one, else the run's own (the accuracy it computed)."""
    run_dir = src.path
    src.importance = _schema_table(run_dir, schema.IMPORTANCE, ("method", "metric", "relation", "layer", "head",
                                                                "score"))
    src.pruning = _schema_table(run_dir, schema.PRUNING, ("order", "fraction_removed", "relation", "score"))
    src.importance_link = _schema_table(run_dir, schema.IMPORTANCE_LINK, ("relation", "direction", "rho"))
    src.importance_heldout = _schema_table(run_dir, schema.IMPORTANCE_HELDOUT, ("relation", "layer", "head", "score",
                                                                                "ci_low", "ci_high", "n"))
    heads_run = (src.config.get("importance") or {}).get("heads_run")
    if src.importance is None:
        return
    if not heads_run:
        src.linked_heads = src.heads
        return
    path = Path(heads_run)
    path = path if path.is_absolute() or path.is_dir() else run_dir / path
    src.linked_heads = _schema_table(path, schema.HEADS, ("layer", "head", "relation", "direction", "accuracy"))
    if src.linked_heads is None:
        src.notes.append(f"importance.heads_run={heads_run}: no heads table there; attention accuracy left out")


def _measures(df: Optional[pd.DataFrame]) -> list[str]:
    if df is None or "measure" not in df.columns:
        return []
    return [str(m) for m in df["measure"].dropna().unique()]


def measure_of(src: Source) -> Optional[str]:
    """The measure a source's tables score: their ``measure`` column, else the run config's
    ``heads.measure`` / ``probe.measure`` (runs from before measures existed have neither: None)."""
    for table in (src.heads, src.probes):
        got = _measures(table)
        if len(got) == 1:
            return got[0]
    task = src.metrics.get("task") or (src.config.get("task") or {}).get("name")
    section = {"heads": "heads", "probe": "probe"}.get(str(task))
    got = (src.config.get(section) or {}).get("measure") if section else None
    return None if got is None else str(got)


def split_by_measure(src: Source) -> list[Source]:
    """One source per measure when a run's heads table holds several; tables without a ``measure`` column
    stay with the first."""
    measures = _measures(src.heads)
    if len(measures) <= 1:
        return [src]
    out = []
    for k, m in enumerate(measures):
        parts = {}
        for name in ("heads", "best", "patterns", "mds", "probes", "trees"):
            df = getattr(src, name)
            if df is not None and "measure" in df.columns:
                parts[name] = df[df["measure"].astype(str) == m].reset_index(drop=True)
            elif k:
                parts[name] = None
        out.append(replace(src, measure=m, figures=src.figures if k == 0 else [], notes=list(src.notes), **parts))
    return out


def load_sweep(sweep_dir: Path, jobs: list[Path]) -> list[Source]:
    """A sweep dir: one source per heads or importance job, one source for all probe jobs together;
    unfinished jobs are left out and counted in a note."""
    unfinished = [j for j in jobs if not is_finished(j)]
    if unfinished:
        log.warning("%s: %d unfinished jobs left out (no %s): %s", sweep_dir, len(unfinished), schema.METRICS_FILE,
                    ", ".join(j.name for j in unfinished))
    runs = [load_run(j) for j in jobs if is_finished(j)]
    sources = [r for r in runs if r.heads is not None or r.importance is not None]
    table = _read_table(sweep_dir, schema.SWEEP.name)
    probe_frames = [r.probes.assign(job=r.path.name) for r in runs if r.probes is not None]
    if table is None and probe_frames:
        table = pd.concat(probe_frames, ignore_index=True)
    if table is not None and {"metric", "value"} <= set(table.columns):
        first = runs[0] if runs else Source(sweep_dir, "")
        figures = sorted((sweep_dir / "figures").glob("*.png"))
        failed = _read_table(sweep_dir, schema.FAILED_JOBS.name)
        # a sweep over models, corpora or measures: one source each, so they sit side by side
        keys = [c for c in ("model", "data", "corpus", "measure") if c in table.columns and table[c].nunique(dropna=True) > 1]
        groups = table.groupby(keys, dropna=False, sort=False) if keys else [((), table)]
        for _, part in groups:
            sweep = Source(sweep_dir, "", first.config, {"jobs": len(jobs)}, probes=part.reset_index(drop=True),
                           figures=[] if keys else figures)
            if failed is not None and len(failed):
                sweep.notes.append(f"{len(failed)} failed or incomplete jobs (failed_jobs.csv)")
            elif unfinished:
                sweep.notes.append(f"{len(unfinished)} unfinished jobs left out (no {schema.METRICS_FILE})")
            sweep.measure = measure_of(sweep)
            sweep.label = source_label(sweep, sweep=True)
            sources.append(sweep)
    return sources


def load_sources(paths: list[Path]) -> list[Source]:
    """Every source the given run / sweep dirs hold, with labels made unique."""
    sources: list[Source] = []
    for p in paths:
        p = Path(p)
        if not p.is_dir():
            raise FileNotFoundError(f"{p}: not a run or sweep dir")
        jobs = job_dirs(p)
        if (p / f"{schema.SWEEP.name}.csv").exists() or (p / f"{schema.SWEEP.name}.parquet").exists() or jobs:
            got = load_sweep(p, jobs)
        elif is_run_dir(p) and (p / schema.FAILED_FILE).is_file():
            log.warning("%s: a failed run (%s: %s); left out", p, schema.FAILED_FILE,
                        (p / schema.FAILED_FILE).read_text().strip())
            got = []
        elif is_run_dir(p) and not is_finished(p):
            log.warning("%s: an unfinished run (no %s: it failed or is still running); left out", p,
                        schema.METRICS_FILE)
            got = []
        elif is_run_dir(p):
            got = [load_run(p)]
        else:
            raise FileNotFoundError(f"{p}: no metrics.json, .hydra/, tables or job dirs (is it a run dir?)")
        if not got:
            log.warning("%s: nothing to show (no heads, probe, importance or sweep tables)", p)
        sources.extend(x for s in got for x in split_by_measure(s))
    if len({s.measure for s in sources if s.measure}) > 1:  # measures side by side: each labelled by its own
        for s in sources:
            if s.measure:
                s.label = f"{s.measure} · {s.label}"
    seen: dict[str, int] = {}
    for s in sources:
        seen[s.label] = seen.get(s.label, 0) + 1
    for s in sources:
        if seen[s.label] > 1:
            s.label = f"{s.label} [{s.path.parent.name}/{s.path.name}]"
    return sources


def source_label(src: Source, sweep: bool = False) -> str:
    """``model · corpus split`` from the heads or probe table, else the config; ``sweep`` adds the dir name."""
    model = corpus = split = None
    for table in (src.heads, src.probes, src.importance):
        if table is not None and len(table) and not model:
            row = table.iloc[0]
            # a probe's rows name the split it was scored on (eval_split)
            got = (row.get("model"), row.get("corpus", row.get("data")), row.get("split", row.get("eval_split")))
            model, corpus, split = (None if v is None or pd.isna(v) else v for v in got)
    cfg = src.config
    model = model or (cfg.get("model") or {}).get("name")
    corpus = corpus or (cfg.get("data") or {}).get("name")
    if split is None:  # a probe is scored on probe.eval_split, not data.split
        probe = (cfg.get("task") or {}).get("name") == "probe"
        split = (cfg.get("probe") or {}).get("eval_split") if probe else split_name(cfg.get("data") or {})
    text = " · ".join(str(x) for x in (model, " ".join(str(y) for y in (corpus, split) if y)) if x)
    if sweep:
        return f"{text} (sweep {src.path.name})" if text else f"sweep {src.path.name}"
    return text or src.path.name


def describe(src: Any) -> dict[str, Any]:
    """A row of the runs table: what a reader needs to tell the sources apart (model size, sentences,
    relations scored, jobs of a sweep), not table sizes."""
    cfg, metrics = src.config, src.metrics
    task = metrics.get("task") or (cfg.get("task") or {}).get("name")
    layers, heads = metrics.get("n_layers"), metrics.get("n_heads")
    if (layers is None or heads is None) and src.heads is not None and len(src.heads):
        layers, heads = int(src.heads["layer"].max()) + 1, int(src.heads["head"].max()) + 1
    relations = None
    if src.heads is not None and len(src.heads):
        rel = src.heads[src.heads["relation"] != schema.ALL]
        if "label_set" in rel.columns and len(rel):  # the label set the overview and the heads section count
            sets = set(rel["label_set"].astype(str))
            rel = rel[rel["label_set"].astype(str) == (LabelSet.as_is.value if LabelSet.as_is.value in sets
                                                      else sorted(sets)[0])]
        relations = int(rel["relation"].nunique())
    return {"source": src.label, "task": task, "measure": src.measure, "experiment": cfg.get("experiment_name"),
            "layers x heads": None if layers is None else f"{layers} x {heads}",
            "sentences": metrics.get("sentences"), "relations": relations, "jobs": metrics.get("jobs") or None,
            "seconds": metrics.get("seconds"), "dir": str(src.path)}
