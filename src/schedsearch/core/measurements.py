"""How a candidate was measured: its timing statistics, the measuring setup, and the
measurement as a whole (a failure is a status, never an exception).

Frozen, slotted dataclasses; each round-trips through JSON (``codec``). Standard library only."""

from __future__ import annotations

from dataclasses import dataclass

# Imported at run time, not under TYPE_CHECKING: the codec resolves the records'
# annotations by name in this module (``codec.decode``).
from schedsearch.core.codec import JsonRecord
from schedsearch.core.enums import Status
from schedsearch.core.values import sha256_text


@dataclass(frozen=True, slots=True)
class Timing(JsonRecord):
    """Seconds per kernel call. Each sample repeats the call ``inner`` times."""

    median: float
    min: float
    q1: float
    q3: float
    samples: tuple[float, ...] = ()
    inner: int = 1

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @property
    def spread(self) -> float:
        """IQR relative to the median."""
        return self.iqr / self.median if self.median > 0 else 0.0


@dataclass(frozen=True, slots=True)
class MachineInfo(JsonRecord):
    """Where and how a measurement was taken."""

    cpu_model: str = ""
    cpu_flags_sha: str = ""
    cores: int = 0
    hostname: str = ""
    compiler: str = ""
    compiler_version: str = ""
    cflags: tuple[str, ...] = ()
    exo_version: str = ""

    @property
    def fingerprint(self) -> str:
        """Identity of the measuring setup (not the host name: identical nodes compare)."""
        parts = [self.cpu_model, self.cpu_flags_sha, self.compiler_version, " ".join(self.cflags), self.exo_version]
        return sha256_text("|".join(parts))[:16]


@dataclass(frozen=True, slots=True)
class Measurement(JsonRecord):
    """The result of building, verifying and benchmarking one candidate. Never an exception."""

    fingerprint: str
    status: Status
    timing: Timing | None = None
    error: str = ""
    build_seconds: float = 0.0
    run_seconds: float = 0.0
    max_error: float | None = None  # largest deviation from the reference output
    machine: MachineInfo | None = None
    measured_at: float | None = None  # seconds of the search's own elapsed time; set by the driver
    # Set when this is an earlier search's measurement of the same C (``ReuseScope``), not a new one:
    reused_search_id: int | None = None
    reused_candidate_id: int | None = None
    # Whether the node's other work was paused while it was timed (``TimingMode``); None when
    # it was not timed past its first call. Counted in ``Counters.timed_beside``, not stored.
    quiet: bool | None = None
    # The cluster nodes (Ray node ids) that verified and timed the kernel, and that built it;
    # "" outside a Ray cluster, and ``node`` "" for a kernel never timed (a build error).
    # Each is reported by the worker that did the work; ``machine`` is the timing node's.
    node: str = ""
    built_node: str = ""

    @property
    def seconds(self) -> float | None:
        return self.timing.median if self.timing is not None else None
