"""What every task returns (:class:`TaskResult`), where it writes (:class:`RunOutput`), how it times its stages
(:class:`StageTimer`) and how it cuts one corpus into train and eval (:func:`holdout`)."""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional

import pandas as pd

from probing.config import DataConfig, DataKind, SplitSettings
from probing.errors import ProbingError
from probing.results import write_table
from probing.tracking import Tracker

log = logging.getLogger(__name__)

# Readers without splits: a task that trains holds out the last ``eval_fraction`` of the one corpus.
SINGLE_SPLIT_KINDS = frozenset({DataKind.grammar, DataKind.conllu, DataKind.text})


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


class StageTimer:
    """Logs each stage's start and duration (a log is never silent for long) and records its seconds, which a
    task reports as ``stage_seconds`` in ``metrics.json``."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str, what: Optional[str] = None) -> Iterator[None]:
        log.info("%s ...", what or name)
        t0 = time.perf_counter()
        yield
        self.seconds[name] = time.perf_counter() - t0
        log.info("%s: %.1f s", name, self.seconds[name])

    def metrics(self) -> dict[str, dict[str, float]]:
        return {"stage_seconds": {k: round(v, 2) for k, v in self.seconds.items()}}


def one_corpus(data: DataConfig, splits: SplitSettings) -> bool:
    """Train and eval come from one corpus: a single-split source, or ``train_split == eval_split``."""
    return DataKind(data.kind) in SINGLE_SPLIT_KINDS or splits.train_split == splits.eval_split


def holdout(n: int, splits: SplitSettings, section: str) -> int:
    """Where the held-out part of ``n`` sentences starts: the last ``eval_fraction`` is evaluated, the rest
    trains (``section``: the config section named in an error)."""
    if not 0 < splits.eval_fraction < 1:
        raise ProbingError(f"{section}.eval_fraction={splits.eval_fraction} must be between 0 and 1")
    cut = int(round(n * (1 - splits.eval_fraction)))
    if cut < 1 or cut >= n:
        raise ProbingError(f"{n} sentences cannot be split into train and eval "
                           f"({section}.eval_fraction={splits.eval_fraction})")
    return cut
