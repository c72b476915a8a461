"""How a candidate was measured: its timing statistics, the yardstick timed beside it, the
measuring setup, and the measurement as a whole (a failure is a status, never an exception).

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

    def scaled(self, factor: float) -> Timing:
        """These statistics with every time multiplied by ``factor``."""
        return Timing(
            median=self.median * factor,
            min=self.min * factor,
            q1=self.q1 * factor,
            q3=self.q3 * factor,
            samples=tuple(x * factor for x in self.samples),
            inner=self.inner,
        )


@dataclass(frozen=True, slots=True)
class Paired(JsonRecord):
    """The yardstick timed beside a candidate: the search's yardstick kernel, run in the
    same driver process with interleaved rounds, so that both see the same state of the
    machine. On a host whose speed drifts (a shared cloud machine), the candidate's time
    relative to the yardstick's is what stays comparable from one measurement to the next.

    ``seconds`` is the yardstick's time on the search's one scale; once it is set, the
    measurement's own timing is on that scale too: its measured times multiplied by
    ``factor``. That is ``scaled_by`` when the search kept it - the yardstick's scale times
    the median over the rounds of the candidate's time over the yardstick's in the same
    round, over the candidate's median (``search.yardstick``) - and for rows stored before
    it was kept ``seconds / timing.median``.

    Rows of older databases may hold a *spared* pairing: the driver once left the
    yardstick out beside a candidate whose warm call was over 1.25 times the best so far,
    so ``timing`` is None and ``scaled_by`` is the median factor of that yardstick's latest
    pairings, borrowed when the row was placed. The driver no longer spares a yardstick;
    such rows are still read as stored (schema and JSON unchanged), so ``timing`` stays
    optional."""

    fingerprint: str  # the yardstick's C
    timing: Timing | None  # the yardstick's times in this run, as measured (None: spared, older rows only)
    seconds: float | None = None
    scaled_by: float | None = None

    @property
    def factor(self) -> float:
        """What the candidate's measured times were multiplied by (1 until ``seconds`` is set)."""
        if self.seconds is None:
            return 1.0
        if self.scaled_by is not None:
            return self.scaled_by
        if self.timing is None or self.timing.median <= 0:
            return 1.0
        return self.seconds / self.timing.median

    @property
    def spared(self) -> bool:
        """The yardstick was not run beside the candidate (a row of an older database)."""
        return self.timing is None


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
    paired: Paired | None = None  # the yardstick timed beside it (``Paired``)
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
