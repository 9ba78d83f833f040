"""Trackers mirror a run dir to an experiment tracker. ``none`` does nothing; ``wandb`` is imported lazily.

A tracker never makes a run fail: every tracker error becomes a warning and the local results stand.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping, Optional, Protocol

import pandas as pd

from probing.config import LoggerConfig, LoggerMode, LoggerName

log = logging.getLogger(__name__)


class Tracker(Protocol):
    def log_metrics(self, metrics: Mapping[str, Any]) -> None: ...
    def log_table(self, name: str, df: pd.DataFrame) -> None: ...
    def log_image(self, name: str, path: Path) -> None: ...
    def finish(self, ok: bool = True) -> None: ...


class NoTracker:
    """The ``logger=none`` tracker."""

    def log_metrics(self, metrics: Mapping[str, Any]) -> None:
        pass

    def log_table(self, name: str, df: pd.DataFrame) -> None:
        pass

    def log_image(self, name: str, path: Path) -> None:
        pass

    def finish(self, ok: bool = True) -> None:
        pass


def make_tracker(cfg: LoggerConfig, config: Mapping[str, Any], out_dir: Path, job_name: Optional[str]) -> Tracker:
    """The tracker a :class:`~probing.config.LoggerConfig` asks for (``NoTracker`` when it cannot start)."""
    if cfg.name == LoggerName.none or cfg.mode == LoggerMode.disabled:
        return NoTracker()
    if cfg.name == LoggerName.wandb:
        try:
            from probing.tracking.wandb_run import WandbTracker  # lazily: wandb is slow to import

            return WandbTracker(cfg, config, out_dir, job_name)
        except Exception as e:  # noqa: BLE001 - a tracker must never fail the run
            log.warning("wandb could not start (%s: %s); results are written locally only", type(e).__name__, e)
            return NoTracker()
    log.warning("unknown logger %r; results are written locally only", cfg.name)
    return NoTracker()
