"""schedsearch: find fast schedules for Exo procedures automatically.

The Python front door (``schedsearch.api``), imported on first use so that ``import
schedsearch`` stays cheap::

    result = schedsearch.tune(sgemm, {"M": 256, "N": 256, "K": 256}, budget=60)
    tuned = schedsearch.apply(sgemm, {"M": 256, "N": 256, "K": 256})
    again = schedsearch.load_schedule("sgemm.json").apply(sgemm)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: Public names and the module that defines each one.
_LAZY = {
    "tune": "schedsearch.api",
    "resume": "schedsearch.api",
    "apply": "schedsearch.api",
    "load_schedule": "schedsearch.api",
    "TuneResult": "schedsearch.api",
    "LoadedSchedule": "schedsearch.api",
    "SearchSettings": "schedsearch.api",
    "SettingError": "schedsearch.api",
    "SchedsearchError": "schedsearch.errors",
    "WorkloadError": "schedsearch.errors",
    "NoScheduleError": "schedsearch.errors",
}

__all__ = ["__version__", *_LAZY]

if TYPE_CHECKING:
    # for type checkers: at run time ``__getattr__`` imports these on first use
    from schedsearch.api import (  # noqa: F401
        LoadedSchedule,
        SearchSettings,
        SettingError,
        TuneResult,
        apply,
        load_schedule,
        resume,
        tune,
    )
    from schedsearch.errors import NoScheduleError, SchedsearchError, WorkloadError  # noqa: F401


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'schedsearch' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
