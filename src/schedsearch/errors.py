"""Exceptions a user can see.

Every error here carries one sentence that says what is wrong and, where it helps, what to
do. The CLI prints ``str(error)`` on one line and exits non-zero; it never shows a traceback
for these. One candidate's failure is *not* an exception: it is a ``Measurement`` status.
"""

from __future__ import annotations


class SchedsearchError(Exception):
    """Base class of every user-facing error.

    ``search_id`` is set when the error stopped a recorded search (the search is then
    marked failed and can be resumed once the cause is fixed).
    """

    search_id: int | None = None


class WorkloadError(SchedsearchError):
    """The workload file, proc name or sizes cannot be used."""


class SettingError(SchedsearchError, ValueError):
    """A search setting's value is not one it can take, or no setting has that name (the
    message names it and says what it takes)."""


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


class NotFoundError(StoreError):
    """The database holds no search or candidate with the id asked for (a reader shows
    "not found"; the CLI exits 2, as for every StoreError)."""


class SearchBusyError(StoreError):
    """Another driver, alive, holds the search's lease: it is being run (``resume``
    refuses; the CLI exits 2, as for every StoreError)."""


class LeaseLostError(SchedsearchError):
    """This driver's lease on its search was taken over (its heartbeat had stopped long
    enough for another driver to presume it dead): it stops and writes nothing more to the
    search. Not a StoreError: the search is not marked failed, it is someone else's now."""


class InfrastructureError(SchedsearchError):
    """The machine cannot build or run kernels for a reason that is no candidate's fault:
    a full disk, a compiler killed by a signal, a missing linker, an unwritable or unsafe
    build cache. It stops a search (marked failed, resumable); no candidate is blamed."""


class ToolchainError(InfrastructureError):
    """The C compiler is missing or does not work."""


class UntrustedSourceError(SchedsearchError):
    """Code named by data (a schedule file, a database row) is not allowed to run:
    it lies outside the allowed folders or its content does not match the recorded hash."""


class UntrustedConfigError(UntrustedSourceError):
    """A setting read from a database would choose what runs (a compiler command, compiler
    flags) and differs from what the user gave: it is not used."""


class LimitError(WorkloadError):
    """Sizes or a schedule exceed what this machine (or a 64-bit integer) can hold."""


class ClusterError(SchedsearchError):
    """The Ray cluster cannot be started or reached."""


class SearchError(SchedsearchError):
    """The search cannot proceed (e.g. the unscheduled proc itself fails to build or run)."""


class SearchCompletedError(SchedsearchError):
    """A completed search was asked to continue without more budget."""


class NoScheduleError(SchedsearchError):
    """No measured schedule is known for a workload (on this machine, for this target)."""
