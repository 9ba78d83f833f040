"""probing: what do the attention heads of transformer models do?

The Python API (imported on first use): ``probing.run(overrides) -> Run``, ``probing.load_run(path) -> Run``,
``probing.open_store(path)``; see :mod:`probing.api`.
"""

from typing import Any

__version__ = "0.1.0"
__all__ = ["run", "load_run", "open_store"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from probing import api

        return getattr(api, name)
    raise AttributeError(f"module 'probing' has no attribute {name!r}")
