"""``task=extract``: build (or find) the attention store of the run's corpus and say what it holds."""

from __future__ import annotations

import logging

from probing.config import DataConfig, ExtractConfig, ModelConfig, RunConfig
from probing.corpus.cache import load_corpus_cached
from probing.extract import ensure_store
from probing.tasks.base import RunOutput, TaskResult
from probing.tasks.store_summary import describe_part, describe_store, part_metrics, store_use

log = logging.getLogger(__name__)


def run(model: ModelConfig, data: DataConfig, extract: ExtractConfig) -> TaskResult:
    """Extract ``data`` (its ``data.split``) with ``model`` under ``extract``; the model loads only when
    the store has to be built."""
    corpus = load_corpus_cached(data, None, extract.cache_dir)
    report = ensure_store(model, corpus, extract, partial=True)
    if extract.partition is not None:
        part = part_metrics(report, corpus, extract)
        if not report.complete:
            return TaskResult(part, console=describe_part(part))
    log.info(describe_store(report, corpus))
    store = report.store
    metrics = {"store": str(store.dir), "sentences": len(store), "skipped": len(store.skipped),
               "malformed_skipped": len(corpus.skipped), "store_mb": store.size_bytes() / 2**20,
               "reused": report.reused}
    if extract.partition is not None:
        metrics.update(part)
    return TaskResult(metrics, [store_use(report, corpus)])


def from_config(cfg: RunConfig, out: RunOutput) -> TaskResult:
    return run(cfg.model, cfg.data, cfg.extract)
