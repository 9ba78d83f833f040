"""The Weights & Biases tracker: one wandb run per Hydra job, offline by default, never fatal.

The offline run lands in ``<run dir>/wandb/offline-run-*`` and can be uploaded later with ``wandb sync``.
Runs are grouped by experiment (single runs) or by experiment and sweep dir (multirun jobs), so a sweep's
jobs show up together. Every wandb error becomes a logged warning: the run dir is the source of truth
and is written whether or not wandb works. ``finish`` also mirrors the tables and figures of the run dir
that the task did not log itself, so wandb always holds what the run dir holds.
"""

from __future__ import annotations

import logging
import math
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional

import pandas as pd

from probing import schema
from probing.config import LabelSet, enum_value
from probing.results import read_overrides, read_run_config, read_table

log = logging.getLogger(__name__)

# Tables above wandb's per-log limit (10,000 rows) are still logged whole up to this many rows.
MAX_TABLE_ROWS = 200_000
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif")


def flatten(metrics: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"best": {"nsubj": 0.8}}`` -> ``{"best/nsubj": 0.8}``; keeps numbers, strings and booleans only."""
    out: dict[str, Any] = {}
    for key, value in metrics.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}/"))
        elif hasattr(value, "item") and not isinstance(value, (str, bytes)):
            try:
                out[name] = value.item()  # numpy scalars
            except (ValueError, AttributeError):
                continue
        elif isinstance(value, float) and not math.isfinite(value):
            out[name] = None
        elif isinstance(value, (int, float, str, bool)) or value is None:
            out[name] = value
    return out


def best_head_summary(heads: pd.DataFrame) -> dict[str, Any]:
    """``best/<relation>/<direction>/{accuracy,layer,head}`` for the as-is labels of a heads table."""
    need = {"relation", "direction", "layer", "head", "accuracy"}
    if not need <= set(heads.columns) or not len(heads):
        return {}
    df = heads[heads["label_set"] == LabelSet.as_is.value] if "label_set" in heads.columns else heads
    best = schema.best_heads(df, per=("relation", "direction"))
    out: dict[str, Any] = {}
    for row in best.itertuples(index=False):
        key = f"best/{row.relation}/{row.direction}"
        out.update({f"{key}/accuracy": float(row.accuracy), f"{key}/layer": int(row.layer),
                    f"{key}/head": int(row.head)})
    return out


def run_group(config: Mapping[str, Any], out_dir: Path, multirun: bool) -> str:
    """``experiment`` for a single run, ``experiment/<sweep dir name>`` for a job of a sweep."""
    experiment = str(config.get("experiment_name") or "default")
    return f"{experiment}/{out_dir.parent.name}" if multirun else experiment


def _table_frame(df: pd.DataFrame) -> pd.DataFrame:
    """A frame wandb can type: categorical/enum/object columns as strings, NaN and NA as None."""
    out = df.copy()
    for col in out.columns:
        if isinstance(out[col].dtype, pd.CategoricalDtype) or out[col].dtype == object:
            out[col] = out[col].map(lambda v: None if v is None or (isinstance(v, float) and math.isnan(v))
                                    else str(enum_value(v)))
        elif pd.api.types.is_string_dtype(out[col].dtype) or pd.api.types.is_extension_array_dtype(out[col].dtype):
            # nullable Int64/boolean/string columns hold pd.NA, which wandb cannot serialise
            out[col] = out[col].astype(object).where(out[col].notna(), None)
    return out


class WandbTracker:
    """A :class:`~probing.tracking.Tracker` backed by one wandb run.

    ``cfg`` is a :class:`~probing.config.LoggerConfig`; ``config`` the resolved run config (plain dict);
    ``job_name`` is set by the CLI for the jobs of a multirun. Construction raises when wandb cannot
    start (``make_tracker`` turns that into a warning); later calls never raise.
    """

    def __init__(self, cfg: Any, config: Mapping[str, Any], out_dir: Path, job_name: Optional[str] = None):
        import wandb  # lazily: wandb is slow to import and optional at run time

        self._wandb = wandb
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        overrides = read_overrides(self.out_dir)  # Hydra writes them before the job runs
        multirun = job_name is not None
        name = getattr(cfg, "run_name", None) or (
            self.out_dir.name if not multirun else f"{self.out_dir.parent.name}/{self.out_dir.name}")
        if overrides:
            name = f"{name} {','.join(overrides)}"[:128]
        task = (config.get("task") or {}).get("name") if isinstance(config.get("task"), Mapping) else None
        self.run = wandb.init(
            project=cfg.project,
            entity=getattr(cfg, "entity", None),
            group=getattr(cfg, "group", None) or run_group(config, self.out_dir, multirun),
            job_type=str(task) if task else None,
            name=name,
            tags=list(getattr(cfg, "tags", None) or []),
            dir=str(self.out_dir),
            mode=str(enum_value(cfg.mode)),
            config={**dict(config), "run_dir": str(self.out_dir), "overrides": overrides},
            reinit="create_new",  # one run per job, also when a process runs several jobs
            # console capture off: Hydra already writes the log, and wrapping stdout breaks under joblib workers
            settings=wandb.Settings(console="off"),
        )
        self._logged_tables: set[str] = set()
        self._logged_images: set[str] = set()
        self._finished = False

    @property
    def run_dir(self) -> Optional[Path]:
        """Where wandb writes this run (``<out_dir>/wandb/offline-run-*`` in offline mode)."""
        try:
            return Path(self.run.dir).parent
        except Exception:  # noqa: BLE001
            return None

    def _guard(self, what: str, fn: Any, *args: Any) -> None:
        if self._finished:
            return
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001 - a tracker must never fail the run
            log.warning("wandb: could not %s (%s: %s); the run dir still has it", what, type(e).__name__, e)

    # ---- the Tracker protocol ---------------------------------------------------------------------
    def log_metrics(self, metrics: Mapping[str, Any]) -> None:
        """Headline numbers go to the run summary (nested dicts become ``a/b`` keys)."""
        self._guard("log metrics", lambda: self.run.summary.update(flatten(metrics)))

    def log_table(self, name: str, df: pd.DataFrame) -> None:
        """A tidy table as a ``wandb.Table`` under ``name`` (whole, up to :data:`MAX_TABLE_ROWS` rows)."""
        self._guard(f"log table {name!r}", self._log_table, name, df)

    def log_image(self, name: str, path: Path) -> None:
        """A figure file as a ``wandb.Image`` (``.html`` files as ``wandb.Html``)."""
        self._guard(f"log image {name!r}", self._log_image, name, Path(path))

    def finish(self, ok: bool = True) -> None:
        """Mirror what the task did not log, then close the run (exit code 1 when the task failed)."""
        if self._finished:
            return
        self._guard("mirror the run dir", self._mirror_run_dir)
        try:
            self.run.finish(exit_code=0 if ok else 1)
        except Exception as e:  # noqa: BLE001
            log.warning("wandb: finish failed (%s: %s)", type(e).__name__, e)
        self._finished = True
        where = self.run_dir
        if where is not None and getattr(self.run, "offline", False):
            log.info("wandb offline run: %s (upload with `wandb sync %s`)", where, where)

    # ---- internals --------------------------------------------------------------------------------
    def _log_table(self, name: str, df: pd.DataFrame) -> None:
        wandb = self._wandb
        if len(df) > MAX_TABLE_ROWS:
            log.warning("wandb: table %r has %d rows; logging the first %d (the run dir has them all)",
                        name, len(df), MAX_TABLE_ROWS)
            df = df.head(MAX_TABLE_ROWS)
        table = wandb.Table(dataframe=_table_frame(df))
        with _row_limit(wandb.Table, len(df)):
            self.run.log({name: table})
        self._logged_tables.add(name)

    def _log_image(self, name: str, path: Path) -> None:
        wandb = self._wandb
        if path.suffix.lower() == ".html":
            media = wandb.Html(path.read_text(encoding="utf-8"))
        elif path.suffix.lower() in IMAGE_SUFFIXES:
            media = wandb.Image(str(path))
        else:
            log.info("wandb: %s is not an image wandb shows; skipped", path.name)
            return
        self.run.log({name: media})
        self._logged_images.add(str(path.resolve()))

    def _mirror_run_dir(self) -> None:
        """Log the run dir's tables (``*.parquet``/``*.csv``) and PNG figures that were not logged yet."""
        names = sorted({p.stem for p in self.out_dir.glob("*.parquet")} | {p.stem for p in self.out_dir.glob("*.csv")})
        for name in names:
            df = read_table(self.out_dir, name)
            if df is None:
                continue
            if name not in self._logged_tables:
                self.log_table(name, df)
            if name == schema.HEADS.name:
                self.log_metrics(best_head_summary(df))
        # the run's own figures only (a sweep dir also holds its jobs' dirs, which have their own runs)
        for path in sorted(set(self.out_dir.glob("*.png")) | set(self.out_dir.glob("figures/**/*.png"))):
            if str(path.resolve()) in self._logged_images:
                continue
            self.log_image(f"figures/{path.relative_to(self.out_dir).with_suffix('').as_posix()}", path)


def log_sweep_dir(sweep_dir: Path, project: str = "probing", mode: str = "offline",
                  entity: Optional[str] = None) -> Optional[Path]:
    """Mirror a collected sweep dir (``sweep`` and ``failed_jobs`` tables, ``figures/*.png``) into one wandb
    run in the group of the sweep's jobs (``experiment/<sweep dir name>``). Returns the offline run dir, or
    None when wandb could not run (a warning, as everywhere)."""
    from types import SimpleNamespace

    sweep_dir = Path(sweep_dir)
    experiment = "default"
    for cfg_path in sorted(sweep_dir.glob("*/.hydra/config.yaml"))[:1]:
        experiment = read_run_config(cfg_path.parent.parent).get("experiment_name", experiment)
    cfg = SimpleNamespace(project=project, mode=mode, entity=entity, tags=["collect"],
                          group=f"{experiment}/{sweep_dir.name}", run_name=f"collect {sweep_dir.name}")
    config = {"experiment_name": experiment, "task": {"name": "collect"}, "sweep_dir": str(sweep_dir)}
    try:
        tracker = WandbTracker(cfg, config, sweep_dir, job_name="collect")
    except Exception as e:  # noqa: BLE001
        log.warning("wandb could not start (%s: %s); the sweep table is written locally only", type(e).__name__, e)
        return None
    tracker.finish(True)  # finish() mirrors the dir's tables and figures
    return tracker.run_dir


@contextmanager
def _row_limit(table_cls: Any, rows: int) -> Iterator[None]:
    """Raise wandb's per-log row limit for one call (it truncates silently otherwise)."""
    old = table_cls.MAX_ROWS
    table_cls.MAX_ROWS = max(old, rows)
    try:
        yield
    finally:
        table_cls.MAX_ROWS = old
