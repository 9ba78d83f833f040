"""What the dashboard reads: run dirs and sweep dirs, turned into :class:`Source` objects.

Every table is optional: a missing or unreadable table leaves its part of the dashboard out with a note,
never an error. A sweep dir whose jobs are heads runs becomes one source per job (two models side by
side); a sweep of probe jobs becomes one source with one probe row per job x metric.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import pandas as pd

from probing.results import read_run_config, read_table

log = logging.getLogger(__name__)

# Table names the analysis may use (the first found wins; then any table whose name contains "mds"/"pattern").
MDS_TABLES = ("head_mds", "mds", "heads_mds", "head_distances_mds")
PATTERN_TABLES = ("patterns", "attention_patterns", "head_patterns")
# Columns of a wide pattern table that count rows rather than measure a head.
COUNT_COLUMNS = ("rows", "n", "count", "sentences")


@dataclass
class Source:
    """One column of the dashboard: a run (or a sweep of probe jobs) and its tables (None where absent)."""

    path: Path
    label: str
    config: dict = field(default_factory=dict)
    metrics: dict = field(default_factory=dict)
    heads: Optional[pd.DataFrame] = None
    patterns: Optional[pd.DataFrame] = None
    mds: Optional[pd.DataFrame] = None
    probes: Optional[pd.DataFrame] = None  # long: layer, head, metric, value (+ probe, model...)
    trees: Optional[pd.DataFrame] = None  # per head: method, direction, layer, head, uas (+ baselines)
    figures: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _read_table(run_dir: Path, name: str) -> Optional[pd.DataFrame]:
    try:
        return read_table(run_dir, name)
    except Exception as e:  # noqa: BLE001 - a damaged table must not stop the report
        log.warning("%s/%s: unreadable (%s: %s); left out", run_dir, name, type(e).__name__, e)
        return None


def _read_json(path: Path) -> dict:
    try:
        got = json.loads(path.read_text())
        return got if isinstance(got, dict) else {}
    except (OSError, json.JSONDecodeError):
        return {}


def is_run_dir(path: Path) -> bool:
    return any((path / f).exists() for f in ("metrics.json", ".hydra", "heads.csv", "heads.parquet"))


def job_dirs(path: Path) -> list[Path]:
    """The job dirs of a Hydra sweep dir (numbered sub-dirs that are run dirs), in job order."""
    subs = [p for p in path.iterdir() if p.is_dir() and p.name.isdigit() and is_run_dir(p)]
    return sorted(subs, key=lambda p: int(p.name))


def patterns_long(df: Optional[pd.DataFrame]) -> Optional[pd.DataFrame]:
    """Pattern tables as ``layer, head, metric, value`` rows, whether written long or wide."""
    if df is None or not {"layer", "head"} <= set(df.columns):
        return None
    if {"metric", "value"} <= set(df.columns):
        return df
    keys = [c for c in df.columns if c in ("model", "corpus", "split", "layer", "head")]
    values = [c for c in df.columns if c not in keys and c not in COUNT_COLUMNS
              and pd.api.types.is_numeric_dtype(df[c])]
    return df.melt(id_vars=keys, value_vars=values, var_name="metric", value_name="value") if values else None


def mds_coordinates(df: Optional[pd.DataFrame]) -> Optional[pd.DataFrame]:
    """``layer, head, x, y`` from an MDS table whatever it calls its two coordinate columns."""
    if df is None or not {"layer", "head"} <= set(df.columns):
        return None
    for pair in (("x", "y"), ("mds_x", "mds_y"), ("dim0", "dim1"), ("mds_0", "mds_1"), ("x0", "x1"),
                 ("component_1", "component_2")):
        if set(pair) <= set(df.columns):
            return df.rename(columns={pair[0]: "x", pair[1]: "y"})
    coords = [c for c in df.columns if c not in ("layer", "head") and pd.api.types.is_float_dtype(df[c])]
    return df.rename(columns={coords[0]: "x", coords[1]: "y"}) if len(coords) >= 2 else None


def probe_rows(run_dir: Path, metrics: dict) -> Optional[pd.DataFrame]:
    """A probe run's numbers as long rows (its ``probe_scores`` table, or numbers of ``metrics.json``)."""
    df = _read_table(run_dir, "probe_scores")
    if df is not None and {"metric", "value"} <= set(df.columns):
        return df
    if metrics.get("task") != "probe":
        return None
    skip = {"layer", "head", "seconds", "probe_seconds", "n_heads", "train_sentences", "eval_sentences"}
    rows = [{"layer": metrics.get("layer"), "head": metrics.get("head"), "probe": metrics.get("probe"),
             "metric": k, "value": float(v)} for k, v in metrics.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in skip]
    return pd.DataFrame(rows) if rows else None


def _candidates(run_dir: Path, names: tuple[str, ...], part: str) -> list[str]:
    """The known table names first, then any other table of the run dir whose name contains ``part``."""
    found = sorted({p.stem for p in run_dir.glob(f"*{part}*.csv")} | {p.stem for p in run_dir.glob(f"*{part}*.parquet")})
    return list(names) + [n for n in found if n not in names]


def load_run(run_dir: Path) -> Source:
    """One run dir as a source."""
    config = read_run_config(run_dir)
    metrics = _read_json(run_dir / "metrics.json")
    src = Source(run_dir, "", config, metrics)
    src.heads = _read_table(run_dir, "heads")
    if src.heads is not None and not {"layer", "head", "relation", "direction", "accuracy"} <= set(src.heads.columns):
        src.notes.append("heads table without layer/head/relation/direction/accuracy columns: left out")
        src.heads = None
    for name in _candidates(run_dir, PATTERN_TABLES, "pattern"):
        src.patterns = patterns_long(_read_table(run_dir, name))
        if src.patterns is not None:
            break
    for name in _candidates(run_dir, MDS_TABLES, "mds"):
        src.mds = mds_coordinates(_read_table(run_dir, name))
        if src.mds is not None:
            break
    src.probes = probe_rows(run_dir, metrics)
    trees = _read_table(run_dir, "trees")
    if trees is not None and {"method", "direction", "layer", "head", "uas"} <= set(trees.columns):
        src.trees = trees
    src.figures = sorted(p for p in run_dir.glob("**/*.png") if "wandb" not in p.relative_to(run_dir).parts)
    src.label = source_label(src)
    return src


def load_sweep(sweep_dir: Path, jobs: list[Path]) -> list[Source]:
    """A sweep dir: one source per heads job, one source for all probe jobs together."""
    runs = [load_run(j) for j in jobs]
    sources = [r for r in runs if r.heads is not None]
    table = _read_table(sweep_dir, "sweep")
    probe_frames = [r.probes.assign(job=r.path.name) for r in runs if r.probes is not None]
    if table is None and probe_frames:
        table = pd.concat(probe_frames, ignore_index=True)
    if table is not None and {"metric", "value"} <= set(table.columns):
        first = runs[0] if runs else Source(sweep_dir, "")
        figures = sorted((sweep_dir / "figures").glob("*.png"))
        failed = _read_table(sweep_dir, "failed_jobs")
        # a sweep over models or corpora: one source each, so they sit side by side
        keys = [c for c in ("model", "data", "corpus") if c in table.columns and table[c].nunique(dropna=True) > 1]
        groups = table.groupby(keys, dropna=False, sort=False) if keys else [((), table)]
        for _, part in groups:
            sweep = Source(sweep_dir, "", first.config, {"jobs": len(jobs)}, probes=part.reset_index(drop=True),
                           figures=[] if keys else figures)
            if failed is not None and len(failed):
                sweep.notes.append(f"{len(failed)} failed or incomplete jobs (failed_jobs.csv)")
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
        if (p / "sweep.csv").exists() or (p / "sweep.parquet").exists() or jobs:
            got = load_sweep(p, jobs)
        elif is_run_dir(p):
            got = [load_run(p)]
        else:
            raise FileNotFoundError(f"{p}: no metrics.json, .hydra/, tables or job dirs (is it a run dir?)")
        if not got:
            log.warning("%s: nothing to show (no heads, probe or sweep tables)", p)
        sources.extend(got)
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
    for table in (src.heads, src.probes):
        if table is not None and len(table) and not model:
            row = table.iloc[0]
            got = (row.get("model"), row.get("corpus", row.get("data")), row.get("split"))
            model, corpus, split = (None if v is None or pd.isna(v) else v for v in got)
    cfg = src.config
    model = model or (cfg.get("model") or {}).get("name")
    corpus = corpus or (cfg.get("data") or {}).get("name")
    split = split if split is not None else (cfg.get("data") or {}).get("split")
    text = " · ".join(str(x) for x in (model, " ".join(str(y) for y in (corpus, split) if y)) if x)
    if sweep:
        return f"{text} (sweep {src.path.name})" if text else f"sweep {src.path.name}"
    return text or src.path.name


def describe(src: Any) -> dict[str, Any]:
    """A row of the sources table."""
    cfg = src.config
    task = src.metrics.get("task") or (cfg.get("task") or {}).get("name")
    return {"source": src.label, "dir": str(src.path), "task": task,
            "experiment": cfg.get("experiment_name"),
            "heads rows": 0 if src.heads is None else len(src.heads),
            "probe rows": 0 if src.probes is None else len(src.probes),
            "seconds": src.metrics.get("seconds")}
