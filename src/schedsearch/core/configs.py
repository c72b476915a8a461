"""How a search runs: its budgets and strategy, how candidates are built and timed, what the
enumerator may propose, and when an earlier measurement stands for a new one.

Frozen, slotted dataclasses; each round-trips through JSON (``codec``). Standard library only."""

from __future__ import annotations

from dataclasses import dataclass, field

# Imported at run time, not under TYPE_CHECKING: the codec resolves the records'
# annotations by name in this module (``codec.decode``).
from schedsearch.core.codec import JsonRecord
from schedsearch.core.enums import CostModelMode, FloatMode, StrategyKind, TimingMode

#: The most of a time budget a search keeps back for re-measuring its finalists: it stops
#: searching that much before the budget at the latest, so the whole run fits inside it.
FINALIST_RESERVE_SHARE = 0.25


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
    # Threads a candidate with parallel loops runs on (OpenMP), pinned to as many cores, with
    # the node's builds and expansions paused while it is timed; a candidate without runs on one.
    threads: int = 1


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
    # The cost model leads (set with gcc's notes, which make it rank a node's children right
    # from the first round): a round expands one parent, the next merges as soon as it is
    # ready (ahead of the likely winners still queued), and of children predicted
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
    threads: int = 1  # what a parallel candidate was timed with

    @staticmethod
    def of(
        config: SearchConfig, machine_fingerprint: str, reference: str, exclude_search: int | None = None
    ) -> ReuseScope:
        """The scope of a search with ``config`` measuring on ``machine_fingerprint``."""
        return ReuseScope(
            machine_fingerprint,
            reference,
            config.bench.cc,
            tuple(config.bench.cflags),
            config.expand.target,
            config.bench.rtol,
            exclude_search,
            config.bench.float_mode,
            config.bench.threads,
        )

    def admits(self, search_id: int, config: SearchConfig, machine_fingerprint: str, reference: str | None) -> bool:
        """Whether the measurements of search ``search_id`` — its config, machine
        fingerprint and unscheduled C's fingerprint given — are in scope."""
        return (
            search_id != self.exclude_search
            and machine_fingerprint == self.machine_fingerprint
            and reference == self.reference
            and ReuseScope.of(config, machine_fingerprint, self.reference, self.exclude_search) == self
        )
