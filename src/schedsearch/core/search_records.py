"""A search as stored and as observed: its record and counters, its candidates' rows, the
cost model's samples and accuracy, earlier schedules for a warm start, and the events the
search loop sends its observer.

Frozen, slotted dataclasses; each round-trips through JSON (``codec``). Standard library only."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

# Imported at run time, not under TYPE_CHECKING: the codec resolves the records'
# annotations by name in this module (``codec.decode``).
from schedsearch.core.codec import JsonRecord
from schedsearch.core.configs import SearchConfig
from schedsearch.core.enums import EventKind, Phase, SearchStatus, Status
from schedsearch.core.measurements import MachineInfo, Timing
from schedsearch.core.records import FeatureVector, Schedule, Workload


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
    measuring: float = 0.0  # verifying and timing candidates
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
    # untried children the cost model last predicted faster than the best beyond its typical
    # error, looked at once the stretch without a gain was long enough (``search.untried``)
    untried_ahead: int = 0
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
    # Where the latest measurement was taken (``Measurement.machine``, ``node``, ``built_node``);
    # None and "" for rows stored before schema version 7 and outside a Ray cluster.
    machine: MachineInfo | None = None
    node: str = ""
    built_node: str = ""

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
