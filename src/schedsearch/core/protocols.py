"""The protocols the packages meet through: ``SearchStrategy``, ``CostModel`` (and
``CandidateCostModel``), ``Executor`` and ``Store``. Standard library only."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

from schedsearch.core.configs import ReuseScope, SearchConfig
from schedsearch.core.jobs import Job, JobResult
from schedsearch.core.leases import LEASE_TIMEOUT_SECONDS, Lease, LeaseGrant, LeaseOwner
from schedsearch.core.measurements import MachineInfo, Measurement
from schedsearch.core.records import Candidate, Expansion, FeatureVector, Workload
from schedsearch.core.search_records import CandidateRecord, PastSchedule, ProgressPoint, SearchRecord, TrainingSample


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

    def remeasure(self, workload: Workload, reference: Candidate, candidates: Sequence[Candidate]) -> list[Measurement]:
        """Time the candidates side by side in one process (finalists); input order."""

    def machine(self) -> MachineInfo:
        """The measuring setup."""

    def close(self) -> None:
        """Release workers and processes this executor started."""


@runtime_checkable
class Store(Protocol):
    """Where searches and their candidates are recorded. Only a search's driver (the holder
    of its lease) writes to it."""

    def create_search(
        self,
        workload: Workload,
        config: SearchConfig,
        machine: MachineInfo,
        lease: LeaseOwner | None = None,
        lease_timeout: float = LEASE_TIMEOUT_SECONDS,
    ) -> int:
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

    def training_samples(
        self, machine_fingerprint: str, feature_version: str, limit: int = 20000
    ) -> list[TrainingSample]:
        """The latest ``ok`` measurements with features of this version, from every search
        measured on this machine fingerprint (any workload), oldest first."""

    def reusable_measurements(self, fingerprints: Collection[str], scope: ReuseScope) -> dict[str, CandidateRecord]:
        """For each fingerprint that has one, the latest original measurement in ``scope``
        (its ``search_id`` and ``id`` name the source)."""

    def past_schedules(
        self, source_sha256: str, proc: str, *, target: str | None = None, per_search: int = 3, searches: int = 8
    ) -> list[PastSchedule]:
        """The ``per_search`` fastest ``ok`` scheduled candidates (the root left out) of each of
        the latest ``searches`` searches of this proc's source, any sizes, that have one
        (only searches of ``target`` when given): newest search first, fastest first."""

    # Leases: one driver per search. Every operation is atomic across processes (and hosts,
    # on a server database). A store that took a search's lease refuses to write to that
    # search once another owner holds it (``LeaseLostError``): a driver presumed dead that
    # wakes up cannot write beside the one that took over.

    def acquire_lease(self, search_id: int, owner: LeaseOwner, timeout: float = LEASE_TIMEOUT_SECONDS) -> LeaseGrant:
        """Take the search's lease for ``owner`` when it is free, already ``owner``'s, stale
        or its holder is gone; ``SearchBusyError`` when another driver holds it."""

    def renew_lease(self, search_id: int, owner: LeaseOwner) -> Lease:
        """A heartbeat: ``LeaseLostError`` when ``owner`` no longer holds the lease."""

    def release_lease(self, search_id: int, owner: LeaseOwner) -> bool:
        """Free the lease if ``owner`` holds it (True), else change nothing (False)."""

    def lease(self, search_id: int) -> Lease | None:
        """The search's lease, or None when nobody holds it."""

    def close(self) -> None: ...
