"""InMemoryStore: the dictionary twin of SqlStore, for fast tests and throwaway runs.

It follows the same contract (``schedsearch.testing.store_contract``) as the SQL store,
including its errors, orderings, first-writer-wins rules and leases; nothing survives
``close``. ``twin()`` gives a second handle on the same data, as a second process opening
the same database would have one: for tests of two drivers.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Collection
from typing import Any, Self

from schedsearch.core import (
    LEASE_TIMEOUT_SECONDS,
    Candidate,
    CandidateRecord,
    Counters,
    Lease,
    LeaseGrant,
    LeaseOwner,
    LeaseState,
    MachineInfo,
    Measurement,
    PastSchedule,
    ProgressPoint,
    ReuseScope,
    SearchConfig,
    SearchRecord,
    SearchStatus,
    Status,
    TrainingSample,
    Workload,
)
from schedsearch.store import leases, rules


class InMemoryStore:
    """A ``core.Store`` held in dictionaries. Single-threaded, like the search driver, but
    for leases: a heartbeat thread may renew one while the driver writes."""

    where = "the in-memory store"

    def __init__(self) -> None:
        self._workloads: dict[str, Workload] = {}  # first workload recorded under a key wins
        self._searches: dict[int, SearchRecord] = {}
        self._candidates: dict[int, CandidateRecord] = {}
        self._by_search: dict[int, list[int]] = {}  # insertion order
        self._by_fingerprint: dict[tuple[int, str], int] = {}
        self._leases: dict[int, Lease] = {}
        self._lease_lock = threading.Lock()  # a lease is judged and changed as one step
        self._held: dict[int, str] = {}  # this handle's own: search id -> token of the lease it took

    def twin(self) -> InMemoryStore:
        """A second handle on the same data with leases of its own (as a second process
        would open the same database). Closing either one forgets the data of both."""
        other = InMemoryStore()
        for name in (
            "_workloads",
            "_searches",
            "_candidates",
            "_by_search",
            "_by_fingerprint",
            "_leases",
            "_lease_lock",
        ):
            setattr(other, name, getattr(self, name))
        return other

    def __repr__(self) -> str:
        return f"InMemoryStore({len(self._searches)} searches, {len(self._candidates)} candidates)"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ writing

    def create_search(
        self,
        workload: Workload,
        config: SearchConfig,
        machine: MachineInfo,
        lease: LeaseOwner | None = None,
        lease_timeout: float = LEASE_TIMEOUT_SECONDS,
    ) -> int:
        """Record a new running search of ``workload`` and return its id; with ``lease`` the
        search is born leased to that owner."""
        timeout = leases.check_timeout(lease_timeout)
        stored = self._workloads.setdefault(workload.key, workload)
        search_id = len(self._searches) + 1
        self._searches[search_id] = SearchRecord(
            id=search_id,
            workload=stored,
            config=config,
            status=SearchStatus.RUNNING,
            machine=machine,
            started_at=time.time(),
            counters=Counters(),
        )
        self._by_search[search_id] = []
        if lease is not None:
            now = time.time()
            self._leases[search_id] = Lease(search_id, lease, now, now, timeout)
            self._held[search_id] = lease.token
        return search_id

    def add_candidate(self, search_id: int, candidate: Candidate, predicted: float | None = None) -> CandidateRecord:
        """Record ``candidate`` as pending; an existing (search, fingerprint) is returned as is."""
        self._writable(search_id)
        existing = self._by_fingerprint.get((search_id, candidate.fingerprint))
        if existing is not None:
            return self._candidates[existing]
        parent_id = None
        if candidate.parent is not None:
            parent_id = self._by_fingerprint.get((search_id, candidate.parent))
            if parent_id is None:
                raise rules.missing_parent(self.where, search_id, candidate.fingerprint, candidate.parent)
        record = CandidateRecord(
            id=len(self._candidates) + 1,
            search_id=search_id,
            parent_id=parent_id,
            depth=candidate.depth,
            schedule=candidate.schedule,
            fingerprint=candidate.fingerprint,
            status=Status.PENDING,
            c_source=candidate.c_source,
            proc_text=candidate.proc_text,
            created_at=time.time(),
            features=candidate.features,
            predicted=predicted,
        )
        self._candidates[record.id] = record
        self._by_search[search_id].append(record.id)
        self._by_fingerprint[(search_id, record.fingerprint)] = record.id
        return record

    def record_measurement(
        self, search_id: int, measurement: Measurement, gflops: float | None, speedup: float | None
    ) -> CandidateRecord:
        """Fill the candidate's measurement (matched by fingerprint) and return it."""
        self._writable(search_id)
        cid = self._by_fingerprint.get((search_id, measurement.fingerprint))
        if cid is None:
            raise rules.no_fingerprint(self.where, search_id, measurement.fingerprint)
        record = dataclasses.replace(
            self._candidates[cid],
            status=Status(measurement.status),
            error=measurement.error,
            timing=measurement.timing,
            gflops=gflops,
            speedup=speedup,
            build_seconds=measurement.build_seconds,
            run_seconds=measurement.run_seconds,
            max_error=measurement.max_error,
            measured_at=measurement.measured_at,
            measured_unix=time.time(),
            reused_search_id=measurement.reused_search_id,
            reused_candidate_id=measurement.reused_candidate_id,
            machine=measurement.machine,
            node=measurement.node,
            built_node=measurement.built_node,
        )
        self._candidates[cid] = record
        return record

    def mark_expanded(self, search_id: int, candidate_id: int) -> None:
        """Remember that the candidate's children have been generated."""
        record = self._candidate_of(search_id, candidate_id)
        self._writable(search_id)
        self._candidates[candidate_id] = dataclasses.replace(record, expanded=True)

    def update_search(self, search_id: int, **fields: Any) -> SearchRecord:
        """Set any of the fields listed in ``rules.SEARCH_FIELDS``; return the updated search."""
        values = rules.check_search_fields(fields)
        self._writable(search_id)
        record = dataclasses.replace(self._search(search_id), **values)
        self._searches[search_id] = record
        return record

    def acquire_lease(self, search_id: int, owner: LeaseOwner, timeout: float = LEASE_TIMEOUT_SECONDS) -> LeaseGrant:
        """Take the search's lease for ``owner``: ``SearchBusyError`` when another live
        driver holds it."""
        timeout = leases.check_timeout(timeout)
        self._search(search_id)
        with self._lease_lock:
            now = time.time()
            current = self._leases.get(search_id)
            found = leases.judge(current, owner, now)
            if found is LeaseState.LIVE:
                assert current is not None
                raise leases.busy(self.where, current, now)
            acquired = current.acquired_at if found is LeaseState.MINE and current is not None else now
            lease = self._leases[search_id] = Lease(search_id, owner, acquired, now, timeout)
        self._held[search_id] = owner.token
        return LeaseGrant(lease, found, current if found in (LeaseState.STALE, LeaseState.GONE) else None)

    def renew_lease(self, search_id: int, owner: LeaseOwner) -> Lease:
        """A heartbeat of ``owner``'s lease: ``LeaseLostError`` when it holds it no more."""
        self._search(search_id)
        with self._lease_lock:
            current = self._leases.get(search_id)
            if current is None or current.owner.token != owner.token:
                raise leases.lost(self.where, search_id, current)
            lease = self._leases[search_id] = dataclasses.replace(current, heartbeat_at=time.time())
        return lease

    def release_lease(self, search_id: int, owner: LeaseOwner) -> bool:
        """Free the search's lease if ``owner`` holds it; whether it did."""
        with self._lease_lock:
            current = self._leases.get(search_id)
            mine = current is not None and current.owner.token == owner.token
            if mine:
                del self._leases[search_id]
        if self._held.get(search_id) == owner.token:
            del self._held[search_id]
        return mine

    def lease(self, search_id: int) -> Lease | None:
        """The search's lease, or None when it is free."""
        self._search(search_id)
        return self._leases.get(search_id)

    def close(self) -> None:
        """Forget everything."""
        for table in (
            self._workloads,
            self._searches,
            self._candidates,
            self._by_search,
            self._by_fingerprint,
            self._leases,
            self._held,
        ):
            table.clear()

    # ------------------------------------------------------------------ reading

    def get_search(self, search_id: int) -> SearchRecord:
        """The search with this id."""
        return self._search(search_id)

    def list_searches(self, workload_key: str | None = None) -> list[SearchRecord]:
        """Every search (of one workload, when given), oldest first."""
        return [s for s in self._searches.values() if workload_key is None or s.workload.key == workload_key]

    def get_candidate(self, candidate_id: int) -> CandidateRecord:
        """The candidate with this id."""
        try:
            return self._candidates[candidate_id]
        except KeyError:
            raise rules.no_candidate(self.where, candidate_id) from None

    def candidate_by_fingerprint(self, search_id: int, fingerprint: str) -> CandidateRecord | None:
        """The candidate of the search with this fingerprint, or None."""
        self._search(search_id)
        cid = self._by_fingerprint.get((search_id, fingerprint))
        return None if cid is None else self._candidates[cid]

    def candidates(self, search_id: int, *, code: bool = True) -> list[CandidateRecord]:
        """Every candidate of the search in insertion order (the whole tree); ``code=False``
        leaves out the heavy fields (see ``core.Store.candidates``)."""
        self._search(search_id)
        records = [self._candidates[i] for i in self._by_search[search_id]]
        return records if code else [_outline(r) for r in records]

    def top_candidates(self, search_id: int, k: int = 10) -> list[CandidateRecord]:
        """The k fastest ``ok`` candidates of the search (ties: older first)."""
        return _fastest(self.candidates(search_id), k)

    def best_for_workload(self, workload_key: str, k: int = 10) -> list[CandidateRecord]:
        """The k fastest ``ok`` candidates across every search of the workload, one per C
        (the fastest record of each fingerprint)."""
        ids = {s.id for s in self.list_searches(workload_key)}
        seen: set[str] = set()
        distinct = []
        for c in _fastest((c for c in self._candidates.values() if c.search_id in ids), len(self._candidates)):
            if c.fingerprint not in seen:
                seen.add(c.fingerprint)
                distinct.append(c)
        return distinct[: max(k, 0)]

    def lineage(self, candidate_id: int) -> list[CandidateRecord]:
        """Root first, the candidate last."""
        chain = [self.get_candidate(candidate_id)]
        while chain[-1].parent_id is not None:
            chain.append(self._candidates[chain[-1].parent_id])
        return chain[::-1]

    def progress(self, search_id: int) -> list[ProgressPoint]:
        """Best-so-far after each improvement, over measured-candidate count and time."""
        search = self._search(search_id)
        measured = sorted(
            (c for c in self.candidates(search_id) if c.measured_unix is not None),
            key=lambda c: (c.measured_unix, c.id),
        )
        return rules.progress_points(
            search.started_at,
            (
                rules.Measured(c.id, c.status, c.seconds, c.speedup, c.measured_unix, c.measured_at)  # type: ignore[arg-type]
                for c in measured
            ),
        )

    def training_samples(
        self, machine_fingerprint: str, feature_version: str, limit: int = 20000
    ) -> list[TrainingSample]:
        """The latest ``ok`` measurements with features of this version from every search on
        this machine fingerprint, oldest first (see ``core.Store``)."""
        searches = {s.id: s for s in self._searches.values() if s.machine.fingerprint == machine_fingerprint}
        samples = []
        for c in self._candidates.values():  # insertion order = id order
            search = searches.get(c.search_id)
            if search is None or c.status is not Status.OK:
                continue
            sample = rules.training_sample(
                c.features, feature_version, c.seconds, search.baseline_seconds, search.workload.key
            )
            if sample is not None:
                samples.append(sample)
        return samples[-limit:] if limit > 0 else []

    def reusable_measurements(self, fingerprints: Collection[str], scope: ReuseScope) -> dict[str, CandidateRecord]:
        """For each fingerprint that has one, the latest original measurement in ``scope``
        (see ``core.Store``)."""
        wanted = set(fingerprints)
        found: dict[str, CandidateRecord] = {}
        for c in self._candidates.values():  # insertion order = id order: the latest wins
            if c.fingerprint not in wanted or not rules.stands_for_a_measurement(c):
                continue
            search = self._searches[c.search_id]
            roots = (r for r in self.candidates(search.id) if r.parent_id is None)
            reference = next((r.fingerprint for r in roots), None)
            if scope.admits(search.id, search.config, search.machine.fingerprint, reference):
                found[c.fingerprint] = c
        return found

    def past_schedules(
        self, source_sha256: str, proc: str, *, target: str | None = None, per_search: int = 3, searches: int = 8
    ) -> list[PastSchedule]:
        """The fastest scheduled ``ok`` candidates of the latest searches of this proc's
        source, any sizes (see ``core.Store``)."""
        out: list[PastSchedule] = []
        used = 0
        for search in sorted(self._searches.values(), key=lambda r: r.id, reverse=True):
            if used >= searches:
                break
            w = search.workload
            if w.source_sha256 != source_sha256 or w.proc != proc:
                continue
            if target is not None and search.config.expand.target != target:
                continue
            fastest = _fastest((c for c in self.candidates(search.id) if c.parent_id is not None), per_search)
            used += bool(fastest)
            out.extend(rules.past_schedule(c, w.key, w.sizes, search.config.expand.target) for c in fastest)
        return out

    def seen_fingerprints(self, search_id: int) -> set[str]:
        """Fingerprints of every candidate of the search (for dedup on resume)."""
        return {c.fingerprint for c in self.candidates(search_id)}

    def frontier(self, search_id: int) -> list[CandidateRecord]:
        """``ok`` candidates not yet expanded, in insertion order (for resume)."""
        return [c for c in self.candidates(search_id) if c.status is Status.OK and not c.expanded]

    # ------------------------------------------------------------------ helpers

    def _search(self, search_id: int) -> SearchRecord:
        try:
            return self._searches[search_id]
        except KeyError:
            raise rules.no_search(self.where, search_id) from None

    def _writable(self, search_id: int) -> SearchRecord:
        """The search, for a write: ``LeaseLostError`` when this handle took its lease and
        another owner holds it now (or nobody does)."""
        search = self._search(search_id)
        held = self._held.get(search_id)
        if held is not None:
            current = self._leases.get(search_id)
            if current is None or current.owner.token != held:
                raise leases.lost(self.where, search_id, current)
        return search

    def _candidate_of(self, search_id: int, candidate_id: int) -> CandidateRecord:
        self._search(search_id)
        record = self.get_candidate(candidate_id)
        if record.search_id != search_id:
            raise rules.not_in_search(self.where, candidate_id, search_id)
        return record


def _fastest(records: Any, k: int) -> list[CandidateRecord]:
    ok = [r for r in records if r.status is Status.OK and r.timing is not None]
    ok.sort(key=lambda r: (r.timing.median, r.id))
    return ok[: max(k, 0)]


def _outline(record: CandidateRecord) -> CandidateRecord:
    """``record`` without its code, features and timing samples (``candidates(code=False)``)."""
    timing = dataclasses.replace(record.timing, samples=()) if record.timing is not None else None
    return dataclasses.replace(record, c_source="", proc_text="", features=None, timing=timing)
