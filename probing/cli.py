"""The command lines: ``probing`` (Hydra), ``probing-collect`` and ``probing-report`` (argparse).

Thin: parse, call :func:`probing.tasks.run.run`, :func:`probing.sweep.write_collection` or
:func:`probing.report.dashboard.write_dashboard`, and turn user errors into one line and exit status 2.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

import hydra
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from probing.compose import CONF_DIR
from probing.config import register_configs
from probing.errors import USER_ERRORS, ProbingError
from probing.schema import FAILED_FILE, METRICS_FILE

log = logging.getLogger("probing")
register_configs()

@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
def _hydra_main(cfg: DictConfig) -> float | None:
    from hydra.core.hydra_config import HydraConfig

    from probing.tasks.run import run

    os.environ.setdefault("WANDB_START_METHOD", "thread")
    hc = HydraConfig.get()
    out_dir = Path(hc.runtime.output_dir)
    if hc.output_subdir:
        _save_read_settings(out_dir / hc.output_subdir / "config.yaml", cfg)
    multirun = hc.mode.name == "MULTIRUN"
    # a dir holding only what Hydra has just written is this run's own: a failed run removes it
    fresh = {p.name for p in out_dir.iterdir()} <= {hc.output_subdir, f"{hc.job.name}.log"}
    quieted = _quiet_console() if multirun else []
    try:
        result = run(cfg, out_dir, job_name=f"{hc.job.name}-{hc.job.num}" if multirun else None)
    except (*USER_ERRORS, OSError) as e:
        if isinstance(e, OSError) and e.filename is not None:  # a folder that cannot be written (or read)
            line = (f"{e.filename}: {e.strerror} (check that the folder exists and is writable: PROBING_CACHE_DIR, "
                    "PROBING_RESULTS_DIR, hydra.run.dir)")
        else:
            line = str(e)
        log.error("error: %s", line)
        if multirun:  # the job's one line, kept for the sweep's summary (SweepSummary); the other jobs go on
            (out_dir / FAILED_FILE).write_text(line + "\n")
            return None
        if fresh:  # nothing that looks like a run is left behind: the error line is all the run had to say
            _drop_run_dir(out_dir)
        sys.exit(2)
    except Exception as e:  # a bug: its traceback follows; the dir keeps its log, marked failed
        if not (out_dir / METRICS_FILE).is_file():
            (out_dir / FAILED_FILE).write_text(f"{type(e).__name__}: {e}".splitlines()[0][:300] + "\n")
        raise
    finally:
        for handler, level in quieted:
            handler.setLevel(level)
    if multirun:
        print(f"  job {hc.job.num}: {job_line(result.console)}", flush=True)
    return result.metrics.get("objective")  # the sweeper's objective (a probe's headline score)


def _drop_run_dir(out_dir: Path) -> None:
    """Remove a failed run's dir, with the log files Hydra keeps open in it."""
    root = logging.getLogger()
    for h in list(root.handlers):
        if isinstance(h, logging.FileHandler) and Path(h.baseFilename).parent == out_dir.resolve():
            root.removeHandler(h)
            h.close()
    shutil.rmtree(out_dir, ignore_errors=True)


def _quiet_console() -> list[tuple[logging.Handler, int]]:
    """A sweep's job shows only its warnings and errors on the console (its whole log stays in the job's log
    file) and then one line (:func:`job_line`); returns the console handlers with the levels to restore."""
    handlers = [h for h in logging.getLogger().handlers
                if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)]
    quieted = [(h, h.level) for h in handlers]
    for h in handlers:
        h.setLevel(max(h.level, logging.WARNING))
    return quieted


def job_line(console: Optional[str]) -> str:
    """A finished sweep job on the console: its summary when that is one line (a probe's scores), else
    "finished" (a table such as the best heads stays in the job's log and dashboard)."""
    return console if console and "\n" not in console.strip() else "finished"


def _save_read_settings(path: Path, cfg: DictConfig) -> None:
    """Hydra's saved config without the sections the task does not read (they are None)."""
    from omegaconf import OmegaConf

    from probing.config import read_settings
    from probing.io import atomic_write_text

    atomic_write_text(path, OmegaConf.to_yaml(OmegaConf.create(read_settings(cfg))))


class SweepSummary(Callback):
    """Ends a multirun with its directory, the jobs that failed with their one line each, and the next command;
    exit status 2 when a job failed (registered in conf/config.yaml under hydra.callbacks)."""

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from probing.results import read_metrics

        sweep = Path(config.hydra.sweep.dir)
        jobs = sorted((p for p in sweep.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name)) \
            if sweep.is_dir() else []
        failed = [(j.name, (j / FAILED_FILE).read_text().strip()) for j in jobs if (j / FAILED_FILE).is_file()]
        print(f"sweep: {sweep} ({len(jobs)} jobs, {len(failed)} failed)", flush=True)
        by_line: dict[str, list[str]] = {}
        for name, line in failed:  # jobs that failed alike share one line
            by_line.setdefault(line, []).append(name)
        for line, names in by_line.items():
            print(f"  {'job' if len(names) == 1 else 'jobs'} {_ranges([int(n) for n in names])}: {line}", flush=True)
        tasks = {read_metrics(j).get("task") for j in jobs if (j / METRICS_FILE).is_file()}
        print(next_step(sweep, tasks, f"{config.hydra.job.name}.log"), flush=True)
        if failed:
            sys.exit(2)


def next_step(sweep: Path, tasks: set[str], log_name: str) -> str:
    """The command that shows a sweep whose finished jobs ran ``tasks``: probe jobs are collected (one table,
    layer x head heatmaps) and then reported; jobs whose run dir has a dashboard (heads, importance) are reported
    side by side; other jobs' metrics are collected into one table."""
    from probing.config import TaskName
    from probing.tasks.run import TASKS

    if not tasks:
        return f"next: nothing to collect (no job finished; each job's log: {sweep}/<job>/{log_name})"
    if TaskName.probe.value in tasks:
        return f"next: probing-collect {sweep} && probing-report {sweep}"
    if all(TASKS[TaskName(t)].dashboard for t in tasks):
        return f"next: probing-report {sweep}"
    return f"next: probing-collect {sweep}"


def _ranges(numbers: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2, 5"``."""
    numbers = sorted(numbers)
    spans: list[list[int]] = []
    for n in numbers:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(f"{a}-{b}" if b > a else f"{a}" for a, b in spans)


def _writable(folder: Path) -> Optional[str]:
    """Why results cannot be written under ``folder`` (None when they can): checked before Hydra makes the
    run dir, whose own failure is a traceback."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".probing-write-check-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        return f"{e.filename or folder}: {e.strerror}"
    return None


def _overrides(argv: Sequence[str]) -> list[str]:
    """The ``KEY=VALUE`` arguments of a ``probing`` command line (Hydra's flags and their values left out)."""
    return [a for a in argv if "=" in a and not a.startswith("-")]


def main() -> None:
    """The ``probing`` command: its overrides are composed and checked first (one line for a mistake), then
    Hydra runs the job(s)."""
    from probing.compose import compose_run, expand_shorthand, help_text

    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = sys.argv[1:]
    if any(a in ("--help", "-h") for a in args):
        print(help_text())
        return
    try:
        given = _overrides(args)
        expanded = expand_shorthand(given)
        sys.argv = [sys.argv[0]] + [a for a in args if a not in given] + expanded
        compose_run(expanded)
    except ProbingError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    if not any(a in ("--hydra-help", "--cfg", "-c", "--info") for a in args):
        given = [a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith(("hydra.run.dir=", "hydra.sweep.dir="))]
        for folder in given or [os.environ.get("PROBING_RESULTS_DIR", "results")]:
            problem = _writable(Path(folder))
            if problem:
                print(f"error: cannot write results: {problem} (set PROBING_RESULTS_DIR or hydra.run.dir to a "
                      "writable folder)", file=sys.stderr)
                sys.exit(2)
    _hydra_main()


def collect_main(argv: Optional[Sequence[str]] = None) -> None:
    """``probing-collect SWEEP_DIR [--out DIR] [--wandb offline|online]``: merge a sweep's jobs into one table."""
    from probing.sweep import write_collection

    ap = argparse.ArgumentParser(prog="probing-collect",
                                 description="Merge a Hydra sweep's jobs into one tidy table and heatmaps.")
    ap.add_argument("sweep_dir", type=Path, help="a Hydra multirun dir (hydra.sweep.dir)")
    ap.add_argument("--out", type=Path, default=None, help="where sweep.csv/.parquet and figures go "
                                                           "(default: the sweep dir)")
    ap.add_argument("--wandb", choices=["offline", "online"], default=None,
                    help="also log the merged table and heatmaps as one wandb run in the sweep's group")
    ap.add_argument("--wandb-project", default="probing")
    args = ap.parse_args(argv)
    try:
        s = write_collection(args.sweep_dir, args.out)
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    print(f"{s['complete']} of {s['jobs']} jobs complete; {s['rows']} rows -> "
          f"{s['out']}/sweep.csv, sweep.parquet")
    print(f"swept keys: {', '.join(s['swept']) or '(none)'}; "
          f"{len(s['figures'])} heatmaps in {s['out']}/figures")
    if s["failed"]:
        print(f"failed or incomplete ({len(s['failed'])}): {', '.join(s['failed'])} (see failed_jobs.csv)")
    if args.wandb:
        from probing.tracking.wandb_run import log_sweep_dir

        run_dir = log_sweep_dir(Path(s["out"]), project=args.wandb_project, mode=args.wandb)
        print(f"wandb ({args.wandb}): {run_dir}" if run_dir else "wandb: not logged (see the warning above)")


def cache_main(argv: Optional[Sequence[str]] = None) -> None:
    """``probing-cache [list | remove KEY... | prune --days N] [--dir CACHE]``: see and prune the store cache."""
    import time

    from probing.corpus.cache import CORPORA_DIR
    from probing.store.cache import remove, scan, select

    ap = argparse.ArgumentParser(prog="probing-cache", description="List the stores of the cache (model, corpus, "
                                 "what they hold, sentences, size, last use) and remove them by key or by age.")
    ap.add_argument("action", choices=["list", "remove", "prune"], nargs="?", default="list")
    ap.add_argument("keys", nargs="*", help="remove: store keys or directory names (probing-cache list shows them)")
    ap.add_argument("--days", type=float, default=None, help="prune: stores unused for more than this many days")
    ap.add_argument("--dir", type=Path, default=Path(os.environ.get("PROBING_CACHE_DIR", "results/cache")))
    args = ap.parse_args(argv)
    stores = scan(args.dir, skip=frozenset({CORPORA_DIR}))
    if args.action == "list":
        total = sum(s.bytes for s in stores)
        print(f"{args.dir}: {len(stores)} stores, {total / 2**20:.1f} MiB")
        for s in stores:
            used = time.strftime("%Y-%m-%d %H:%M", time.localtime(s.last_used))
            print(f"  {s.key or '(incomplete)':16s} {s.model:20s} {s.corpus} {s.split:6s} {s.what:22s} "
                  f"{s.sentences:7d} sentences {s.bytes / 2**20:9.1f} MiB  used {used}  {s.dir.name}")
        parsed = sorted((args.dir / CORPORA_DIR).glob("*.pkl"))
        if parsed:
            print(f"{args.dir / CORPORA_DIR}: {len(parsed)} parsed corpora (CoNLL-U files parsed once, again when the "
                  f"file changes), {sum(p.stat().st_size for p in parsed) / 2**20:.1f} MiB")
        return
    if args.action == "prune" and args.days is None:
        print("error: probing-cache prune needs --days N (stores unused for more than N days)", file=sys.stderr)
        sys.exit(2)
    try:
        chosen = select(stores, args.keys, args.days)
        for s in chosen:
            remove(s)
            print(f"removed {s.dir} ({s.bytes / 2**20:.1f} MiB)")
    except ProbingError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    print(f"{len(chosen)} stores removed")


def report_main(argv: Optional[Sequence[str]] = None) -> None:
    """``probing-report DIR [DIR...] [--out FILE]``: one self-contained HTML dashboard of runs and sweeps."""
    from probing.report.dashboard import default_out, write_dashboard

    parser = argparse.ArgumentParser(prog="probing-report",
                                     description="One self-contained HTML dashboard comparing runs and sweeps.")
    parser.add_argument("dirs", nargs="+", type=Path, help="run dirs or sweep dirs (results/<experiment>/...)")
    parser.add_argument("--out", type=Path, default=None,
                        help="the HTML file (default: DIR/dashboard.html for one dir; for several, a new file in "
                             "$PROBING_RESULTS_DIR, default results/)")
    parser.add_argument("--title", default=None)
    parser.add_argument("--relations", default=None,
                        help="comma-separated relations to show in the heads section (default: all)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    relations = [r.strip() for r in args.relations.split(",") if r.strip()] if args.relations else None
    try:
        path = write_dashboard(args.dirs, args.out or default_out(args.dirs), args.title, relations)
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    print(path.resolve())


if __name__ == "__main__":
    main()
