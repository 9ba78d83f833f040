"""``run(cfg, out_dir)``: one task into one run dir, plain Python, callable from tests and notebooks.

The task returns a :class:`~probing.tasks.base.TaskResult`; this module writes ``metrics.json`` and
``run_meta.json`` from it, the dashboard for the tasks that have one, and mirrors the headline numbers to
the tracker. A new task is a module with ``from_config(cfg, out) -> TaskResult`` and one entry in
:data:`TASKS`. Task modules are imported when their task runs, not at start-up (a heads run does not pay
for the probes' scikit-learn and scipy imports).
"""

from __future__ import annotations

import importlib
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from omegaconf import DictConfig

from probing.compose import check_composed
from probing.config import ReportConfig, RunConfig, TaskName, read_settings
from probing.errors import ProbingError
from probing.io import write_json
from probing.results import read_metrics, write_run_meta
from probing.schema import METRICS_FILE
from probing.tasks.base import RunOutput, TaskResult
from probing.tracking import make_tracker

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Task:
    """A task's entry point and whether its run dir gets a dashboard."""

    from_config: Callable[[RunConfig, RunOutput], TaskResult]
    dashboard: bool = False


def _lazy(module: str) -> Callable[[RunConfig, RunOutput], TaskResult]:
    """``probing.tasks.<module>.from_config``, imported on the first call."""
    def from_config(cfg: RunConfig, out: RunOutput) -> TaskResult:
        return importlib.import_module(f"probing.tasks.{module}").from_config(cfg, out)

    return from_config


TASKS: dict[TaskName, Task] = {
    TaskName.extract: Task(_lazy("extract")),
    TaskName.heads: Task(_lazy("heads"), dashboard=True),
    TaskName.probe: Task(_lazy("probe")),  # sweeps of probes get one dashboard from probing-report
    TaskName.inspect: Task(_lazy("inspect")),
    TaskName.importance: Task(_lazy("importance"), dashboard=True),  # its heatmaps, scatter, pruning curves
    TaskName.patching: Task(_lazy("patching"), dashboard=True),  # its effect maps and atlas
    TaskName.merge: Task(_lazy("merge")),
}


def _write_dashboard(out_dir: Path, report: ReportConfig) -> Optional[Path]:
    """The run's dashboard; a failure here is a warning, the run's tables stand."""
    try:
        from probing.report.dashboard import write_dashboard

        return write_dashboard([out_dir], out_dir / report.file)
    except Exception as e:  # noqa: BLE001 - the report must never cost the results
        log.warning("could not write the dashboard (%s: %s)", type(e).__name__, e)
        return None


def _claim(out_dir: Path, cfg: RunConfig, name: TaskName) -> None:
    """Refuse a run dir that holds another run's results. A probe job re-run into its own sweep dir with the
    same config is not another run (it returns or recomputes its own results)."""
    existing = read_metrics(out_dir)
    if not existing:
        return
    from probing.tasks import probe

    if name is TaskName.probe and existing.get("config_key") == probe.config_key(cfg.model, cfg.data, cfg.extract,
                                                                                 cfg.probe, cfg.seed):
        return
    raise ProbingError(f"{out_dir} already holds the results of another run ({METRICS_FILE}); "
                       "give a new hydra.run.dir (or remove that dir)")


def run(cfg: DictConfig | RunConfig, out_dir: Path, job_name: Optional[str] = None) -> TaskResult:
    """Run the task ``cfg.task.name`` into ``out_dir``; returns its result (metrics as written)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    name = TaskName(cfg.task.name)
    task = TASKS[name]
    check_composed(cfg)
    from probing.encoder import resolved_device  # torch: imported by the run, not by importing this module

    device = resolved_device(cfg.model.device)  # a device this machine lacks fails before any work
    _claim(out_dir, cfg, name)
    container = read_settings(cfg)
    tracker = make_tracker(cfg.logger, container, out_dir, job_name)
    ok = False
    start = time.perf_counter()
    dashboard = None
    try:
        result = task.from_config(cfg, RunOutput(out_dir, tracker))
        result.metrics = {"task": name.value, **result.metrics, "seconds": round(time.perf_counter() - start, 3)}
        write_run_meta(out_dir, task=name.value, seed=cfg.seed, device=device, stores=result.stores,
                       config=container)
        # metrics.json last: it marks a finished run dir (the collector and the dashboard skip runs without it)
        write_json(out_dir / METRICS_FILE, result.metrics)
        if task.dashboard and cfg.report.enabled:
            log.info("dashboard ...")
            t0 = time.perf_counter()
            dashboard = _write_dashboard(out_dir, cfg.report)
            log.info("dashboard: %.1f s", time.perf_counter() - t0)
        tracker.log_metrics({k: v for k, v in result.metrics.items() if isinstance(v, (int, float, str, bool))})
        ok = True
    finally:
        try:
            tracker.finish(ok)
        except Exception as e:  # noqa: BLE001
            log.warning("tracker finish failed: %s", e)
    # after the tracker's own closing lines, so the summary is what the console ends with
    log.info("results: %s", out_dir)
    if result.console:
        log.info("%s", result.console)
    if dashboard is not None:
        log.info("dashboard: %s", dashboard)
    return result
