"""What is searched: the workload and its arguments, schedules of rewrites, candidates
and their features, and the expansion of a parent into its children.

Frozen, slotted dataclasses; each round-trips through JSON (``codec``). Standard library only."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass

# Imported at run time, not under TYPE_CHECKING: the codec resolves the records'
# annotations by name in this module (``codec.decode``).
from schedsearch.core.codec import JsonRecord
from schedsearch.core.enums import ArgRole, DType, RewriteKind
from schedsearch.core.values import _check_int64, _check_name, sha256_text


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
    """A candidate's features for the cost model (``model.features`` names them).

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
