"""A Hydra sweep's jobs merged into one tidy table + heatmaps (the ``probing-collect`` command).

Every job dir (a folder with ``.hydra/overrides.yaml``) becomes one row per headline metric of its
``metrics.json``, with the job's layer, head, probe kind, model (``minilm-random0`` for a
``model.random_init`` copy), data and measure (what a probe read: a measure's maps, or ``hidden`` /
``heads`` vectors), and one column per swept key
(every key any job overrode). A job without ``metrics.json`` is listed in ``failed_jobs.csv`` with the last
error line of its log, and the merge goes on. For each metric a layer x head heatmap is drawn (one per
combination of the other swept keys).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any, Optional

import pandas as pd
from hydra.core.override_parser.overrides_parser import OverridesParser

from probing import schema
from probing.figures.sweep import sweep_heatmaps
from probing.results import read_metrics, read_overrides, read_run_config, write_table

log = logging.getLogger(__name__)

# Override keys that the layer/head columns already carry.
_AXES = {"probe.layer": schema.LAYER, "probe.head": schema.HEAD}


def find_jobs(sweep_dir: Path) -> list[Path]:
    """Job dirs under ``sweep_dir`` (any depth), in natural order of their names."""
    dirs = {p.parent.parent for p in Path(sweep_dir).rglob(".hydra/overrides.yaml")}

    def natural(p: Path) -> list:
        return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(p.relative_to(sweep_dir)))]

    return sorted(dirs, key=natural)


def parse_overrides(lines: list[str]) -> dict[str, Any]:
    """``["probe.layer=3", "+x=y"]`` -> ``{"probe.layer": 3, "x": "y"}``, parsed and typed by Hydra's own
    overrides grammar (the lines are what Hydra wrote to the job's ``overrides.yaml``)."""
    parsed = OverridesParser.create().parse_overrides([str(line) for line in lines])
    return {o.key_or_group: o.value() for o in parsed}


def _get(cfg: dict, dotted: str) -> Any:
    node: Any = cfg
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _label(metrics: dict, key: str, default: Optional[str]) -> Optional[str]:
    """A text entry of a job's ``metrics.json`` (the job's own name for its model, or what it read)."""
    value = metrics.get(key)
    return value if isinstance(value, str) else default


def _failure_reason(job: Path) -> str:
    """The job's one-line error (``failed.txt``), else the last line that looks like an error in its logs
    (Hydra's and submitit's), if any."""
    if (job / schema.FAILED_FILE).is_file():
        return (job / schema.FAILED_FILE).read_text().strip()[:300]
    logs = sorted(job.glob("*.log")) + sorted(job.rglob(".submitit/**/*.err")) + sorted(job.rglob("*.err"))
    last = ""
    for path in logs:
        try:
            lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            continue
        errs = [ln for ln in lines if re.search(r"error|exception|traceback", ln, re.I)]
        if errs:
            return errs[-1][:300]
        if lines:
            last = lines[-1][:300]
    return f"no metrics.json (last log line: {last})" if last else "no metrics.json and no log"


def collect(sweep_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """``(sweep table, failed jobs, swept keys)`` of a sweep dir."""
    sweep_dir = Path(sweep_dir)
    jobs = find_jobs(sweep_dir)
    if not jobs:
        raise FileNotFoundError(f"{sweep_dir}: no job dirs (folders with .hydra/overrides.yaml) found")
    info = []
    for job in jobs:
        info.append((job, parse_overrides(read_overrides(job)), read_run_config(job)))
    swept = sorted({k for _, ov, _ in info for k in ov})
    rows, failed = [], []
    for job, ov, cfg in info:
        metrics = read_metrics(job)
        ident = {
            "job": str(job.relative_to(sweep_dir)), "task": _get(cfg, "task.name"),
            "probe": _get(cfg, "probe.kind"), "model": _label(metrics, "model", _get(cfg, "model.name")),
            "data": _get(cfg, "data.name"), "features": _label(metrics, "features", None),
            "measure": _label(metrics, "measure", None),
            "layer": _get(cfg, "probe.layer"), "head": _get(cfg, "probe.head"),
        }
        ident.update({k: ov.get(k, _get(cfg, k)) for k in swept if k not in _AXES})
        if not metrics:
            failed.append({**ident, "job_dir": str(job), "reason": _failure_reason(job)})
            continue
        rows.extend({**ident, "metric": name, "value": value} for name, value in schema.metric_items(metrics))
    table = _typed(pd.DataFrame(rows, columns=list(ident) + ["metric", "value"]) if rows else
                   pd.DataFrame(columns=list(ident) + ["metric", "value"]))
    failed_df = pd.DataFrame(failed, columns=list(ident) + ["job_dir", "reason"])
    return table, _typed(failed_df), swept


def _typed(df: pd.DataFrame) -> pd.DataFrame:
    """Columns Parquet can hold: numbers stay numbers (nullable ints for layer/head), the rest strings."""
    df = df.copy()
    for col in df.columns:
        if col in ("layer", "head"):
            df[col] = pd.array(pd.to_numeric(df[col], errors="coerce"), dtype="Float64").astype("Int64")
        elif col == "value":
            df[col] = df[col].astype(float)
        elif df[col].map(_is_number_or_none).all():
            df[col] = pd.to_numeric(df[col], errors="coerce")
        else:
            df[col] = df[col].map(lambda v: None if v is None else str(v)).astype("string")
    return df


def _is_number_or_none(v: Any) -> bool:
    return v is None or isinstance(v, (int, float)) and not isinstance(v, bool)


def _faceted_by(table: pd.DataFrame, swept: list[str]) -> list[str]:
    """The swept keys besides layer and head that vary in the table (overrides.yaml also lists constants such
    as task=probe): one heatmap per combination of their values."""
    return [k for k in swept if k not in _AXES and k in table.columns and table[k].nunique(dropna=False) > 1]


def write_collection(sweep_dir: Path, out_dir: Optional[Path] = None) -> dict[str, Any]:
    """Collect ``sweep_dir`` into ``out_dir`` (default: the sweep dir); returns a summary."""
    out_dir = Path(out_dir or sweep_dir)
    table, failed, swept = collect(Path(sweep_dir))
    write_table(table, out_dir, schema.SWEEP.name)
    write_table(failed, out_dir, schema.FAILED_JOBS.name)
    figs = sweep_heatmaps(table, _faceted_by(table, swept), out_dir / "figures")
    n_jobs = table["job"].nunique() + len(failed)
    return {"jobs": n_jobs, "complete": int(table["job"].nunique()), "failed": failed["job"].tolist(),
            "rows": len(table), "swept": _varying(table, swept), "figures": [str(p) for p in figs],
            "out": str(out_dir)}


def _varying(table: pd.DataFrame, keys: list[str]) -> list[str]:
    """The override keys whose values differ between the collected jobs (a key every job was given the same
    value, such as task=probe, was not swept)."""
    return [k for k in keys if _AXES.get(k, k) in table.columns and table[_AXES.get(k, k)].nunique(dropna=False) > 1]
