"""Exceptions a user can see.

Every error here carries one sentence that says what is wrong and, where it helps, what to
do. The CLI prints ``str(error)`` on one line and exits non-zero; it never shows a traceback
for these. One candidate's failure is *not* an exception: it is a ``Measurement`` status.
"""

from __future__ import annotations


class SchedsearchError(Exception):
    """Base class of every user-facing error."""


class WorkloadError(SchedsearchError):
    """The workload file, proc name or sizes cannot be used."""


class ReplayError(SchedsearchError):
    """A schedule step no longer applies to the workload.

    ``step`` is the 0-based index of the failing step and ``reason`` Exo's own message.
    """

    def __init__(self, message: str, step: int = -1, reason: str = "") -> None:
        super().__init__(message)
        self.step = step
        self.reason = reason


class ScheduleFileError(SchedsearchError):
    """A schedule file (JSON) is unreadable or malformed."""


class StoreError(SchedsearchError):
    """The results database cannot be opened or used (wrong file, newer schema, ...)."""


class ToolchainError(SchedsearchError):
    """The C compiler is missing or does not work."""


class ClusterError(SchedsearchError):
    """The Ray cluster cannot be started or reached."""


class SearchError(SchedsearchError):
    """The search cannot proceed (e.g. the unscheduled proc itself fails to build or run)."""
