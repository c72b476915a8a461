"""Import the notebook libraries only when a feature needs them, with a useful hint."""

from __future__ import annotations

import importlib
from types import ModuleType


def require(module: str) -> ModuleType:
    """Import ``module`` or raise ImportError naming the extra that provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"{module} is needed for this; install the notebook extra: pip install 'schedsearch[notebook]'"
        ) from exc
