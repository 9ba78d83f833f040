"""``task=merge``: make the stores of a corpus extracted in parts whole, without loading the model.

Every part of every store that ``extract`` names (``extract.partitions`` of them) must be done; each is checked
against the store's fingerprint (model, corpus, settings) and the others' batching before its shards are linked
into the store. The last part of a multirun to finish merges by itself; this task is for parts built apart (or
copied together from several machines), and to check that a store is whole.
"""

from __future__ import annotations

import logging

from probing.config import DataConfig, ExtractConfig, HeadsConfig, ModelConfig, RunConfig
from probing.corpus.cache import load_corpus_cached
from probing.extract import merge_stores
from probing.heads.statistics import statistics
from probing.tasks.base import RunOutput, TaskResult
from probing.tasks.store_summary import describe_store, store_use

log = logging.getLogger(__name__)


def run(model: ModelConfig, data: DataConfig, extract: ExtractConfig, heads: HeadsConfig) -> TaskResult:
    corpus = load_corpus_cached(data, None, extract.cache_dir)
    report = merge_stores(model, corpus, extract, statistics(corpus, heads))
    text = describe_store(report, corpus)
    log.info(text)
    stores = {str(m): str(s.dir) for m, s in report.stores.items()}
    metrics = {"stores": stores, "sentences": len(report.store), "skipped": len(report.store.skipped),
               "partitions": extract.partitions, "merged": not report.reused}
    return TaskResult(metrics, [store_use(report, corpus)],
                      console=("merged" if not report.reused else "already whole") + f": {text}")


def from_config(cfg: RunConfig, out: RunOutput) -> TaskResult:
    return run(cfg.model, cfg.data, cfg.extract, cfg.heads)
