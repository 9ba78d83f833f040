"""What every task returns (:class:`TaskResult`) and where it writes (:class:`RunOutput`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import pandas as pd

from probing.results import write_table
from probing.tracking import Tracker


@dataclass
class TaskResult:
    """A task's outcome: ``metrics`` (headline numbers for ``metrics.json``), the attention stores it read
    (for ``run_meta.json``), a console summary printed last, and the tables and figures it wrote."""

    metrics: dict[str, Any]
    stores: list[dict] = field(default_factory=list)
    console: Optional[str] = None
    tables: list[str] = field(default_factory=list)
    figures: list[Path] = field(default_factory=list)


class RunOutput:
    """A run dir and its tracker: every table and figure a task writes goes through here, so it lands in
    the run dir (atomically) and in the tracker, and the result lists it."""

    def __init__(self, out_dir: Path, tracker: Tracker):
        self.dir = Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.tracker = tracker
        self.tables: list[str] = []
        self.figures: list[Path] = []

    def table(self, name: str, df: pd.DataFrame) -> pd.DataFrame:
        """Write ``name.csv`` and ``name.parquet`` (a name of :mod:`probing.schema`) and log it."""
        write_table(df, self.dir, name)
        self.tracker.log_table(name, df)
        self.tables.append(name)
        return df

    def figure(self, path: Path) -> Path:
        """Log a figure the task wrote under the run dir (``figures/<stem>`` in the tracker)."""
        self.tracker.log_image(f"figures/{Path(path).stem}", path)
        self.figures.append(Path(path))
        return path

    def result(self, metrics: dict[str, Any], stores: Optional[list[dict]] = None,
               console: Optional[str] = None) -> TaskResult:
        """The task's result, with the tables and figures written through this output."""
        return TaskResult(metrics, list(stores or []), console, list(self.tables), list(self.figures))
