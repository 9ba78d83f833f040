"""User-facing errors: the CLI prints their message as one line and exits with status 2.

Every message names what the user can fix (a file and line, a config key, a model id); a traceback is
for bugs, never for bad input.
"""

from __future__ import annotations

from typing import Optional


class ProbingError(RuntimeError):
    """A user-facing failure of a task (a bad config value, nothing to analyse, an unusable sentence)."""


class StoreError(ProbingError):
    """An attention store that cannot be read as it is (a damaged or missing shard, a garbage manifest, maps
    that are not finite). ``damaged`` names the shard numbers, so extraction can re-extract just those."""

    def __init__(self, message: str, damaged: tuple[int, ...] = ()):
        super().__init__(message)
        self.damaged = tuple(damaged)


class CorpusError(ValueError):
    """Malformed input, with the file and line that caused it in the message."""

    def __init__(self, message: str, source: str = "", line: Optional[int] = None, reason: str = ""):
        super().__init__(message)
        self.source, self.line, self.reason = source, line, reason or message

    @classmethod
    def at(cls, source: str, line: Optional[int], reason: str) -> "CorpusError":
        """The error for ``reason`` at ``source:line``."""
        where = f"{source}:{line}" if line is not None else source
        return cls(f"{where}: {reason}", source, line, reason)


class ModelLoadError(RuntimeError):
    """The model or tokenizer could not be loaded; the message is one line a user can act on."""


# What the CLI turns into one line (FileNotFoundError: a path the user gave does not exist).
USER_ERRORS: tuple[type[BaseException], ...] = (ProbingError, CorpusError, ModelLoadError, FileNotFoundError)
