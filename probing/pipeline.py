"""``run(cfg, out_dir)``: the stages in order, plain Python, callable from tests and notebooks.

corpus -> encoder -> attention store -> analyses / probes -> tables -> trackers and the report.
"""

from __future__ import annotations

import logging
import time
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Callable, Optional

from omegaconf import DictConfig

from probing.config import enum_value, to_plain
from probing.corpus import Corpus
from probing.corpus.cache import load_corpus_cached
from probing.encoder import load_encoder, model_identity, resolved_device
from probing.extract import ExtractReport, extract
from probing.results import write_json, write_run_meta
from probing.tracking import Tracker, make_tracker

log = logging.getLogger(__name__)


class ProbingError(RuntimeError):
    """A user-facing failure: the CLI prints its message as one line and exits with status 2."""


# a task's closing summary in its returned metrics: printed last, never written to metrics.json
CONSOLE_KEY = "_console"

# the stores a run reads, for run_meta.json (set by run(); tasks need not pass it around)
_STORES_USED: ContextVar[Optional[list]] = ContextVar("stores_used", default=None)


def ensure_store(model_cfg: Any, corpus: Corpus, extract_cfg: Any) -> ExtractReport:
    """The attention store of ``corpus`` for this model and extraction config; the model is loaded only
    when the store has to be built."""
    identity = model_identity(model_cfg.name_or_path, model_cfg.revision, model_cfg.dtype)
    report = extract(lambda: load_encoder(model_cfg), corpus, extract_cfg, identity=identity,
                     model_name=model_cfg.name)
    used = _STORES_USED.get()
    if used is not None:
        # the fingerprint the store was keyed by (hashing the corpus again would repeat that work)
        used.append({"corpus": corpus.name, "split": corpus.split,
                     "corpus_fingerprint": report.store.manifest["inputs"]["corpus"],
                     "store_key": report.store.key, "store_dir": str(report.store.dir), "reused": report.reused,
                     "sentences": len(report.store), "skipped": len(report.store.skipped)})
    return report


def describe_store(report: ExtractReport, corpus: Corpus) -> str:
    """A few lines saying where the store is and what it holds."""
    store = report.store
    lines = [
        f"attention store: {store.dir}",
        f"  {'reused (already built)' if report.reused else 'built'}: {len(store)} of {store.n_sentences} sentences"
        f" from {corpus.name} {corpus.split}, {store.num_layers} layers x {store.num_heads} heads,"
        f" {store.manifest['store_dtype']}, {store.size_bytes() / 2**20:.1f} MiB on disk",
    ]
    if not report.reused:
        lines.append(f"  extracted {report.extracted} sentences in {report.seconds:.1f} s"
                     f" ({report.sentences_per_second:.1f} sentences/s)"
                     + (f"; resumed after {report.resumed_from} already done" if report.resumed_from else ""))
    skipped = store.skipped
    if skipped:
        kinds: dict[str, int] = {}
        for s in skipped:
            kinds[s["kind"]] = kinds.get(s["kind"], 0) + 1
        lines.append(f"  skipped {len(skipped)}: " + ", ".join(f"{v} {k}" for k, v in kinds.items()))
        for s in skipped[:5]:
            lines.append(f"    sentence {s['id']}: {s['reason']}")
    if corpus.skipped:
        lines.append(f"  malformed sentences skipped while reading (data.strict=false): {len(corpus.skipped)} "
                     + str(corpus.skip_summary()))
        for s in corpus.skipped[:5]:
            lines.append(f"    {s}")
    return "\n".join(lines)


def load_main_corpus(cfg: Any) -> Corpus:
    """The run's corpus (``data.split``); parsed treebanks are cached beside the stores."""
    corpus = load_corpus_cached(cfg.data, None, cfg.extract.cache_dir)
    if corpus.skipped:
        log.warning("data.strict=false: skipped %d malformed sentences %s", len(corpus.skipped),
                    corpus.skip_summary())
    return corpus


def task_extract(cfg: Any, out_dir: Path, tracker: Tracker) -> dict:
    corpus = load_main_corpus(cfg)
    report = ensure_store(cfg.model, corpus, cfg.extract)
    log.info(describe_store(report, corpus))
    return {"store": str(report.store.dir), "sentences": len(report.store), "skipped": len(report.store.skipped),
            "malformed_skipped": len(corpus.skipped), "store_mb": report.store.size_bytes() / 2**20,
            "reused": report.reused}


def task_heads(cfg: Any, out_dir: Path, tracker: Tracker) -> dict:
    from probing.analysis.task import run_heads

    corpus = load_main_corpus(cfg)
    report = ensure_store(cfg.model, corpus, cfg.extract)
    log.info(describe_store(report, corpus))
    return run_heads(cfg, corpus, report.store, out_dir, tracker)


def task_probe(cfg: Any, out_dir: Path, tracker: Tracker) -> dict:
    from probing.probes.task import run_probe

    return run_probe(cfg, out_dir, tracker)


def task_inspect(cfg: Any, out_dir: Path, tracker: Tracker) -> dict:
    from probing.report.inspect import run_inspect

    return run_inspect(cfg, out_dir)


TASKS: dict[str, Callable[[Any, Path, Tracker], dict]] = {
    "extract": task_extract, "heads": task_heads, "probe": task_probe, "inspect": task_inspect,
}


REPORTED_TASKS = ("heads",)  # sweeps of probes get one dashboard from probing-report


def _write_report(out_dir: Path, report_cfg: Any) -> None:
    """The run's dashboard; a failure here is a warning, the run's tables stand."""
    try:
        from probing.report.dashboard import write_dashboard

        path = write_dashboard([out_dir], out_dir / report_cfg.file)
        log.info("dashboard: %s", path)
    except Exception as e:  # noqa: BLE001 - the report must never cost the results
        log.warning("could not write the dashboard (%s: %s)", type(e).__name__, e)


def run(cfg: DictConfig, out_dir: Path, job_name: Optional[str] = None) -> dict:
    """Run the task ``cfg.task.name`` into ``out_dir``; returns the headline metrics."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    task = enum_value(cfg.task.name)
    container = to_plain(cfg)
    tracker = make_tracker(cfg.logger, container, out_dir, job_name)
    ok = False
    start = time.perf_counter()
    stores: list[dict] = []
    token = _STORES_USED.set(stores)
    try:
        metrics = TASKS[task](cfg, out_dir, tracker)
        console = metrics.pop(CONSOLE_KEY, None)
        metrics = {"task": task, **metrics, "seconds": round(time.perf_counter() - start, 3)}
        write_json(out_dir / "metrics.json", metrics)
        write_run_meta(out_dir, task=task, seed=cfg.seed, device=resolved_device(cfg.model.device),
                       stores=stores, config=container)
        if task in REPORTED_TASKS and cfg.report.enabled:
            _write_report(out_dir, cfg.report)
        log.info("results: %s", out_dir)
        if console:
            log.info("%s", console)
        tracker.log_metrics({k: v for k, v in metrics.items() if isinstance(v, (int, float, str, bool))})
        ok = True
        return metrics
    finally:
        _STORES_USED.reset(token)
        try:
            tracker.finish(ok)
        except Exception as e:  # noqa: BLE001
            log.warning("tracker finish failed: %s", e)
