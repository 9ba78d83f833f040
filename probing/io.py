"""Atomic file writes: a file appears whole or not at all (a crash leaves the old file or nothing).

Every writer of the package goes through :class:`AtomicFile`: the store's shards piece by piece, and through
:func:`atomic_write_bytes` their indexes and manifest, the corpus cache, result tables, JSON and HTML pages.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any


def atomic_write_bytes(path: Path, data: "bytes | memoryview | Any") -> None:
    """Write ``data`` (bytes or any contiguous buffer, e.g. a numpy array) to a temporary file beside
    ``path``, flush to disk, then rename over it (:class:`AtomicFile`, for a file written piece by piece)."""
    out = AtomicFile(path)
    try:
        out.write(data)
    except BaseException:
        out.discard()
        raise
    out.commit()


class AtomicFile:
    """A file written piece by piece that appears whole or not at all: the pieces go to a temporary file
    beside ``path`` (``.NAME.PID.tmp``); :meth:`commit` flushes it to disk and renames it over ``path``,
    :meth:`discard` removes it."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        self._file = open(self.tmp, "wb")

    def write(self, data: "bytes | memoryview | Any") -> None:
        self._file.write(data)

    def commit(self) -> None:
        """Flush to disk and rename into place (on failure the temporary file is removed)."""
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
        except BaseException:
            self.discard()
            raise
        self._file.close()
        os.replace(self.tmp, self.path)

    def discard(self) -> None:
        self._file.close()
        self.tmp.unlink(missing_ok=True)


def atomic_write_text(path: Path, text: str) -> None:
    """UTF-8 text, atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def json_clean(obj: Any) -> Any:
    """JSON-safe: NaN/inf -> None, numpy scalars -> Python, enum members -> their values."""
    if isinstance(obj, dict):
        return {str(getattr(k, "value", k)): json_clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_clean(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, (str, bytes)):
        try:
            obj = obj.item()
        except (ValueError, AttributeError):
            pass
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    value = getattr(obj, "value", None)  # a str/int Enum member
    if value is not None and isinstance(obj, (str, int)) and type(obj) not in (str, int, bool):
        return value
    return obj


def write_json(path: Path, obj: Any, indent: int = 2) -> Path:
    """``obj`` as JSON (cleaned by :func:`json_clean`), atomically."""
    atomic_write_bytes(Path(path), json.dumps(json_clean(obj), indent=indent, default=str).encode())
    return Path(path)
