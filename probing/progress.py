"""Progress bars for loops that can take more than a few seconds: shown on a terminal, silent in logs and
tests (tqdm's ``disable=None``); the tasks log each stage's start and duration, so a log file is never silent."""

from __future__ import annotations

from typing import Iterable, Iterator, Optional, TypeVar

T = TypeVar("T")


def progress(items: Iterable[T], desc: str, total: Optional[int] = None, unit: str = "sent") -> Iterator[T]:
    """``items`` with a tqdm bar on a terminal (none when stderr is not a TTY)."""
    from tqdm.auto import tqdm

    yield from tqdm(items, desc=desc, total=total, unit=unit, disable=None, dynamic_ncols=True, leave=False)
