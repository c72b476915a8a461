"""The StrEnums of the records: each value is the spelling stored in databases, schedule
files and JSON. Standard library only."""

from __future__ import annotations

from enum import StrEnum


class RewriteKind(StrEnum):
    """The scheduling steps the search knows how to propose and apply."""

    REORDER = "reorder"
    SPLIT = "split"
    TILE = "tile"  # split two nested loops and reorder into outer/outer/inner/inner
    HOIST = "hoist"  # move a loop outward over several enclosing loops in one step
    SINK = "sink"  # split a loop and move its inner part inward below the loops it encloses, in one step
    UNROLL = "unroll"
    FUSE = "fuse"
    SIMPLIFY = "simplify"
    STAGE_MEM = "stage_mem"
    PARALLELIZE = "parallelize"
    MICRO_KERNEL = "micro_kernel"  # older schedule files' name for a scalar-target register_tile
    PACK = "pack"  # copy a re-read input panel into a contiguous buffer
    REGISTER_TILE = "register_tile"  # a register tile (the target's vector instructions, or gcc's), in one step
    SIMD_KERNEL = "simd_kernel"  # older schedule files' name for an AVX2 register_tile
    COMPUTE_AT = "compute_at"  # compute a producer's rows inside its consumer's loop, in a line buffer
    VECTORIZE = "vectorize"  # a loop in the target's vector instructions, tails cut or masked
    FISSION = "fission"  # split the loops around a reduction loop from its init or epilogue


class Status(StrEnum):
    """Outcome of evaluating one candidate."""

    PENDING = "pending"  # recorded, not yet measured
    OK = "ok"
    ILLEGAL = "illegal"
    BUILD_ERROR = "build_error"
    RUN_ERROR = "run_error"
    TIMEOUT = "timeout"
    WRONG_RESULT = "wrong_result"
    # A row of an earlier run whose stored schedule does not replay to the C its fingerprint
    # names (or does not replay at all): the database was edited, so nothing of the row is
    # built, measured or ranked again (``search.inherited``).
    TAMPERED = "tampered"

    @property
    def failed(self) -> bool:
        """True for every final status except ``ok``."""
        return self not in (Status.OK, Status.PENDING)

    @property
    def reusable(self) -> bool:
        """Whether a measurement with this status stands for another one of the same C
        built the same way (``ReuseScope``): ``ok``, and the verdicts the same C and flags
        always earn again, ``build_error`` and ``wrong_result``. A timeout or a crash at run
        time can come from the machine's load, and ``illegal`` and ``tampered`` are no
        measurement at all."""
        return self in (Status.OK, Status.BUILD_ERROR, Status.WRONG_RESULT)


class StrategyKind(StrEnum):
    BEST_FIRST = "best-first"
    BEAM = "beam"
    RANDOM = "random"


class CostModelMode(StrEnum):
    """How a search uses the learned cost model."""

    OFF = "off"  # children are measured in proposal order; strategies use measurements only
    RANK = "rank"  # children are measured in order of predicted speed; strategies use predictions too
    PRUNE = "prune"  # as rank, and the predicted-worst share is skipped when the budget is short


class FloatMode(StrEnum):
    """What the C compiler may assume about float arithmetic in candidates."""

    STRICT = "strict"  # IEEE as written: every result is the one the proc's arithmetic gives
    # Division by a constant may become multiplication by its reciprocal (gcc
    # -freciprocal-math), as Halide does unless told StrictFloat. Candidates are still
    # verified against the unscheduled proc built strictly, within the float tolerance.
    RELAXED = "relaxed"


class TimingMode(StrEnum):
    """Whether other work on a node may run while one of its kernels is timed."""

    # The node's builds and expansions pause for each timing (evaluate.quiet): where cores
    # share execution units (SMT siblings, some cloud vCPUs) they slow a kernel 1.5x or more.
    QUIET = "quiet"
    # They run on beside it: more candidates a second, noisier times.
    SHARED = "shared"
    # Quiet while the node's own timings show that the work beside them disturbs them, shared
    # while it does not (evaluate.interference); a new best's second measurement and the
    # finalists are always timed quietly.
    AUTO = "auto"


class SearchStatus(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    INTERRUPTED = "interrupted"
    FAILED = "failed"


class ArgRole(StrEnum):
    """How an argument of the (size-bound) kernel is passed in C."""

    TENSOR = "tensor"  # pointer to a contiguous buffer
    SCALAR = "scalar"  # data scalar (f32 x): passed by pointer in Exo's C


class DType(StrEnum):
    """Exo data types the harness can allocate. Values are Exo's spellings."""

    F16 = "f16"
    F32 = "f32"
    F64 = "f64"
    I8 = "i8"
    UI8 = "ui8"
    UI16 = "ui16"
    I16 = "i16"
    I32 = "i32"

    @property
    def is_float(self) -> bool:
        return self in (DType.F16, DType.F32, DType.F64)

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return {"f16": 2, "f32": 4, "f64": 8, "i8": 1, "ui8": 1, "ui16": 2, "i16": 2, "i32": 4}[self.value]

    @property
    def c_type(self) -> str:
        return {
            DType.F16: "_Float16",
            DType.F32: "float",
            DType.F64: "double",
            DType.I8: "int8_t",
            DType.UI8: "uint8_t",
            DType.UI16: "uint16_t",
            DType.I16: "int16_t",
            DType.I32: "int32_t",
        }[self]

    @property
    def numpy_name(self) -> str:
        return {
            DType.F16: "float16",
            DType.F32: "float32",
            DType.F64: "float64",
            DType.I8: "int8",
            DType.UI8: "uint8",
            DType.UI16: "uint16",
            DType.I16: "int16",
            DType.I32: "int32",
        }[self]


class EventKind(StrEnum):
    STARTED = "started"
    BASELINE = "baseline"
    ASKED = "asked"  # a round's parents sent to be expanded (the message names each and its part), or held back
    EXPANDED = "expanded"
    EVALUATED = "evaluated"
    NEW_BEST = "new_best"
    FINALISTS = "finalists"
    FINISHED = "finished"
    TICK = "tick"  # nothing happened, but time passed: observers redraw at least once a second
    STOPPING = "stopping"  # a stop was asked for (Ctrl-C, SIGTERM); work in flight is cancelled
    REUSED = "reused"  # measurements of the same C taken from earlier searches instead of measuring
    WARM_START = "warm_start"  # schedules from earlier searches recorded to be evaluated first


class Phase(StrEnum):
    """What the search is busy with (an event's ``phase``)."""

    STARTING = "starting"
    BASELINE = "baseline"  # timing the unscheduled proc
    EXPANDING = "expanding"  # only expansions in flight
    MEASURING = "measuring"  # evaluations in flight (the next expansion may overlap)
    REMEASURING = "remeasuring"  # finalists timed side by side
    STOPPING = "stopping"
    DONE = "done"


class ExpansionPart(StrEnum):
    """Which of a parent's proposed rewrites one expansion tries. A large parent (a register
    tile, an unrolled nest) is expanded in two parts: its cheap rewrites first, and the
    rewrites whose legality Exo checks over the whole nest (``Rule.deferred``: a reorder, a
    pack, a hoist - seconds each there) only when the search asks for it again."""

    ALL = "all"  # every rewrite
    FIRST = "first"  # all but the deferred ones when the parent is large; else every rewrite
    DEFERRED = "deferred"  # the deferred ones alone: the parent's second expansion


class JobKind(StrEnum):
    """What an executor is asked to do with a ``Job``'s candidates."""

    EXPAND = "expand"  # one parent: its legal rewrites, applied and deduplicated
    EVALUATE = "evaluate"  # one candidate: build, verify, benchmark
    REMEASURE = "remeasure"  # several candidates timed side by side in one process


class LeaseState(StrEnum):
    """How a driver that wants a search finds the search's lease."""

    FREE = "free"  # nobody holds it
    MINE = "mine"  # this owner holds it already: taking it again renews it
    LIVE = "live"  # another driver holds it and renews it: the search is being run
    STALE = "stale"  # its holder has not renewed it within its timeout
    GONE = "gone"  # its holder was a process on this host that no longer exists
