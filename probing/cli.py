"""Thin Hydra entry points: parse, dispatch to :mod:`probing.pipeline`, turn user errors into one line."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

from probing.config import register_configs

log = logging.getLogger("probing")
register_configs()

CONF_DIR = str(Path(__file__).resolve().parent.parent / "conf")


def _user_errors() -> tuple[type[BaseException], ...]:
    from probing.corpus import CorpusError
    from probing.encoder import ModelLoadError
    from probing.pipeline import ProbingError

    return (CorpusError, ModelLoadError, ProbingError, FileNotFoundError)


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
def _hydra_main(cfg: DictConfig) -> float | None:
    from hydra.core.hydra_config import HydraConfig

    from probing.pipeline import run

    os.environ.setdefault("WANDB_START_METHOD", "thread")
    hc = HydraConfig.get()
    out_dir = Path(hc.runtime.output_dir)
    try:
        metrics = run(cfg, out_dir, job_name=f"{hc.job.name}-{hc.job.num}" if hc.mode.name == "MULTIRUN" else None)
    except _user_errors() as e:
        log.error("error: %s", e)
        if hc.mode.name == "MULTIRUN":
            raise
        sys.exit(2)
    return metrics.get("objective") if isinstance(metrics, dict) else None


def main() -> None:
    """The ``probing`` command."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    _hydra_main()


def collect_main() -> None:
    """The ``probing-collect`` command: merge a sweep's runs into one table."""
    from probing.probes.collect import main as collect

    collect()


def report_main() -> None:
    """The ``probing-report`` command: one self-contained HTML dashboard from run or sweep dirs."""
    from probing.report.dashboard import main as report

    report()


if __name__ == "__main__":
    main()
