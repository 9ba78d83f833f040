"""The Python API, for notebooks: the command line's runs as objects.

``probing.run(["task=heads", "data.n_sentences=200"])`` composes and checks the overrides exactly as the
``probing`` command does (a mistake is the same one line), runs the task into a new run dir under
``PROBING_RESULTS_DIR`` and returns a :class:`Run`; ``probing.load_run(path)`` opens a finished one. A run shows
itself in Jupyter, gives its config, metrics and tables (``run.table("best_heads")``, names from
:mod:`probing.schema`), and one sentence's maps or vectors with its words (``run.sentence(0, "norm")``).
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd
from omegaconf import OmegaConf

from probing import schema
from probing.errors import ProbingError

TABLES = {t.name: t for t in vars(schema).values() if isinstance(t, schema.Table)}


@dataclass(frozen=True)
class SentenceArrays:
    """One sentence of a store: its words and its array, ``(L, H, n, n)`` maps or ``(layers, n, D)`` /
    ``(L, H, n, d)`` vectors, word positions only (special tokens dropped)."""

    words: tuple[str, ...]
    array: np.ndarray
    what: str


class Run:
    """A run dir: its config, metrics, tables, dashboard and stores."""

    def __init__(self, path: Path | str):
        from probing.results import read_metrics, read_run_config

        self.dir = Path(path)
        if not self.dir.is_dir():
            raise ProbingError(f"{self.dir}: no such run dir")
        self.config: dict = read_run_config(self.dir)
        self.metrics: dict = read_metrics(self.dir)

    @property
    def finished(self) -> bool:
        """``metrics.json`` is written last: a run dir without it failed or is still running."""
        return bool(self.metrics)

    @property
    def tables(self) -> list[str]:
        """The tables this run wrote (names of :mod:`probing.schema`)."""
        return sorted(n for n in TABLES if (self.dir / f"{n}.parquet").is_file() or (self.dir / f"{n}.csv").is_file())

    def table(self, name: str) -> pd.DataFrame:
        """One table by its schema name; a name the run has not written is one line listing those it has."""
        from probing.results import read_table

        df = read_table(self.dir, name) if name in TABLES else None
        if df is None:
            raise ProbingError(f"{self.dir}: no table {name!r}; this run has {', '.join(self.tables) or 'none'}")
        return df

    @property
    def dashboard(self) -> Optional[Path]:
        path = self.dir / ((self.config.get("report") or {}).get("file") or "dashboard.html")
        return path if path.is_file() else None

    def sentence(self, index: int, what: str = "attention") -> SentenceArrays:
        """Sentence ``index`` (the corpus's position) of the run's store of ``what`` (a measure or a
        representation it read or built), with its words."""
        from probing.extract import open_store

        used = [s for s in self._stores() if str(s.get("measure")) == what]
        if not used:
            have = sorted({str(s.get("measure")) for s in self._stores()})
            raise ProbingError(f"{self.dir}: no {what} store recorded in run_meta.json; it read {have or 'none'}")
        record = used[0]
        store = open_store(Path(record["store_dir"]), what)
        if index not in store:
            raise ProbingError(f"{record['store_dir']}: sentence {index} is not in the store ({len(store)} "
                               "sentences; skipped ones are listed in its manifest)")
        return SentenceArrays(self._words(record, index), np.array(store.words(index)), what)

    def _stores(self) -> list[dict]:
        import json

        meta = self.dir / schema.RUN_META_FILE
        return json.loads(meta.read_text()).get("stores", []) if meta.is_file() else []

    def _words(self, record: dict, index: int) -> tuple[str, ...]:
        from probing.config import DataConfig
        from probing.corpus.cache import load_corpus_cached

        data = OmegaConf.merge(OmegaConf.structured(DataConfig), self.config.get("data") or {})
        cache = (self.config.get("extract") or {}).get("cache_dir", "results/cache")
        corpus = load_corpus_cached(data, record.get("split") or None, cache)
        return tuple(corpus[index].words)

    def _repr_html_(self) -> str:
        task = (self.config.get("task") or {}).get("name", "?")
        model = (self.config.get("model") or {}).get("name", "?")
        data = (self.config.get("data") or {}).get("name", "?")
        headline = {k: v for k, v in self.metrics.items() if isinstance(v, (int, float, str)) and not
                    isinstance(v, bool)}
        rows = "".join(f"<tr><td>{html.escape(str(k))}</td><td>{html.escape(str(v))}</td></tr>"
                       for k, v in list(headline.items())[:12])
        link = f"<p>dashboard: <a href='{self.dashboard}'>{self.dashboard}</a></p>" if self.dashboard else ""
        return (f"<div><b>probing run</b> task={html.escape(str(task))} model={html.escape(str(model))} "
                f"data={html.escape(str(data))}<br><code>{html.escape(str(self.dir))}</code>"
                f"{'' if self.finished else ' (unfinished)'}<table>{rows}</table>"
                f"<p>tables: {', '.join(self.tables)}</p>{link}</div>")

    def __repr__(self) -> str:
        return f"Run({str(self.dir)!r})"


def run(overrides: Sequence[str] = ()) -> Run:
    """Compose and check ``overrides`` as the ``probing`` command does, run the task into a new run dir (under
    ``PROBING_RESULTS_DIR``, named like the command line's) and return it."""
    from probing.compose import compose_run, run_dir
    from probing.config import read_settings
    from probing.io import atomic_write_text
    from probing.tasks.run import run as run_task

    cfg = compose_run(overrides)
    out = run_dir(cfg)
    (out / ".hydra").mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / ".hydra" / "config.yaml", OmegaConf.to_yaml(OmegaConf.create(read_settings(cfg))))
    atomic_write_text(out / ".hydra" / "overrides.yaml", OmegaConf.to_yaml(OmegaConf.create(list(overrides))))
    run_task(cfg, out)
    return Run(out)


def load_run(path: Path | str) -> Run:
    """A run dir written by ``probing`` or :func:`run`."""
    return Run(path)


def open_store(path: Path | str, what: str = "attention") -> Any:
    """The store in ``path`` (a store directory under the cache): ``AttentionStore`` or ``VectorStore``."""
    from probing.extract import open_store as _open

    return _open(Path(path), what)
