"""``Ledger``: the books of one run of a search, and the one place it records and reports.

The driver (``loop``) is the store's only writer, and this is where it writes a
measurement: to the store (with its GFLOP/s and speedup over the baseline), the counters,
the strategy, the cost model and the list of the fastest candidates (``top``). The ledger
also keeps the run's clock (``elapsed`` counts the earlier runs of a resumed search too;
``budget_spent`` is what the time budget counts of it)
and its phase, and sends the observer its events, each with the ``top`` list and a few
words on what the pipeline is doing; ``tick`` sends one when nothing was said for
``TICK_SECONDS``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable

from schedsearch.core import (
    Candidate,
    CandidateRecord,
    Counters,
    EventKind,
    Measurement,
    Phase,
    SearchEvent,
    SearchStatus,
    SearchStrategy,
    Status,
    Store,
    Timing,
    Workload,
)
from schedsearch.numbers import within_noise
from schedsearch.search.frontier import rank_key
from schedsearch.search.guidance import Guidance
from schedsearch.search.inherited import Inherited
from schedsearch.search.reuse import origin_text


class ObserverError(Exception):
    """The observer raised ``original`` while hearing an event: the search stops (what it
    measured is kept) and the caller gets ``original`` back, not a failure of the search."""

    def __init__(self, original: Exception) -> None:
        super().__init__(f"{type(original).__name__}: {original}")
        self.original = original


#: How many of the fastest candidates events carry in ``top``.
TOP_N = 5
#: Observers hear from the loop at least this often (a ``tick`` when nothing else happened).
TICK_SECONDS = 1.0


class Ledger:
    """What one run of ``run_search`` has recorded and said (one instance per run).

    ``activity`` says what the pipeline is doing (it is asked at every event).
    """

    def __init__(
        self,
        workload: Workload,
        root: Candidate,
        strategy: SearchStrategy,
        store: Store,
        on_event: Callable[[SearchEvent], None],
        clock: Callable[[], float],
        guide: Guidance | None,
        *,
        activity: Callable[[], str],
        head_start: float = 0.0,
    ) -> None:
        self.workload, self.root, self.strategy, self.store = workload, root, strategy, store
        self.on_event, self.clock, self.guide = on_event, clock, guide
        self.activity = activity
        self.t0 = clock()
        self.prior_elapsed = 0.0
        # Seconds the run's caller spent before this clock started (``budget_spent``).
        self.head_start = max(0.0, head_start)
        # Seconds this run waited for the unscheduled kernel's first evaluation, which the
        # budget does not count (``budget_spent``).
        self.unbilled = 0.0
        self.sid: int | None = None
        self.counters = Counters()
        self.fp_of: dict[int, str] = {}  # candidate id -> fingerprint, to rebuild parents
        # Rows earlier runs stored (a resume), and those of them rebuilt from their schedules:
        # nothing such a row holds is ever built (``candidate``, ``search.inherited``).
        self.earlier: frozenset[int] = frozenset()
        self.inherited = Inherited()
        self.root_record: CandidateRecord | None = None
        self.baseline: float | None = None
        self.top: list[CandidateRecord] = []  # fastest ok records, best first
        self.streak_from: Timing | None = None  # the best a run without progress counts from (``_streak``)
        self.phase = Phase.STARTING
        self.last_event = clock()

    def elapsed(self) -> float:
        """Seconds this search has run, its earlier runs included."""
        return self.prior_elapsed + (self.clock() - self.t0)

    def budget_spent(self) -> float:
        """Seconds of the time budget (``SearchConfig.max_seconds``) used: ``elapsed``, the
        search's own clock, which starts once the workers are ready. Not counted: the run's
        ``head_start`` (loading the workload, checking the compiler, starting Ray, training
        the model on its history; kept as ``TimeSpent.starting`` and reported with the
        search), and ``unbilled``, the wait for the unscheduled kernel's first evaluation (its
        answer key and its baseline), which grows with the problem's size, not with the
        search (a naive SGEMM 2048 takes minutes), and which a peer that never runs the
        unscheduled kernel does not pay."""
        return self.elapsed() - self.unbilled

    def emit(
        self,
        kind: EventKind,
        record: CandidateRecord | None = None,
        message: str = "",
        top: tuple[CandidateRecord, ...] | None = None,
    ) -> None:
        """Send the observer an event (``top``: the fastest so far unless given)."""
        assert self.sid is not None
        if top is None:
            top = tuple(self.top)
        self.last_event = self.clock()
        event = SearchEvent(
            kind=kind,
            search_id=self.sid,
            elapsed=self.elapsed(),
            counters=self.counters,
            record=record,
            best=top[0] if top else None,
            top=top,
            message=message,
            phase=self.phase,
            activity=self.activity(),
            budget_spent=self.budget_spent(),
        )
        try:
            self.on_event(event)
        except Exception as exc:  # the observer's own fault: reported as such (``loop``)
            raise ObserverError(exc) from exc

    def tick(self) -> None:
        """A ``tick`` event when nothing was said for a second (the live view redraws)."""
        if self.clock() - self.last_event >= TICK_SECONDS:
            self.emit(EventKind.TICK)

    def spend(
        self,
        *,
        expanding: float = 0.0,
        idle: float = 0.0,
        starting: float = 0.0,
        baseline_wait: float = 0.0,
        measurements: tuple[Measurement, ...] = (),
    ) -> None:
        """Count time spent (``Counters.spent``): an expansion's seconds, wall seconds with
        nothing being measured, a run's start, and the build and run seconds of ``measurements`` as they
        come back from the executor (every one: the finalists' re-measurement costs time too,
        though it is not recorded alone)."""
        building = sum(m.build_seconds for m in measurements if m.reused_candidate_id is None)
        measuring = sum(m.run_seconds for m in measurements if m.reused_candidate_id is None)
        spent = self.counters.spent.plus(
            expanding=max(0.0, expanding),
            idle=max(0.0, idle),
            starting=max(0.0, starting),
            baseline_wait=max(0.0, baseline_wait),
            building=building,
            measuring=measuring,
        )
        self.counters = dataclasses.replace(self.counters, spent=spent)

    def record(self, m: Measurement, *, announce: bool, tell: bool = True) -> CandidateRecord:
        """Record one measurement: in the store, the counters, the strategy (``tell``), the
        cost model and the top list; ``announce``: with an ``evaluated`` event and a
        ``new_best`` one when it is the new best."""
        assert self.sid is not None
        m = dataclasses.replace(m, measured_at=self.elapsed())
        seconds = m.seconds if m.status is Status.OK else None
        gflops = speedup = None
        if seconds is not None and seconds > 0:
            if self.workload.flops:
                gflops = self.workload.flops / seconds / 1e9
            if self.baseline:
                speedup = self.baseline / seconds
        record = self.store.record_measurement(self.sid, m, gflops, speedup)
        ok = record.status is Status.OK
        reused = m.reused_candidate_id is not None
        self.counters = self.counters.plus(
            evaluated=1,
            ok=int(ok),
            failed=int(not ok),
            reused=int(reused),
            timed_beside=int(m.quiet is False and not reused),
        )
        if tell:
            self.strategy.tell(record)
        if self.guide is not None:
            self.guide.learn(record)
        improved = self.offer(record)
        self._streak(record, improved, measured_here=not reused)
        self.store.update_search(self.sid, counters=self.counters, elapsed_seconds=self.elapsed())
        if announce:
            self.emit(EventKind.EVALUATED, record, message=origin_text(record))
            if improved:
                self.emit(EventKind.NEW_BEST, record, message=f"candidate {record.id}, depth {record.depth}")
        return record

    def _streak(self, record: CandidateRecord, improved: bool, measured_here: bool) -> None:
        """Count ``record`` in the run of measurements without progress
        (``Counters.since_best``): a new best ends it when its time is beyond the noise of
        the best that began it (``numbers.within_noise``: their median ± half IQR ranges do
        not overlap); near-ties that take the lead by a fraction of the timing noise do not.
        Measurements reused from earlier searches cost nothing and are not counted."""
        if improved and (self.streak_from is None or within_noise(self.streak_from, record.timing) is not True):
            self.streak_from = record.timing
            self._gain()
        elif measured_here:
            self.counters = self.counters.plus(since_best=1)

    def restart_streak(self) -> None:
        """A resumed run starts a new run of measurements, from the best so far: a search
        stopped for want of progress searches on when resumed with a new budget."""
        self.streak_from = self.top[0].timing if self.top else None
        self._gain()

    def _gain(self) -> None:
        """A real gain now: the run without progress starts again from here."""
        self.counters = dataclasses.replace(
            self.counters, since_best=0, gain_seconds=self.search_seconds(), gain_measured=self.counters.measured
        )

    def search_seconds(self) -> float:
        """Seconds this search has searched: ``elapsed`` without its waits for the baseline."""
        return self.elapsed() - self.counters.spent.baseline_wait

    def offer(self, record: CandidateRecord) -> bool:
        """Keep ``record`` in the top list if it is ok and fast; True when it is the new best."""
        if record.status is not Status.OK or record.seconds is None:
            return False
        previous = self.top[0].id if self.top else None
        self.top = sorted([r for r in self.top if r.id != record.id] + [record], key=rank_key)[:TOP_N]
        return self.top[0].id == record.id and previous != record.id

    def record_accuracy(self) -> None:
        """Store how well the cost model's latest predictions ranked their measurements."""
        if self.guide is not None and self.sid is not None:
            self.store.update_search(self.sid, model_accuracy=self.guide.accuracy())

    def candidate(self, record: CandidateRecord) -> Candidate | None:
        """The candidate to build for a stored record: the root itself for the root; for a
        row an earlier run stored, the candidate rebuilt from its schedule (its C is the
        replay's), or None when it was not rebuilt; a row this run stored, as stored.
        Guarantees that no C read from a row of an earlier run is ever built."""
        if record.fingerprint == self.root.fingerprint:
            return self.root
        parent = self.fp_of.get(record.parent_id) if record.parent_id is not None else None
        if record.id in self.earlier:
            rebuilt = self.inherited.rebuilt.get(record.id)
            if rebuilt is None or rebuilt.fingerprint != record.fingerprint:
                return None
            return dataclasses.replace(
                rebuilt, parent=parent, depth=record.depth, features=record.features, built=False
            )
        return Candidate(
            schedule=record.schedule,
            c_source=record.c_source,
            fingerprint=record.fingerprint,
            proc_text=record.proc_text,
            depth=record.depth,
            parent=parent,
            features=record.features,
        )

    def parent(self, record: CandidateRecord) -> Candidate:
        """``record`` as a parent to expand. An expander replays the parent's schedule and
        never builds its C, so a row of an earlier run that was not rebuilt goes without
        its C (``c_source`` empty)."""
        candidate = self.candidate(record)
        if candidate is not None:
            return candidate
        return Candidate(
            schedule=record.schedule,
            c_source="",
            fingerprint=record.fingerprint,
            proc_text=record.proc_text,
            depth=record.depth,
            parent=self.fp_of.get(record.parent_id) if record.parent_id is not None else None,
            features=record.features,
        )

    def abort(self, status: SearchStatus, failure: str = "") -> None:
        """Mark the search ended by an exception (best effort: that exception is the one to report)."""
        if self.sid is None:
            return
        with contextlib.suppress(Exception):  # the original error is the one to report
            self.store.update_search(
                self.sid,
                status=status,
                ended_at=time.time(),
                counters=self.counters,
                elapsed_seconds=self.elapsed(),
                failure=failure,
            )
