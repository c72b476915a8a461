"""Records, enums and protocols shared by every package.

Standard library only. These frozen dataclasses are the only values that cross a package
boundary, a process or Ray boundary, or the store; each one round-trips through JSON with
``to_json`` / ``from_json`` (see ``encode`` / ``decode``).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import keyword
import os
import secrets
import socket
import types
import typing
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, TypeVar, runtime_checkable

T = TypeVar("T")

#: Name every candidate's C function is given before fingerprinting and building, so that
#: two schedules producing the same code have the same fingerprint.
KERNEL_SYMBOL = "schedsearch_kernel"


# --------------------------------------------------------------------------- JSON codec


def encode(value: Any) -> Any:
    """Turn a record (or nested records, tuples, enums) into plain JSON data."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, StrEnum):
        return value.value
    if isinstance(value, (tuple, list)):
        return [encode(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): encode(v) for k, v in value.items()}
    return value


@functools.cache
def _type_hints(cls: type) -> dict[str, Any]:
    # Resolving string annotations dominates decoding cost; record classes never change.
    return typing.get_type_hints(cls)


def decode(cls: Any, data: Any) -> Any:
    """Rebuild a value of type ``cls`` (a record class or a type hint) from JSON data."""
    origin = typing.get_origin(cls)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(cls) if a is not type(None)]
        if data is None:
            return None
        return decode(options[0], data)
    if origin is tuple:
        args = typing.get_args(cls)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(decode(args[0], v) for v in data)
        return tuple(decode(a, v) for a, v in zip(args, data, strict=True))
    if origin in (dict, Mapping):
        _, vt = typing.get_args(cls)
        return {k: decode(vt, v) for k, v in data.items()}
    if isinstance(cls, type) and dataclasses.is_dataclass(cls):
        hints = _type_hints(cls)
        kwargs = {}
        for f in dataclasses.fields(cls):
            if f.name in data:
                kwargs[f.name] = decode(hints[f.name], data[f.name])
        return cls(**kwargs)
    if isinstance(cls, type) and issubclass(cls, StrEnum):
        return cls(data)
    if cls is float and isinstance(data, int):
        return float(data)
    return data


class JsonRecord:
    """Mixin: ``to_json()`` gives plain data, ``from_json(data)`` rebuilds the record."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        """Plain JSON-able dict of this record."""
        return encode(self)

    @classmethod
    def from_json(cls: type[T], data: Mapping[str, Any]) -> T:
        """Rebuild the record from ``to_json`` output."""
        return decode(cls, data)


def sha256_text(text: str) -> str:
    """Hex sha256 of a UTF-8 string."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


#: The range of a signed 64-bit integer: what SQL INTEGER columns and C ``int64_t`` hold.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def is_identifier(name: object) -> bool:
    """Whether ``name`` may be pasted into generated Python and C as a name.

    Proc, size and argument names are written verbatim into exported scripts and into the
    benchmark driver's C; a name read from a file or a database is only used when it is a
    plain ASCII identifier that is not a Python keyword (Exo's own names always are).
    """
    return isinstance(name, str) and name.isascii() and name.isidentifier() and not keyword.iskeyword(name)


def _check_name(name: object, what: str) -> None:
    if not is_identifier(name):
        raise ValueError(f"{what} {name!r} is not an identifier")


def _check_int64(value: object, what: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"{what} {value!r} is not an integer that fits in 64 bits")


# --------------------------------------------------------------------------- enums


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


#: The most of a time budget a search keeps back for re-measuring its finalists: it stops
#: searching that much before the budget at the latest, so the whole run fits inside it.
FINALIST_RESERVE_SHARE = 0.25


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


# --------------------------------------------------------------------------- workload


@dataclass(frozen=True, slots=True)
class ArgSpec(JsonRecord):
    """One argument of the kernel after sizes are bound, in C signature order.

    ``shape`` is empty for scalars. ``output`` is True when the proc writes or reduces into
    the argument (it is then reset before each call and compared after it).
    """

    name: str
    role: ArgRole
    dtype: DType
    shape: tuple[int, ...] = ()
    output: bool = False

    def __post_init__(self) -> None:
        # The name goes verbatim into the driver's C: never accept anything but a name.
        _check_name(self.name, "argument name")
        for d in self.shape:
            _check_int64(d, f"dimension of {self.name}")

    @property
    def elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        """Bytes of one copy of the argument (a scalar counts as one element)."""
        return max(1, self.elements) * self.dtype.itemsize


@dataclass(frozen=True, slots=True)
class Workload(JsonRecord):
    """A proc in a source file with concrete sizes: everything a worker needs to rebuild it."""

    path: str  # as the user gave it (absolute when loaded)
    source: str  # full text of the file
    source_sha256: str
    proc: str
    sizes: tuple[tuple[str, int], ...]  # in the proc's argument order
    args: tuple[ArgSpec, ...]  # the bound kernel's C arguments after ctxt
    flops: int | None = None  # arithmetic operations per call, when statically known

    def __post_init__(self) -> None:
        # Proc and size names go verbatim into exported scripts: names only.
        _check_name(self.proc, "proc name")
        for name, value in self.sizes:
            _check_name(name, "size name")
            _check_int64(value, f"size {name}")

    @property
    def sizes_dict(self) -> dict[str, int]:
        return dict(self.sizes)

    @property
    def key(self) -> str:
        """Stable identity: same source text, proc and sizes => same key."""
        sizes = ",".join(f"{k}={v}" for k, v in self.sizes)
        return sha256_text(f"{self.source_sha256}|{self.proc}|{sizes}")[:16]

    @property
    def label(self) -> str:
        """Short human label, e.g. ``sgemm[M=64,N=64,K=64]``."""
        sizes = ",".join(f"{k}={v}" for k, v in self.sizes)
        return f"{self.proc}[{sizes}]" if sizes else self.proc


# --------------------------------------------------------------------------- schedules


ArgValue = int | str | bool


@dataclass(frozen=True, slots=True)
class Rewrite(JsonRecord):
    """One scheduling step.

    ``target`` is a stable Exo pattern (``"j #0"``, ``"i j"``) or a statement path; ``args``
    are sorted (name, value) pairs. Applying the same Rewrite to the same proc is
    deterministic. This is the wire form stored in databases and schedule files; each
    kind's rule (``transforms.rules``) decodes the arguments into a typed, checked record.
    """

    kind: RewriteKind
    target: str
    args: tuple[tuple[str, ArgValue], ...] = ()

    @staticmethod
    def make(kind: RewriteKind, target: str, **args: ArgValue) -> Rewrite:
        """Build a Rewrite with its arguments sorted by name."""
        return Rewrite(kind, target, tuple(sorted(args.items())))

    def arg(self, name: str, default: ArgValue | None = None) -> ArgValue | None:
        for k, v in self.args:
            if k == name:
                return v
        return default

    def describe(self, hidden: Collection[str] = ()) -> str:
        """One readable line, e.g. ``split i #0 factor=8 tail=perfect``, leaving out the
        arguments named in ``hidden``.

        Which arguments only name the loops and buffers a step creates is declared by the
        kind's rule, which core does not know: callers pass them
        (``transforms.rules.naming_args(kind)``, or ``transforms.describe_step``).
        """
        extra = " ".join(f"{k}={v}" for k, v in self.args if k not in hidden)
        return f"{self.kind.value} {self.target}" + (f" {extra}" if extra else "")


@dataclass(frozen=True, slots=True)
class Schedule(JsonRecord):
    """A replayable trace of rewrites, applied in order to the unscheduled proc."""

    steps: tuple[Rewrite, ...] = ()

    def then(self, rewrite: Rewrite) -> Schedule:
        return Schedule(self.steps + (rewrite,))

    def __len__(self) -> int:
        return len(self.steps)

    @property
    def uses_openmp(self) -> bool:
        return any(s.kind is RewriteKind.PARALLELIZE for s in self.steps)

    def dumps(self) -> str:
        """Compact canonical JSON text (used as a cache key and stored in the database)."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    @staticmethod
    def loads(text: str) -> Schedule:
        return Schedule.from_json(json.loads(text))


@dataclass(frozen=True, slots=True)
class FeatureVector(JsonRecord):
    """A candidate's features for the cost model (``transforms.features`` names them).

    ``version`` names the feature set: vectors of different versions are not comparable.
    """

    version: str
    values: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class Candidate(JsonRecord):
    """A scheduled version of a workload: its trace, its C and where it came from.

    ``c_source`` has the kernel renamed to ``KERNEL_SYMBOL``; ``fingerprint`` is the sha256 of
    that text. ``parent`` is the parent's fingerprint (None for the root).
    """

    schedule: Schedule
    c_source: str
    fingerprint: str
    proc_text: str  # Exo's own printout of the scheduled proc
    parent: str | None = None
    depth: int = 0
    features: FeatureVector | None = None  # computed where the candidate was generated
    # Its kernel was built where it was generated (for the compiler's notes on it): a
    # measurement there finds the build ready and spends the benchmark runner's time alone.
    built: bool = False

    @property
    def uses_openmp(self) -> bool:
        return "#pragma omp" in self.c_source


@dataclass(frozen=True, slots=True)
class Expansion(JsonRecord):
    """The children of one parent: new legal rewrites applied, duplicate C dropped."""

    parent: str  # parent fingerprint
    children: tuple[Candidate, ...]
    attempted: int = 0  # rewrites tried
    illegal: int = 0  # rejected by Exo
    duplicates: int = 0  # legal but same C as an earlier sibling or the parent
    seconds: float = 0.0
    error: str = ""  # set when the parent itself could not be replayed
    order: tuple[int, ...] = ()  # each child's position among the parent's proposals (shards)
    replayed: int = 0  # steps of the parent's schedule re-applied to rebuild its proc (0: it was cached)
    remembered: bool = False  # read back from the expansions kept on disk, not expanded again
    deferred: int = 0  # rewrites this (FIRST) expansion left for the parent's DEFERRED part
    # Of a sharded expansion: how many of its shards hold one heavy rewrite alone, ahead of
    # the rest (``expand.dealt``; the same in every shard), and whether this one is such a shard.
    leads: int = 0
    leading: bool = False
    shards: int = 1  # how many shards the parent's rewrites were dealt to (1: not sharded)

    @staticmethod
    def merge(parts: Sequence[Expansion]) -> Expansion:
        """One parent's expansion from shards that each tried a share of its rewrites.

        Children come out in proposal order, exactly as one unsharded expansion lists them;
        a child whose C an earlier child already has counts as a duplicate. Seconds add up
        (worker time, not wall time); any shard's error is the merged error.
        """
        ranked = sorted(
            ((pos, child) for part in parts for pos, child in zip(part.order, part.children, strict=True)),
            key=lambda item: item[0],
        )
        seen: set[str] = set()
        children, order = [], []
        for pos, child in ranked:
            if child.fingerprint not in seen:
                seen.add(child.fingerprint)
                children.append(child)
                order.append(pos)
        kept_before = sum(len(part.children) for part in parts)
        return Expansion(
            parent=parts[0].parent,
            children=tuple(children),
            attempted=sum(part.attempted for part in parts),
            illegal=sum(part.illegal for part in parts),
            duplicates=sum(part.duplicates for part in parts) + kept_before - len(children),
            seconds=sum(part.seconds for part in parts),
            error="; ".join(part.error for part in parts if part.error),
            order=tuple(order),
            replayed=sum(part.replayed for part in parts),
            remembered=all(part.remembered for part in parts),
            deferred=max((part.deferred for part in parts), default=0),
            leads=max((part.leads for part in parts), default=0),
            shards=max((part.shards for part in parts), default=1),
        )


# --------------------------------------------------------------------------- measurement


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
        return Timing(median=self.median * factor, min=self.min * factor, q1=self.q1 * factor, q3=self.q3 * factor,
                      samples=tuple(x * factor for x in self.samples), inner=self.inner)


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

    A candidate that cannot be the new best (its warm call slower than the run's ``contend``
    bound) is timed with the fewest samples and its yardstick is *spared*: not run at all,
    which halves what timing an also-ran costs. Its ``timing`` is None, and the search puts
    it on its scale with the median factor of its latest pairings with the same yardstick."""

    fingerprint: str  # the yardstick's C
    timing: Timing | None  # the yardstick's times in this run, as measured (None: spared)
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
        """The yardstick was not run beside the candidate."""
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

    @property
    def seconds(self) -> float | None:
        return self.timing.median if self.timing is not None else None


# --------------------------------------------------------------------------- configuration


@dataclass(frozen=True, slots=True)
class BenchConfig(JsonRecord):
    """How candidates are built, verified and timed."""

    cc: str = "gcc"
    cflags: tuple[str, ...] = ("-O3", "-march=native")
    build_timeout: float = 60.0
    run_timeout: float = 30.0
    warmup_seconds: float = 0.01
    min_sample_seconds: float = 0.005  # each sample repeats the call at least this long
    samples: int = 7  # at most; a lone kernel stops early once its samples agree (settle)
    # A kernel timed alone stops sampling once 3 samples lie within this relative spread
    # ((max - min) / min) of each other: slow kernels on a quiet machine need few. 0: always
    # take ``samples``.
    settle: float = 0.02
    timing: TimingMode = TimingMode.AUTO  # may builds and expansions run beside a timing?
    seed: int = 0
    rtol: float = 1e-3  # float tolerance, relative to the reference output's magnitude
    # ``cflags`` already hold the mode's own flags (targets.build_flags); the reference is
    # built without them (targets.reference_flags).
    float_mode: FloatMode = FloatMode.STRICT


@dataclass(frozen=True, slots=True)
class ExpandOptions(JsonRecord):
    """What the enumerator may propose."""

    max_unroll: int = 16  # largest constant trip count unrolled (keeps simplify tractable)
    max_split_factors: int = 6  # per loop
    allow_parallel: bool = False  # parallelize_loop: needs -fopenmp and several threads
    allow_tails: bool = True  # splits that do not divide (guard / cut tails)
    target: str = "scalar"  # the instruction set rewrites may emit (transforms.targets): "avx512", ...
    # read what gcc made of each child (its machine code, ``evaluate.machine_code``) into its
    # features: every child is built as it is made, before any is measured (``noting``)
    compiler_notes: bool = False


@dataclass(frozen=True, slots=True)
class SearchConfig(JsonRecord):
    """Budgets and strategy of one search."""

    strategy: StrategyKind = StrategyKind.BEST_FIRST
    seed: int = 0
    max_seconds: float | None = 120.0
    max_candidates: int | None = None
    # End once this many candidates in a row, measured by this search, brought no new best
    # beyond noise (``Counters.since_best``); None: ``auto_stop`` decides.
    early_stop: int | None = None
    # Without ``early_stop``: end once the stretch since the last real gain is long against
    # the search before it (``schedsearch.stopping``); False: search until a budget is spent.
    auto_stop: bool = True
    max_depth: int = 12
    expand_batch: int = 2  # parents expanded per round
    beam_width: int = 4
    finalists: int = 3
    workers: int = 2
    cost_model: CostModelMode = CostModelMode.RANK
    bench: BenchConfig = field(default_factory=BenchConfig)
    expand: ExpandOptions = field(default_factory=ExpandOptions)
    remeasure: bool = False  # measure every candidate, even C measured the same way by an earlier search
    warm_start: bool = True  # a new search first evaluates the best schedules of earlier searches of its proc
    defer_costly: bool = True  # a large parent's costly rewrites wait for its second expansion (ExpansionPart)
    yardstick: bool = True  # time each candidate beside the search's yardstick (``search.yardstick``)
    confirm_best: bool = True  # a new best is measured twice, the slower time counts (``search.confirm``)
    # The cost model leads (set with gcc's notes, which make it rank a node's children right
    # from the first round): a round expands one parent, the next merges once one in-flight
    # cap of likely winners beyond the early ask is measured, and of children predicted
    # alike one is measured first (``search.pipeline``, ``search.ranking.measuring_order``).
    model_leads: bool = False


@dataclass(frozen=True, slots=True)
class ReuseScope(JsonRecord):
    """When an earlier search's measurement of a candidate's C stands for measuring it again.

    Same C (the candidate fingerprint), same machine fingerprint (CPU, compiler version,
    flags, Exo), same compiler command, flags and target, same float tolerance, and the same
    reference: the earlier search verified against the same unscheduled C. Only original
    measurements are reused (never a reuse of a reuse), with a ``Status.reusable`` status,
    and never from ``exclude_search`` (the search asking).
    """

    machine_fingerprint: str
    reference: str  # fingerprint of the unscheduled candidate results are verified against
    cc: str
    cflags: tuple[str, ...]
    target: str
    rtol: float
    exclude_search: int | None = None
    float_mode: FloatMode = FloatMode.STRICT  # decides how the reference was built

    @staticmethod
    def of(config: SearchConfig, machine_fingerprint: str, reference: str,
           exclude_search: int | None = None) -> ReuseScope:
        """The scope of a search with ``config`` measuring on ``machine_fingerprint``."""
        return ReuseScope(machine_fingerprint, reference, config.bench.cc, tuple(config.bench.cflags),
                          config.expand.target, config.bench.rtol, exclude_search, config.bench.float_mode)

    def admits(self, search_id: int, config: SearchConfig, machine_fingerprint: str, reference: str | None) -> bool:
        """Whether the measurements of search ``search_id`` — its config, machine
        fingerprint and unscheduled C's fingerprint given — are in scope."""
        return (
            search_id != self.exclude_search
            and machine_fingerprint == self.machine_fingerprint
            and reference == self.reference
            and ReuseScope.of(config, machine_fingerprint, self.reference, self.exclude_search) == self
        )


# --------------------------------------------------------------------------- store records


@dataclass(frozen=True, slots=True)
class TimeSpent(JsonRecord):
    """Where a search's time went, in seconds: how long its jobs took, by kind (each as the
    job itself timed it), and the wall time with nothing being measured - how long the
    search's measuring waited for Exo. Expanders and builders are processes of their own
    that share the node's cores, so on a machine of few cores the kinds overlap: their sum
    may exceed ``workers`` times the elapsed time, and a kind's seconds include the time it
    waited for a core."""

    expanding: float = 0.0  # expanders' own time (Exo; with gcc's notes, building every child too)
    building: float = 0.0  # compiling candidates for their measurement (0 for one an expansion built)
    measuring: float = 0.0  # verifying and timing candidates (the yardstick beside included)
    idle: float = 0.0  # wall time with no candidate being measured (expansions only, or the driver)
    # wall time before the search's clock started, counted against its time budget: loading
    # the workload, starting the workers, training the model on history (each run's summed)
    starting: float = 0.0
    # wall time of the search's clock spent waiting for the baseline (the unscheduled
    # kernel's answer key and timing), which the time budget does not count
    baseline_wait: float = 0.0

    def plus(self, **delta: float) -> TimeSpent:
        return dataclasses.replace(self, **{k: getattr(self, k) + v for k, v in delta.items()})


@dataclass(frozen=True, slots=True)
class Counters(JsonRecord):
    generated: int = 0  # rewrites tried on expanded nodes: duplicates + illegal + new candidates
    duplicates: int = 0  # dropped because their C was already seen (among siblings or earlier)
    illegal: int = 0  # rewrites Exo rejected
    evaluated: int = 0  # measurements recorded
    ok: int = 0
    failed: int = 0
    pruned: int = 0  # new children not measured: predicted slow while the budget was short
    reused: int = 0  # of the evaluated: measurements taken from earlier searches (ReuseScope)
    warm_started: int = 0  # candidates seeded from earlier searches' schedules, replayed here
    # measured by this run since the best last moved beyond noise (``SearchConfig.early_stop``)
    since_best: int = 0
    # where that last real gain came: the search's seconds (without its wait for the
    # baseline) and its measured candidates then (``schedsearch.stopping``)
    gain_seconds: float = 0.0
    gain_measured: int = 0
    # timed with the node's builds and expansions running beside (``TimingMode.AUTO``, ``SHARED``)
    timed_beside: int = 0
    spent: TimeSpent = TimeSpent()  # where the time went (``TimeSpent``)

    def plus(self, **delta: int) -> Counters:
        return dataclasses.replace(self, **{k: getattr(self, k) + v for k, v in delta.items()})

    @property
    def measured(self) -> int:
        """Evaluated candidates measured by this search (not reused): what ``max_candidates`` counts."""
        return self.evaluated - self.reused


@dataclass(frozen=True, slots=True)
class CandidateRecord(JsonRecord):
    """A candidate as stored, with its measurement flattened for queries."""

    id: int
    search_id: int
    parent_id: int | None
    depth: int
    schedule: Schedule
    fingerprint: str
    status: Status
    c_source: str = ""
    proc_text: str = ""
    error: str = ""
    timing: Timing | None = None
    gflops: float | None = None
    speedup: float | None = None  # unscheduled time / this time
    build_seconds: float = 0.0
    run_seconds: float = 0.0
    created_at: float = 0.0  # unix time
    expanded: bool = False
    max_error: float | None = None  # largest deviation from the reference output
    measured_at: float | None = None  # seconds of the search's own elapsed time when measured
    measured_unix: float | None = None  # unix time of the last recorded measurement
    features: FeatureVector | None = None
    predicted: float | None = None  # the cost model's log(time / root time) before measuring
    reused_search_id: int | None = None  # the measurement is this search's ...
    reused_candidate_id: int | None = None  # ... measurement of this candidate (same C)
    paired: Paired | None = None  # the yardstick timed beside it; ``timing`` is then on the search's scale

    @property
    def seconds(self) -> float | None:
        return self.timing.median if self.timing is not None else None


@dataclass(frozen=True, slots=True)
class PastSchedule(JsonRecord):
    """A fast schedule an earlier search recorded: a warm start's seed before it is replayed."""

    search_id: int
    candidate_id: int
    workload_key: str
    sizes: tuple[tuple[str, int], ...]
    target: str
    schedule: Schedule
    seconds: float
    speedup: float | None = None  # against that search's own baseline


@dataclass(frozen=True, slots=True)
class ModelAccuracy(JsonRecord):
    """How well the cost model ranked the latest measurements, predicted before they were
    measured (and so before it trained on them)."""

    spearman: float | None  # rank correlation of predicted and measured time; None below 3 pairs
    pairs: int  # measurements compared (the last ``window`` with a prediction)
    window: int
    trained_on: int = 0  # samples the model in use was trained on
    # How far apart the compared measurements are (90th over 10th percentile of their times):
    # near 1, only measurement noise orders them, and no model's rank correlation can be high.
    span: float | None = None
    # Of the pairs of compared measurements that can be told apart (their ranges, median ±
    # half the IQR, do not overlap), the share the predictions put in the same order; None
    # when there are none. What the model gets right where the measurements say something.
    concordance: float | None = None
    distinct_pairs: int = 0
    # Every prediction made once the search had measured ``settled_after`` candidates (the
    # model trained on at least that many of this workload), against its measurement: the
    # model's accuracy over the rest of the search, not only its last ``window``.
    settled_after: int = 0
    settled_spearman: float | None = None
    settled_pairs: int = 0
    settled_span: float | None = None
    # How well those measured times would rank a second measurement of themselves, from
    # each one's sample spread (``ranking.repeatability``): the most the settled rank
    # correlation can be expected to reach on this host (an optimistic bound).
    settled_repeat: float | None = None


@dataclass(frozen=True, slots=True)
class TrainingSample(JsonRecord):
    """One measured candidate as the cost model learns it."""

    features: FeatureVector
    log_ratio: float  # log(time / the search's root time)
    workload_key: str = ""


@dataclass(frozen=True, slots=True)
class SearchRecord(JsonRecord):
    id: int
    workload: Workload
    config: SearchConfig
    status: SearchStatus
    machine: MachineInfo
    started_at: float
    ended_at: float | None = None
    counters: Counters = field(default_factory=Counters)
    baseline_seconds: float | None = None
    best_candidate_id: int | None = None
    best_seconds: float | None = None  # from the finalists' side-by-side re-measurement
    best_speedup: float | None = None
    elapsed_seconds: float = 0.0  # summed over runs (resumes add to it)
    model_accuracy: ModelAccuracy | None = None
    failure: str = ""  # why the search was marked failed (one line); "" otherwise


#: How long a search's lease lives without a heartbeat before another driver may take the
#: search over. Its holder renews it every ``LEASE_BEAT_SHARE`` of that (10 s): beats may be
#: missed - one waiting out SQLite's whole busy timeout (30 s), a loaded machine - before it
#: lapses. A holder on the same host whose process has ended is taken over at once.
LEASE_TIMEOUT_SECONDS = 60.0
LEASE_BEAT_SHARE = 1 / 6


class LeaseState(StrEnum):
    """How a driver that wants a search finds the search's lease."""

    FREE = "free"  # nobody holds it
    MINE = "mine"  # this owner holds it already: taking it again renews it
    LIVE = "live"  # another driver holds it and renews it: the search is being run
    STALE = "stale"  # its holder has not renewed it within its timeout
    GONE = "gone"  # its holder was a process on this host that no longer exists


@dataclass(frozen=True, slots=True)
class LeaseOwner(JsonRecord):
    """One driver of a search: a process on a host, and a random token that tells apart two
    drivers in one process (and a new process that got a dead one's pid)."""

    host: str
    pid: int
    token: str

    @staticmethod
    def here() -> LeaseOwner:
        """A new owner for a driver in this process."""
        return LeaseOwner(socket.gethostname(), os.getpid(), secrets.token_hex(8))

    @property
    def label(self) -> str:
        """``pid 4242 on host ws-1``, on one line whatever a database row said the host was."""
        host = "".join(ch if ch.isprintable() else "?" for ch in self.host)[:64] or "?"
        return f"pid {self.pid} on host {host}"


@dataclass(frozen=True, slots=True)
class Lease(JsonRecord):
    """Who runs a search: the search is theirs while ``heartbeat_at + timeout`` (unix
    seconds, the holder's clock) lies ahead."""

    search_id: int
    owner: LeaseOwner
    acquired_at: float
    heartbeat_at: float
    timeout: float

    @property
    def expires_at(self) -> float:
        """When the lease lapses unless renewed (unix seconds)."""
        return self.heartbeat_at + self.timeout


@dataclass(frozen=True, slots=True)
class LeaseGrant(JsonRecord):
    """A lease taken: the new ``lease``, how the search's lease was found (``FREE``,
    ``MINE``, ``STALE`` or ``GONE``) and, for the last two, the ``previous`` one taken over."""

    lease: Lease
    found: LeaseState = LeaseState.FREE
    previous: Lease | None = None


@dataclass(frozen=True, slots=True)
class ProgressPoint(JsonRecord):
    """Best-so-far after the ``count``-th evaluated candidate, ``elapsed`` seconds in."""

    count: int
    elapsed: float
    candidate_id: int
    seconds: float
    speedup: float | None


@dataclass(frozen=True, slots=True)
class SearchEvent(JsonRecord):
    """What the search loop tells its observer (the CLI renders these)."""

    kind: EventKind
    search_id: int
    elapsed: float
    counters: Counters
    record: CandidateRecord | None = None
    best: CandidateRecord | None = None
    top: tuple[CandidateRecord, ...] = ()
    message: str = ""
    phase: Phase = Phase.STARTING
    activity: str = ""  # what the phase is doing now: "measuring 7/35 of round 3; expanding #12"
    # Seconds of the time budget used (``Ledger.budget_spent``: the search's own clock);
    # None from a producer that does not say.
    budget_spent: float | None = None

    @property
    def budget_used(self) -> float:
        """Seconds of the time budget used (``elapsed`` when the producer did not say)."""
        return self.elapsed if self.budget_spent is None else self.budget_spent


@dataclass(frozen=True, slots=True)
class Job:
    """One unit of work handed to an ``Executor``. ``id`` is the submitter's, unique among
    its jobs in flight; ``candidates`` holds the parent (expand), the candidate (evaluate)
    or the finalists (remeasure). An evaluated candidate whose verification call takes
    longer than ``cutoff`` seconds is timed by that call alone; one whose warm call takes
    longer than ``contend`` seconds cannot be the new best and gets the fewest samples.
    An expansion with ``stream`` is wanted piece by piece: nothing else is left to measure,
    so the executor may share it out in small shards and return each as it finishes; with
    ``all_heavy_first`` every heavy rewrite (a register tile) is made alone before the rest
    (else only the first per worker). An expansion tries the ``part`` of the parent's
    rewrites it names (``ExpansionPart``). An executor that must hold expansions back starts
    those of lower ``priority`` first."""

    id: int
    kind: JobKind
    candidates: tuple[Candidate, ...]
    cutoff: float | None = None
    contend: float | None = None
    stream: bool = False
    all_heavy_first: bool = False
    part: ExpansionPart = ExpansionPart.ALL
    priority: float = 0.0
    yardstick: Candidate | None = None  # evaluate: time the candidate beside this kernel (``Paired``)
    quiet: bool = False  # evaluate: pause the node's other work for the timing whatever ``TimingMode.AUTO`` found


@dataclass(frozen=True, slots=True)
class JobResult:
    """What a finished ``Job`` gave: an expansion, or measurements in the job's order.

    A failure of the candidate is a measurement with its status; a worker that died is an
    expansion with ``error`` or a ``run_error`` measurement, never an exception.

    An expansion may come in several results, one per shard, each with the children of its
    share of the parent's rewrites; ``final`` marks the last. Children of different shards
    may share their C: the receiver deduplicates."""

    job: Job
    expansion: Expansion | None = None
    measurements: tuple[Measurement, ...] = ()
    final: bool = True


# --------------------------------------------------------------------------- protocols


@runtime_checkable
class SearchStrategy(Protocol):
    """Chooses which measured candidates to expand next.

    ``whole_rounds``: True for a strategy that must see a round completely measured before
    it is asked again (beam search chooses each level once, from what it has seen); False
    lets the loop ask once a round's first children are measured (an early ask).
    """

    whole_rounds: bool

    def tell(self, record: CandidateRecord) -> None:
        """Learn a measured candidate (any status; only ``ok`` ones can be expanded)."""

    def ask(self, n: int) -> list[CandidateRecord]:
        """Up to ``n`` unexpanded candidates to expand next, removed from the frontier."""

    def exhausted(self) -> bool:
        """True when nothing is left to expand."""

    def heed_noise(self, share: float) -> None:
        """Times within ``share`` of each other cannot be told apart: the search's repeated
        measurements of one kernel differ by that much (``search.repeats``). A strategy
        that never compares near-equal times may ignore it."""


@runtime_checkable
class CostModel(Protocol):
    """Predicts candidates' times relative to the root from their features; learns online."""

    def predict(self, features: Sequence[FeatureVector]) -> list[float]:
        """Predicted log(time / root time) per vector, or ``[]`` while the model has none
        to give (before training, unless it has an analytic estimate to start from).

        Never waits for training: the last finished model answers.
        """

    def observe(self, samples: Sequence[TrainingSample]) -> None:
        """Learn measured candidates (retraining happens in the background)."""

    def trained_on(self) -> int:
        """Samples the model now answering was trained on (0: none yet)."""

    def close(self) -> None:
        """Stop background training."""


@runtime_checkable
class CandidateCostModel(CostModel, Protocol):
    """A cost model that reads whole candidates (their C, schedule and fingerprint), not
    only their feature vectors: the search asks it with ``predict_candidates`` instead of
    ``predict``. ``benchmarks/search_efficiency.py --oracle`` measures with one that
    answers from earlier measurements of the same C (what a perfect model would say)."""

    def predict_candidates(self, candidates: Sequence[Candidate]) -> list[float]:
        """Predicted log(time / root time) per candidate, or ``[]`` (as ``predict``)."""


@runtime_checkable
class Executor(Protocol):
    """Runs expansion and evaluation, possibly in parallel, streaming results.

    The search loop uses the asynchronous half: ``submit`` hands over jobs and returns at
    once, ``poll`` waits at most ``timeout`` seconds for finished ones, ``cancel`` abandons
    (and stops) everything in flight. ``expand``/``evaluate``/``remeasure`` are blocking
    conveniences on top of it for callers that want one answer.
    """

    def submit(self, workload: Workload, reference: Candidate, jobs: Sequence[Job]) -> None:
        """Start ``jobs``; never waits for them. ``reference`` is what evaluations verify against."""

    def poll(self, timeout: float) -> list[JobResult]:
        """Jobs finished since the last poll (waiting up to ``timeout`` s for the first).

        Raises a ``SchedsearchError`` when a job met broken infrastructure."""

    def cancel(self) -> None:
        """Abandon every job in flight, stopping its work (results never arrive)."""

    def pending(self) -> int:
        """Jobs submitted and not yet returned by ``poll``."""

    def expand(self, workload: Workload, parents: Sequence[Candidate]) -> Iterator[Expansion]:
        """One Expansion per parent, in completion order."""

    def evaluate(
        self, workload: Workload, reference: Candidate, candidates: Sequence[Candidate]
    ) -> Iterator[Measurement]:
        """One Measurement per candidate, in completion order. Never raises for a candidate."""

    def remeasure(
        self, workload: Workload, reference: Candidate, candidates: Sequence[Candidate]
    ) -> list[Measurement]:
        """Time the candidates side by side in one process (finalists); input order."""

    def machine(self) -> MachineInfo:
        """The measuring setup."""

    def close(self) -> None:
        """Release workers and processes this executor started."""


@runtime_checkable
class Store(Protocol):
    """Where searches and their candidates are recorded. Only a search's driver (the holder
    of its lease) writes to it."""

    def create_search(self, workload: Workload, config: SearchConfig, machine: MachineInfo,
                      lease: LeaseOwner | None = None, lease_timeout: float = LEASE_TIMEOUT_SECONDS) -> int:
        """Record a new running search; with ``lease`` it is born leased to that owner (in the
        same transaction: no other driver can take it first)."""

    def add_candidate(self, search_id: int, candidate: Candidate, predicted: float | None = None) -> CandidateRecord:
        """Record a candidate as pending (with its features and the cost model's prediction);
        an existing (search, fingerprint) is returned as is."""

    def record_measurement(
        self, search_id: int, measurement: Measurement, gflops: float | None, speedup: float | None
    ) -> CandidateRecord: ...

    def mark_expanded(self, search_id: int, candidate_id: int) -> None: ...

    def update_search(self, search_id: int, **fields: Any) -> SearchRecord:
        """Set any of: status, ended_at, counters, baseline_seconds, best_candidate_id,
        best_seconds, best_speedup, elapsed_seconds, model_accuracy."""

    def get_search(self, search_id: int) -> SearchRecord: ...

    def list_searches(self, workload_key: str | None = None) -> list[SearchRecord]: ...

    def get_candidate(self, candidate_id: int) -> CandidateRecord: ...

    def candidate_by_fingerprint(self, search_id: int, fingerprint: str) -> CandidateRecord | None: ...

    def candidates(self, search_id: int, *, code: bool = True) -> list[CandidateRecord]:
        """Every candidate of a search in insertion order (the whole tree). With
        ``code=False`` the records leave out what a view of the whole tree does not need and
        is most of the bytes: ``c_source`` and ``proc_text`` are "", ``features`` None and
        the timing's ``samples`` empty; every other field is as stored."""

    def top_candidates(self, search_id: int, k: int = 10) -> list[CandidateRecord]:
        """The k fastest ``ok`` candidates of a search."""

    def best_for_workload(self, workload_key: str, k: int = 10) -> list[CandidateRecord]:
        """The k fastest ``ok`` candidates of a workload across all its searches, one per C
        fingerprint (its fastest record)."""

    def lineage(self, candidate_id: int) -> list[CandidateRecord]:
        """Root first, the candidate last."""

    def progress(self, search_id: int) -> list[ProgressPoint]:
        """Best-so-far after each improvement."""

    def seen_fingerprints(self, search_id: int) -> set[str]: ...

    def training_samples(self, machine_fingerprint: str, feature_version: str, limit: int = 20000) -> list[TrainingSample]:
        """The latest ``ok`` measurements with features of this version, from every search
        measured on this machine fingerprint (any workload), oldest first."""

    def reusable_measurements(self, fingerprints: Collection[str], scope: ReuseScope) -> dict[str, CandidateRecord]:
        """For each fingerprint that has one, the latest original measurement in ``scope``
        (its ``search_id`` and ``id`` name the source)."""

    def past_schedules(self, source_sha256: str, proc: str, *, target: str | None = None, per_search: int = 3,
                       searches: int = 8) -> list[PastSchedule]:
        """The ``per_search`` fastest ``ok`` scheduled candidates (the root left out) of each of
        the latest ``searches`` searches of this proc's source, any sizes, that have one
        (only searches of ``target`` when given): newest search first, fastest first."""

    # Leases: one driver per search. Every operation is atomic across processes (and hosts,
    # on a server database). A store that took a search's lease refuses to write to that
    # search once another owner holds it (``LeaseLostError``): a driver presumed dead that
    # wakes up cannot write beside the one that took over.

    def acquire_lease(self, search_id: int, owner: LeaseOwner,
                      timeout: float = LEASE_TIMEOUT_SECONDS) -> LeaseGrant:
        """Take the search's lease for ``owner`` when it is free, already ``owner``'s, stale
        or its holder is gone; ``SearchBusyError`` when another driver holds it."""

    def renew_lease(self, search_id: int, owner: LeaseOwner) -> Lease:
        """A heartbeat: ``LeaseLostError`` when ``owner`` no longer holds the lease."""

    def release_lease(self, search_id: int, owner: LeaseOwner) -> bool:
        """Free the lease if ``owner`` holds it (True), else change nothing (False)."""

    def lease(self, search_id: int) -> Lease | None:
        """The search's lease, or None when nobody holds it."""

    def close(self) -> None: ...
