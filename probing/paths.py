"""Paths from config: relative ones are relative to where the user started the command."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional


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


def user_cache(configured: Optional[str], env: str, name: str) -> Path:
    """A cache folder: the configured path, else ``$<env>``, else the user's cache dir (``$XDG_CACHE_HOME`` or
    ``~/.cache``) ``/probing/<name>``."""
    chosen = configured or os.environ.get(env)
    if chosen:
        return Path(absolute(chosen))
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "probing" / name
