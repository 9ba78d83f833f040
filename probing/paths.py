"""Paths from config: relative ones are relative to where the user started the command."""

from __future__ import annotations

from pathlib import Path


def absolute(path: str) -> str:
    """Resolve ``path`` against the original working directory (Hydra's, when inside a Hydra run)."""
    p = Path(path).expanduser()
    if p.is_absolute():
        return str(p)
    try:
        from hydra.utils import get_original_cwd

        base = Path(get_original_cwd())
    except (ImportError, ValueError):
        base = Path.cwd()
    return str((base / p).resolve())
