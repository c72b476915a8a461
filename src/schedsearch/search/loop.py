"""``run_search``: the one loop that asks, expands, deduplicates, evaluates, stores and tells.

The loop is a pipeline over an executor's ``submit`` / ``poll``. Work goes in rounds: a
round's parents (from ``strategy.ask``) are expanded in parallel; its new children - C
new to this search - are stored as ``pending`` and measured, the likely winners first.
While round k is being measured, round k+1's parents are already being expanded, so the
workers that build and benchmark never wait for Exo. Round k+1's parents are asked for
when round k's measuring starts, or - when round k is measured in the cost model's order,
or that ask found no parent - once round k's first children in measuring order are
measured (an early ask: the next round then grows from this one's likely best). Either
way the strategy has then seen exactly the results of the rounds before and of those
first children, whatever order they completed in, so the same seed gives the same search.
One exception buys latency: when nothing is left to measure while a round is expanded
(the root's round, above all), the executor may send its expansions back shard by shard
(``Job.stream``), and measuring starts with the first shard; later shards' children join
the queue, re-ordered. What such a round measures first then depends on which shards
were in first.

In the cost model's order a round is not measured whole before the next: its early ask
comes once its likely winners (within ``STREAM_GATE`` of its best prediction, at most one
in-flight cap) are measured - for a streamed round, as soon as a shard per worker is in -
and while the next round is expanded from them, the round's also-rans wait. The next
round's children then join the same queue (``_merge``), so the likely winners one level
deeper are measured before the also-rans of this one; those are measured when nothing
more likely is left. Which children wait depends on the predictions only, so this keeps
the same seed's search the same (streamed rounds aside, as above).
Measurements stream back and are recorded one by one; the driver is the store's only
writer, and it never runs Exo or a compiler itself, so it stays responsive: it looks at
``stop`` and the budget at least four times a second and sends a ``tick`` event at least
once a second.

Crash safety: children are stored as ``pending`` before they are evaluated, and a parent
is marked expanded only once all its new children are measured. A search killed half-way
is resumed by re-evaluating its pending candidates and re-expanding unfinished parents;
fingerprint dedup against the store makes the re-expansion cheap. Expansions that came
in for a round that never started measuring are kept the same way: their children are
stored as pending when the search ends.

The time budget is wall time and includes the finalists: the search stops early enough
for the side-by-side re-measurement (estimated from the contenders' own run times), and a
re-measurement still running at the budget's end is abandoned for the search's own
numbers. A stop (Ctrl-C, SIGTERM) is announced at once with a ``stopping`` event, work in
flight is cancelled, and no re-measurement runs.

With a cost model (``core.CostModel``) a round's new children are measured in order of
predicted speed (``ranking.measuring_order``, seeded exploration included) and, in
``prune`` mode with a short budget, the predicted-slower share is not measured at all.
Each prediction is stored with its child before it is measured; the rank correlation of
the latest predictions with their measurements is recorded with the search. The model
learns every ``ok`` measurement as it arrives and retrains without blocking this loop.

Knowledge from earlier searches: candidates whose C an earlier search measured the same
way take that measurement instead of being measured (``_reuse``; ``search.reuse`` says
when), and a new search's ``seeds`` — schedules earlier searches found, replayed on this
workload by the caller — are recorded as children of the root (depth: their length) and
evaluated right after the baseline, before anything is expanded (``_seed``). Reused
measurements do not count against ``max_candidates``, which counts what this search
measures (``Counters.measured``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from schedsearch.core import (
    Candidate,
    CandidateRecord,
    CostModel,
    FINALIST_RESERVE_SHARE,
    CostModelMode,
    Counters,
    EventKind,
    Executor,
    Expansion,
    Job,
    JobKind,
    JobResult,
    Measurement,
    Phase,
    ReuseScope,
    SearchConfig,
    SearchEvent,
    SearchStatus,
    SearchStrategy,
    Status,
    Store,
    Workload,
)
from schedsearch.errors import SchedsearchError, SearchError
from schedsearch.search.frontier import rank_key
from schedsearch.search.guidance import Guidance
from schedsearch.search.outcome import SearchOutcome
from schedsearch.search.reuse import origin_text, reuse_message, split

#: How many of the fastest candidates events carry in ``top``.
TOP_N = 5
#: The longest the loop waits for results before it looks at ``stop`` and the budget again.
POLL_SECONDS = 0.25
#: Observers hear from the loop at least this often (a ``tick`` when nothing else happened).
TICK_SECONDS = 1.0
#: How far past the time budget a running re-measurement of the finalists may go.
FINALIST_GRACE_SECONDS = 3.0
#: A candidate whose first (verification) call is this many times slower than the best so
#: far cannot win: it is timed by that call alone instead of ``samples`` more calls.
CUTOFF_FACTOR = 4.0
#: ... but only beyond this many seconds per call, where a cold first call is not the
#: reason a contender looks slow (and where timing it fully starts to cost real time).
CUTOFF_FLOOR_SECONDS = 0.01
#: A candidate slower than this many times the best so far gets the fewest samples: same-C
#: timings agree within about 5% near the best (quiet timing), so at 1.25x it cannot be
#: the new best, and more samples would only refine the time of a loser. The early rounds
#: of a large kernel are full of such candidates, each call as slow as the unscheduled one.
CONTEND_FACTOR = 1.25
#: While a round's expansions are still coming in, only children expected within this
#: factor of the best predicted time in the round so far are measured (natural log of 4): the
#: likely winners at once, the rest once every shard is in. Measuring an also-ran would
#: pause the expanders (quiet timing) that are still making the round's best children.
STREAM_GATE = math.log(4.0)
#: An early ask of a round in proposal order waits for this share of its children (the
#: first in measuring order), and for at least one in-flight cap of them. A round in the
#: cost model's order waits for its likely winners only: at most one in-flight cap of the
#: children next in measuring order that are within ``STREAM_GATE`` of its best prediction.
EARLY_ASK_SHARE = 0.25


def run_search(
    workload: Workload,
    root: Candidate,
    strategy: SearchStrategy,
    executor: Executor,
    store: Store,
    config: SearchConfig,
    on_event: Callable[[SearchEvent], None] = lambda e: None,
    *,
    search_id: int | None = None,
    stop: threading.Event | None = None,
    clock: Callable[[], float] = time.monotonic,
    cost_model: CostModel | None = None,
    seeds: Sequence[Candidate] = (),
) -> SearchOutcome:
    """Run (or, with ``search_id``, resume) a search and return how it ended.

    ``root`` is the unscheduled candidate; it is the baseline and the reference every
    candidate is verified against. Budgets (``config.max_seconds``, ``max_candidates``)
    count the search's total over all its runs; ``max_candidates`` counts the candidates
    this search measured, the root included (not the measurements it reused). Setting
    ``stop`` ends the search promptly with status ``interrupted``; everything already
    measured stays recorded.

    Raises ``SearchError`` (after marking the search ``failed``) when the root itself
    does not build, run or verify. Any other exception also marks the search failed (or
    interrupted, for ``KeyboardInterrupt``) before it propagates; a ``SchedsearchError``
    (broken infrastructure: a full disk, a killed compiler, a failing database) carries
    the search's id in ``search_id``. Candidates being evaluated stay pending: nobody is
    blamed, and a resume measures them.

    ``cost_model`` is used as ``config.cost_model`` says (not at all when that is ``off``);
    the caller owns it (and closes it).

    ``seeds`` (a warm start: earlier searches' schedules replayed on this workload) are
    recorded as children of the root, each at the depth of its schedule's length, and
    evaluated right after the baseline; those whose C is the root's or an earlier seed's
    are dropped. They are used only when a search starts (not on resume).
    """
    if config.cost_model is CostModelMode.OFF:
        cost_model = None
    run = _Run(workload, root, strategy, executor, store, config, on_event, stop or threading.Event(), clock,
               cost_model, seeds)
    return run.execute(search_id)


class _Stopped(Exception):
    """Raised inside the loop when ``stop`` is set while it waits for one job."""


@dataclass
class _Tally:
    """What one parent's expansion gave so far (it may come in several shards)."""

    new: int = 0
    duplicates: int = 0
    illegal: int = 0
    error: str = ""
    remembered: bool = False


@dataclass
class _Round:
    """One round of the pipeline: its parents' expansions, then its children's measurements.
    A round may start measuring while some of its expansions are still coming in, shard by
    shard (when nothing else is left to measure); their children join the queue as they come."""

    number: int  # 0: a warm start's seeds, or what the last run left pending
    parents: list[CandidateRecord]
    expanding: dict[int, CandidateRecord] = field(default_factory=dict)  # job id -> parent
    parts: dict[str, list[Expansion]] = field(default_factory=dict)  # parent fingerprint -> shards in
    complete: set[str] = field(default_factory=set)  # parents whose last shard is in
    taken: dict[str, int] = field(default_factory=dict)  # parent fingerprint -> shards taken into the queue
    tally: dict[str, _Tally] = field(default_factory=dict)  # parent fingerprint -> what its shards gave
    announced: set[str] = field(default_factory=set)  # parents whose expansion was announced
    streamed: bool = False  # an expansion of it came in shards (``JobResult.final``)
    keys: dict[str, float] = field(default_factory=dict)  # child fingerprint -> its prediction
    queue: deque[Candidate] = field(default_factory=deque)  # children not yet submitted, in order
    measuring: dict[int, Candidate] = field(default_factory=dict)  # job id -> child in flight
    parent_of: dict[str, int] = field(default_factory=dict)  # child fingerprint -> parent id
    waiting: dict[int, int] = field(default_factory=dict)  # parent id -> children not yet measured
    total: int = 0  # children to measure
    done: int = 0  # children measured
    ranked: bool = False  # measured in the cost model's order (likely winners first)
    # Early ask: the next parents are asked for once the first ``ask_after`` children in
    # measuring order are measured; until then results are held back from the strategy.
    ask_after: int = 0  # 0: no early ask pending in this round
    # In the cost model's order, places from here on go to likely winners only while an ask
    # is pending or the next round is expanded (``_Run._gated``): the first ``ask_after``.
    open_until: int = 0
    # A child's place in measuring order is given when it leaves the queue (submitted, or
    # measured by an earlier search), so a queue re-ordered by late shards keeps it exact.
    place: dict[str, int] = field(default_factory=dict)  # child fingerprint -> place in measuring order
    placed: int = 0  # places given so far
    measured_places: set[int] = field(default_factory=set)
    held: dict[int, CandidateRecord] = field(default_factory=dict)  # place -> measured, not yet told

    def expanded(self) -> bool:
        return not self.expanding

    def has_new_shards(self) -> bool:
        """Shards in whose children are not in the queue yet."""
        return any(len(parts) > self.taken.get(fp, 0) for fp, parts in self.parts.items())

    def finished(self) -> bool:
        return not self.queue and not self.measuring and self.expanded()

    def take_place(self, fingerprint: str) -> None:
        """The child leaves the queue: its place in measuring order is the next one."""
        if fingerprint not in self.place:
            self.place[fingerprint] = self.placed
            self.placed += 1


class _Run:
    """State of one run of ``run_search`` (private: one instance per call)."""

    def __init__(
        self,
        workload: Workload,
        root: Candidate,
        strategy: SearchStrategy,
        executor: Executor,
        store: Store,
        config: SearchConfig,
        on_event: Callable[[SearchEvent], None],
        stop: threading.Event,
        clock: Callable[[], float],
        cost_model: CostModel | None = None,
        seeds: Sequence[Candidate] = (),
    ) -> None:
        self.workload, self.root, self.strategy = workload, root, strategy
        self.executor, self.store, self.config = executor, store, config
        self.on_event, self.stop, self.clock = on_event, stop, clock
        self.t0 = clock()
        self.prior_elapsed = 0.0
        self.sid: int | None = None
        self.counters = Counters()
        self.seen: set[str] = set()
        self.fp_of: dict[int, str] = {}  # candidate id -> fingerprint, to rebuild parents
        self.root_record: CandidateRecord | None = None
        self.baseline: float | None = None
        self.top: list[CandidateRecord] = []  # fastest ok records, best first
        self.seeds = tuple(seeds)
        self.reuse_scope: ReuseScope | None = None  # built on first use: it leaves this search out
        self.guide = (
            Guidance(cost_model, config.seed, prune=config.cost_model is CostModelMode.PRUNE, workload_key=workload.key)
            if cost_model is not None else None
        )
        self.job_ids = itertools.count(1)
        self.rounds = itertools.count(1)
        self.current: _Round | None = None  # children being measured
        self.next: _Round | None = None  # parents being expanded
        self.phase = Phase.STARTING
        self.last_event = clock()
        # At most this many evaluations in flight: enough to keep every worker busy,
        # few enough that a round's order (likely winners first) still decides.
        self.workers = max(1, getattr(executor, "workers", config.workers) or 1)
        self.in_flight_cap = 2 * self.workers
    # ------------------------------------------------------------------ driver

    def execute(self, search_id: int | None) -> SearchOutcome:
        if search_id is None:
            self.sid = self.store.create_search(self.workload, self.config, self.executor.machine())
        else:
            self.sid = search_id
        try:
            try:
                if search_id is None:
                    self._start()
                else:
                    self._resume()
                status = self._search()
            except _Stopped:
                status = SearchStatus.INTERRUPTED
            self._keep_expanded()
            self._cancel()
            return self._finish(status)
        except KeyboardInterrupt:
            self._cancel()
            self._abort(SearchStatus.INTERRUPTED)
            raise
        except SchedsearchError as e:
            self._cancel()
            self._abort(SearchStatus.FAILED, str(e))
            # Tell the caller which search stopped, so it can say how to resume it.
            if e.search_id is None:
                e.search_id = self.sid
            raise
        except BaseException as e:
            self._cancel()
            self._abort(SearchStatus.FAILED, f"internal error: {type(e).__name__}: {e}")
            raise

    def elapsed(self) -> float:
        return self.prior_elapsed + (self.clock() - self.t0)

    def _cancel(self) -> None:
        """Abandon work in flight: its candidates stay pending (a resume measures them)."""
        if self.executor.pending():
            with contextlib.suppress(Exception):  # already failing or finishing: best effort
                self.executor.cancel()
        self.current = self.next = None

    def _keep_expanded(self) -> None:
        """Record the children of the expansions that came in for a round that never got
        to measuring, as pending: a resume measures them instead of expanding again."""
        nxt = self.next
        if nxt is not None and nxt.complete:
            nxt.parents = [p for p in nxt.parents if p.fingerprint in nxt.complete]
            self._take_in(nxt)
        self.next = None

    def _abort(self, status: SearchStatus, failure: str = "") -> None:
        if self.sid is None:
            return
        with contextlib.suppress(Exception):  # the original error is the one to report
            self.store.update_search(
                self.sid, status=status, ended_at=time.time(), counters=self.counters, elapsed_seconds=self.elapsed(),
                failure=failure,
            )

    def _emit(self, kind: EventKind, record: CandidateRecord | None = None, message: str = "",
              top: tuple[CandidateRecord, ...] | None = None) -> None:
        assert self.sid is not None
        if top is None:
            top = tuple(self.top)
        self.last_event = self.clock()
        self.on_event(SearchEvent(
            kind=kind, search_id=self.sid, elapsed=self.elapsed(), counters=self.counters, record=record,
            best=top[0] if top else None, top=top, message=message, phase=self.phase, activity=self._activity(),
        ))

    def _activity(self) -> str:
        """What the pipeline is doing, in a few words, for the live view."""
        parts = []
        cur, nxt = self.current, self.next
        if self.phase is Phase.BASELINE:
            parts.append("timing the unscheduled proc")
        if cur is not None and cur.total:
            what = f"round {cur.number}" if cur.number else "the warm start and what was left pending"
            parts.append(f"measuring {cur.done}/{cur.total} of {what} ({len(cur.measuring)} in flight)")
        if nxt is not None and not nxt.expanded():
            ids = ", ".join(f"#{p.id}" for p in nxt.expanding.values())
            parts.append(f"expanding {ids} for round {nxt.number}")
        elif nxt is not None:
            children = sum(len(e.children) for shards in nxt.parts.values() for e in shards)
            parts.append(f"round {nxt.number} expanded: {children} children wait to be measured")
        if cur is not None and not cur.expanded():
            ids = ", ".join(f"#{p.id}" for p in cur.expanding.values())
            parts.append(f"{ids} still expanding (its children join round {cur.number} as they come)")
        return "; ".join(parts)

    def _tick(self) -> None:
        """A ``tick`` event when nothing was said for a second (the live view redraws)."""
        if self.clock() - self.last_event >= TICK_SECONDS:
            self._emit(EventKind.TICK)

    def _check_stop(self) -> None:
        if self.stop.is_set():
            self.phase = Phase.STOPPING
            self._emit(EventKind.STOPPING, message="stopping: cancelling the work in flight; "
                                                  "everything measured is kept")
            raise _Stopped

    def _wait_for(self, job: Job) -> JobResult:
        """Poll until ``job`` is done; other results meanwhile (the root's expansion) are taken."""
        while True:
            self._check_stop()
            found = None
            for result in self.executor.poll(POLL_SECONDS):
                if result.job.id == job.id:
                    found = result
                else:
                    self._take(result)
            if found is not None:
                return found
            self._tick()

    # ------------------------------------------------------------------ start / resume

    def _start(self) -> None:
        assert self.sid is not None
        self.root_record = self.store.add_candidate(self.sid, self.root)
        self.fp_of[self.root_record.id] = self.root.fingerprint
        self.seen.add(self.root.fingerprint)
        self._emit(EventKind.STARTED, message=f"search {self.sid} of {self.workload.label}")
        self._baseline(expand_root=True)
        self._seed()

    def _resume(self) -> None:
        assert self.sid is not None
        search = self.store.get_search(self.sid)
        self.counters = search.counters
        self.prior_elapsed = search.elapsed_seconds
        self.baseline = search.baseline_seconds
        # The last run's declared best is re-decided when this one ends.
        self.store.update_search(self.sid, status=SearchStatus.RUNNING, failure="", best_candidate_id=None,
                                 best_seconds=None, best_speedup=None)
        records = self.store.candidates(self.sid)
        self.seen = set(self.store.seen_fingerprints(self.sid))
        self.fp_of = {r.id: r.fingerprint for r in records}
        roots = [r for r in records if r.parent_id is None]
        if roots and roots[0].fingerprint != self.root.fingerprint:
            raise SearchError(
                f"search {self.sid} was started from different code than {self.workload.label} gives now"
            )
        self._emit(EventKind.STARTED, message=f"resuming search {self.sid} of {self.workload.label}")
        if not roots:
            self._start()
            return
        self.root_record = roots[0]
        self.seen.add(self.root.fingerprint)
        rerun_baseline = self.root_record.status is Status.PENDING or self.baseline is None
        if rerun_baseline:
            self._baseline()
        elif self.root_record.status is not Status.OK:
            raise SearchError(f"search {self.sid} cannot resume: its unscheduled proc failed "
                              f"({self.root_record.status.value})")
        # Measured records rebuild the strategy's frontier (their expanded flags included).
        for r in records:
            if r.status is Status.PENDING or (rerun_baseline and r.id == self.root_record.id):
                continue
            self.strategy.tell(r)
            self._offer(r)
        pending = [r for r in records if r.status is Status.PENDING and r.id != self.root_record.id]
        if pending:
            # Round 0: what the last run left pending, measured before anything new.
            children = [self._candidate(r) for r in pending]
            self.current = self._reuse_in(_Round(0, [], queue=deque(children), total=len(children)))

    def _baseline(self, expand_root: bool = False) -> None:
        """Evaluate the root against itself; its median is the baseline. ``expand_root``:
        round 1, the root's expansion, starts at once too - Exo works while the baseline is
        measured (the first expansion is the longest wait before anything new is measured)."""
        assert self.sid is not None and self.root_record is not None
        self.phase = Phase.BASELINE
        job = Job(next(self.job_ids), JobKind.EVALUATE, (self.root,))
        self.executor.submit(self.workload, self.root, [job])
        if expand_root:
            self.next = self._submit_round([self.root_record])
        result = self._wait_for(job)
        m = result.measurements[0] if result.measurements else None
        if m is None:
            raise SearchError(f"the executor returned no measurement for the unscheduled {self.workload.label}")
        if m.status is not Status.OK or m.seconds is None or m.seconds <= 0:
            self.store.record_measurement(self.sid, dataclasses.replace(m, measured_at=self.elapsed()), None, None)
            self.counters = self.counters.plus(evaluated=1, failed=1)
            detail = f": {m.error.strip()}" if m.error.strip() else ""
            raise SearchError(f"the unscheduled {self.workload.label} failed ({m.status.value}){detail}")
        self.baseline = m.seconds
        record = self._record(m, announce=False, tell=False)
        expanding = self.next is not None and any(p.id == record.id for p in self.next.parents)
        # The strategy must not offer a root that is being expanded already.
        self.strategy.tell(dataclasses.replace(record, expanded=True) if expanding else record)
        self.root_record = record
        self.store.update_search(self.sid, baseline_seconds=self.baseline)
        self._emit(EventKind.BASELINE, record, message=f"baseline {m.seconds:.3g} s")

    # ------------------------------------------------------------------ earlier searches

    def _seed(self) -> None:
        """Record the warm-start seeds as children of the root, to be measured first."""
        assert self.sid is not None
        fresh: list[Candidate] = []
        for seed in self.seeds:
            if seed.fingerprint in self.seen:
                continue
            self.seen.add(seed.fingerprint)
            seed = dataclasses.replace(seed, parent=self.root.fingerprint, depth=len(seed.schedule))
            record = self.store.add_candidate(self.sid, seed)
            self.fp_of[record.id] = seed.fingerprint
            fresh.append(seed)
        if not fresh:
            return
        self.counters = self.counters.plus(warm_started=len(fresh))
        noun = "schedule" if len(fresh) == 1 else "schedules"
        self._emit(EventKind.WARM_START, message=f"{len(fresh)} {noun} from earlier searches, evaluated first")
        self.current = self._reuse_in(_Round(0, [], queue=deque(fresh), total=len(fresh)))

    def _reuse(self, candidates: Sequence[Candidate]) -> tuple[list[Measurement], list[Candidate]]:
        """Earlier searches' measurements of the same C (``search.reuse``), and the
        candidates still to measure. Nothing is reused with ``config.remeasure``."""
        assert self.sid is not None
        if self.config.remeasure or not candidates:
            return [], list(candidates)
        if self.reuse_scope is None:
            self.reuse_scope = ReuseScope.of(self.config, self.executor.machine().fingerprint, self.root.fingerprint,
                                             exclude_search=self.sid)
        found = self.store.reusable_measurements([c.fingerprint for c in candidates], self.reuse_scope)
        reused, rest = split(candidates, found)
        if reused:
            self._emit(EventKind.REUSED, message=reuse_message(reused))
        return reused, rest

    def _reuse_in(self, rnd: _Round, new: Sequence[Candidate] | None = None) -> _Round:
        """Record what earlier searches measured of the round's children (of ``new`` only,
        when given: the rest of the queue was looked up already); queue the rest."""
        reused, _ = self._reuse(list(rnd.queue) if new is None else new)
        if reused:
            taken = {m.fingerprint for m in reused}
            rnd.queue = deque(c for c in rnd.queue if c.fingerprint not in taken)
        for m in reused:
            rnd.take_place(m.fingerprint)
            self._measured(rnd, m)
        return rnd

    # ------------------------------------------------------------------ the pipeline

    def _finalist_reserve(self) -> float:
        """Seconds to keep for re-measuring the finalists: their own run times (and the
        root's) with some slack, at most a quarter of the budget."""
        c = self.config
        if c.max_seconds is None or c.finalists <= 0 or not self.top:
            return 0.0
        contenders = [*self.top[: c.finalists], *([self.root_record] if self.root_record else [])]
        estimate = 1.0 + 1.5 * sum(r.run_seconds for r in contenders)
        return min(estimate, FINALIST_RESERVE_SHARE * c.max_seconds)

    def _time_spent(self) -> bool:
        c = self.config
        return c.max_seconds is not None and self.elapsed() >= c.max_seconds - self._finalist_reserve()

    def _candidates_left(self) -> int | None:
        """Evaluations the candidate budget still allows beyond those in flight."""
        if self.config.max_candidates is None:
            return None
        flying = len(self.current.measuring) if self.current is not None else 0
        return self.config.max_candidates - self.counters.measured - flying

    def _search(self) -> SearchStatus:
        while True:
            self._check_stop()
            left = self._candidates_left()
            if self._time_spent() or (left is not None and left <= 0 and not (self.current and self.current.measuring)):
                return SearchStatus.COMPLETED
            if self.current is None or self.current.finished():
                self._finish_round()
                if self.current is None and self.next is None:
                    return SearchStatus.COMPLETED
                if self.current is not None and self.current.finished():
                    continue  # a round with nothing new to measure
            self._merge()
            self._fill()
            self.phase = Phase.MEASURING if self.current is not None else Phase.EXPANDING
            for result in self.executor.poll(POLL_SECONDS):
                self._take(result)
            self._tick()

    def _finish_round(self) -> None:
        """Between rounds: the expanded round starts measuring, and the next parents are
        asked for. A round measured in proposal order asks at once, when the strategy has
        seen every earlier round's results. A round ranked by the cost model - or one whose
        ask found no parent - asks once its first children in measuring order are measured
        too (``_arm_early_ask``): likely the best of them, so the next round grows from this
        one, and its expansion overlaps the rest of this round's measurements."""
        if self.current is not None:
            self._release(self.current)
        self.current = None
        nxt = self.next
        if nxt is not None and (nxt.expanded() or (nxt.streamed and nxt.has_new_shards())):
            # Measuring starts with what is in: the rest of a streamed expansion joins the
            # queue as it comes (``_take``), and the next round is planned when it is all in.
            self.next = None
            self.current = self._take_in(nxt)
            self._record_accuracy()
            if nxt.expanded() and self._merging(self.current):
                # Armed before anything is placed, its early ask counts from this round's start.
                self._plan_next(self.current)
                self._fill()
                return
            self._fill()  # measurements first: they keep the builders busy
            if not nxt.expanded():
                return
        self._plan_next(self.current)

    def _plan_next(self, cur: _Round | None) -> None:
        """Ask for the next round's parents now, or arm an early ask in ``cur`` (whose
        expansions are all in)."""
        early = cur is not None and not cur.finished() and not self.strategy.whole_rounds
        if self.next is None and not (early and cur is not None and cur.ranked):
            self.next = self._start_expanding()
        if self.next is None and early and cur is not None:
            self._arm_early_ask(cur)

    def _arm_early_ask(self, rnd: _Round) -> None:
        """Ask for the next parents once the round's next children in measuring order are
        measured: in the cost model's order those in flight and its likely winners queued
        (``_likely``), at most one in-flight cap of them, else ``EARLY_ASK_SHARE`` of the round (at least one cap).
        Until then the round's results are held back from the strategy, so what it has seen
        when it is asked - every earlier round, and exactly those children - does not depend
        on the order in which measurements complete: the same seed still gives the same
        search."""
        if rnd.ask_after:
            return  # armed already
        if rnd.ranked:
            # Counted from the places given so far (a deterministic point: the round's start,
            # a merge, or a streamed shard): the next children, likely winners only.
            k = rnd.placed + min(self.in_flight_cap, self._likely(rnd))
            rnd.open_until = k
        else:
            k = min(rnd.total, max(self.in_flight_cap, math.ceil(rnd.total * EARLY_ASK_SHARE)))
        if all(i in rnd.measured_places for i in range(k)):
            self.next = self._start_expanding()
            return
        rnd.ask_after = k

    def _early_ask(self, rnd: _Round) -> None:
        """The round's first ``ask_after`` children are measured: tell the strategy those,
        ask for the next round's parents, then tell it the rest held back."""
        k, rnd.ask_after = rnd.ask_after, 0
        for i in sorted(p for p in rnd.held if p < k):
            self.strategy.tell(rnd.held.pop(i))
        if self.next is None:
            self.next = self._start_expanding()
        self._release(rnd)

    def _release(self, rnd: _Round) -> None:
        """Tell the strategy every result the round still holds back (in measuring order)."""
        rnd.ask_after = 0
        for i in sorted(rnd.held):
            self.strategy.tell(rnd.held[i])
        rnd.held.clear()

    def _merge(self) -> None:
        """Take the next round into the current one (``_merging``) once both are ready: the
        next round's expansions are all in, and every likely winner of the current round has
        left its queue (the rest wait behind the gate, ``_gated``). Its children and the
        current round's also-rans then form one queue in the cost model's order, so a deeper
        likely winner is measured before a shallower also-ran, and the next ask comes after
        the merged round's own likely winners. Both conditions are met whatever order the
        work completes in, and nothing beyond the gate has been measured meanwhile: the same
        seed still gives the same search - except for a streamed next round, which merges
        with its first shard (as a streamed round starts measuring with it)."""
        cur, nxt = self.current, self.next
        # A streamed next round (nothing was queued when it was asked for) merges with its
        # first shard, as a streamed round starts measuring with it.
        ready = nxt is not None and (nxt.expanded() or (nxt.streamed and nxt.has_new_shards()))
        if cur is None or nxt is None or not ready or not self._merging(cur) or self._likely(cur) \
                or cur.placed < cur.open_until:
            return
        self._release(cur)
        cur.number = nxt.number
        cur.parents += nxt.parents
        cur.expanding.update(nxt.expanding)
        cur.parts.update(nxt.parts)
        cur.complete |= nxt.complete
        cur.taken.update(nxt.taken)
        cur.streamed = cur.streamed or nxt.streamed
        self.next = None
        self._take_in(cur)
        self._record_accuracy()
        self._plan_next(cur)  # armed before anything more is placed: the ask counts from here
        self._fill()

    def _start_expanding(self) -> _Round | None:
        if self._no_room_for_another_round():
            return None
        while True:
            asked = self.strategy.ask(max(1, self.config.expand_batch))
            if not asked:
                return None
            parents = [p for p in asked if p.depth < self.config.max_depth]
            if parents:
                break
        return self._submit_round(parents)

    def _submit_round(self, parents: list[CandidateRecord]) -> _Round:
        """A new round: its parents' expansions submitted."""
        rnd = _Round(next(self.rounds), parents)
        jobs = []
        # Nothing left to measure meanwhile: the search waits for this round, so its
        # expansions may come back shard by shard and measuring start with the first.
        stream = self.current is None or not self.current.queue
        for parent in parents:
            job = Job(next(self.job_ids), JobKind.EXPAND, (self._candidate(parent),), stream=stream)
            rnd.expanding[job.id] = parent
            jobs.append(job)
        self.executor.submit(self.workload, self.root, jobs)
        return rnd

    def _no_room_for_another_round(self) -> bool:
        """Whether the current round's children still queued use up the rest of the budget:
        a round expanded now could never be measured, and expanding it would only take the
        CPU from those measurements. Candidates left are counted exactly; seconds left are
        estimated at this search's pace so far (elapsed over measured)."""
        cur = self.current
        if cur is None or not cur.queue:
            return False
        # A merging round's also-rans would be measured after the new round's children.
        queued = self._likely(cur) if self._merging(cur) else len(cur.queue)
        left = self._candidates_left()
        if left is not None and queued >= left:
            return True
        c = self.config
        if c.max_seconds is None or self.counters.measured < 1:
            return False
        seconds_left = c.max_seconds - self._finalist_reserve() - self.elapsed()
        return queued * self.elapsed() / self.counters.measured >= seconds_left

    def _take_in(self, rnd: _Round) -> _Round:
        """Take the round's shards that came in since the last call: their new children are
        deduplicated, stored as pending with their predictions and queued, the queue in
        measuring order (re-ordered with them). A parent's expansion is announced when its
        last shard is taken in. Returns ``rnd``."""
        assert self.sid is not None
        fresh: list[Candidate] = []
        # Parents in ask order (not completion order) so ids are deterministic.
        for parent in rnd.parents:
            fp = parent.fingerprint
            shards = rnd.parts.get(fp, [])
            tally = rnd.tally.setdefault(fp, _Tally())
            for expansion in shards[rnd.taken.get(fp, 0):]:
                new = 0
                dups = expansion.duplicates
                for child in expansion.children:
                    if child.fingerprint in self.seen:
                        dups += 1
                        continue
                    self.seen.add(child.fingerprint)
                    rnd.parent_of[child.fingerprint] = parent.id
                    fresh.append(child)
                    new += 1
                # generated = every rewrite tried, so generated - duplicates - illegal is
                # exactly the number of new candidates recorded
                self.counters = self.counters.plus(
                    generated=max(expansion.attempted,
                                  len(expansion.children) + expansion.duplicates + expansion.illegal),
                    duplicates=dups, illegal=expansion.illegal,
                )
                tally.new += new
                tally.duplicates += dups
                tally.illegal += expansion.illegal
                tally.error = tally.error or expansion.error
                tally.remembered = tally.remembered or expansion.remembered
            rnd.taken[fp] = len(shards)
        rest = list(rnd.queue)
        ordered, predicted = self._measuring_order(fresh, rest)
        rnd.keys.update(predicted)
        new_fps = {c.fingerprint for c in fresh}
        stored = [c for c in ordered if c.fingerprint in new_fps]  # children skipped by prune are not
        for child in stored:  # in measuring order
            record = self.store.add_candidate(self.sid, child, predicted.get(child.fingerprint))
            self.fp_of[record.id] = child.fingerprint
            parent_id = rnd.parent_of[child.fingerprint]
            rnd.waiting[parent_id] = rnd.waiting.get(parent_id, 0) + 1
        for parent in rnd.parents:
            fp = parent.fingerprint
            if fp in rnd.complete and fp not in rnd.announced:
                rnd.announced.add(fp)
                self._announce(parent, rnd.tally[fp])
                if not rnd.waiting.get(parent.id):
                    self.store.mark_expanded(self.sid, parent.id)
        rnd.queue = deque(ordered)
        rnd.total += len(ordered) - len(rest)
        rnd.ranked = rnd.ranked or bool(predicted)
        return self._reuse_in(rnd, stored)

    def _announce(self, parent: CandidateRecord, tally: _Tally) -> None:
        message = f"{tally.new} new, {tally.duplicates} duplicate, {tally.illegal} illegal"
        if tally.error:
            message += f"; cannot replay: {tally.error.strip()}"
        elif tally.remembered:
            message += "; expanded by an earlier search (from the cache)"
        self._emit(EventKind.EXPANDED, parent, message=message)

    def _fill(self) -> None:
        """Submit the current round's next children, up to the in-flight cap and the budget."""
        rnd = self.current
        if rnd is None:
            return
        jobs = []
        while rnd.queue and len(rnd.measuring) < self.in_flight_cap:
            left = self._candidates_left()
            if left is not None and left <= 0:
                break
            child = self._next_child(rnd, self._gated(rnd))
            if child is None:
                break
            rnd.take_place(child.fingerprint)
            job = Job(next(self.job_ids), JobKind.EVALUATE, (child,), cutoff=self._cutoff(), contend=self._contend())
            rnd.measuring[job.id] = child
            jobs.append(job)
        if jobs:
            self.executor.submit(self.workload, self.root, jobs)

    @staticmethod
    def _next_child(rnd: _Round, gated: bool = False) -> Candidate | None:
        """The next child to measure: the queue's first, except while the round's expansions
        are still coming in (or, ``gated``, while the next round's are), when only one
        expected within ``STREAM_GATE`` of the round's best so far may go (None: the rest
        wait for those expansions)."""
        if (rnd.expanded() and not gated) or not rnd.keys:
            return rnd.queue.popleft()
        bar = _Run._gate_bar(rnd)
        for i, child in enumerate(rnd.queue):
            if rnd.keys.get(child.fingerprint, math.inf) <= bar:
                del rnd.queue[i]
                return child
        return None

    @staticmethod
    def _gate_bar(rnd: _Round) -> float:
        """The slowest prediction a likely winner of ``rnd`` may have (it has predictions)."""
        return min(rnd.keys.values()) + STREAM_GATE

    @staticmethod
    def _likely(rnd: _Round) -> int:
        """Queued children of ``rnd`` expected within ``STREAM_GATE`` of its best prediction
        (all of them when it has no predictions)."""
        if not rnd.keys:
            return len(rnd.queue)
        bar = _Run._gate_bar(rnd)
        return sum(rnd.keys.get(c.fingerprint, math.inf) <= bar for c in rnd.queue)

    def _merging(self, rnd: _Round | None) -> bool:
        """Whether ``rnd`` takes the next round in (``_merge``): it is measured in the cost
        model's order and the strategy takes asks before a round is completely measured."""
        return rnd is not None and rnd.ranked and not self.strategy.whole_rounds

    def _gated(self, rnd: _Round) -> bool:
        """Children beyond the gate wait, once the early ask's own children are placed, while
        the ask is pending or the next round is being expanded from its answer: that round's
        children are to be measured before this round's also-rans (they join one queue,
        ``_merge``), and the expanders keep the CPU meanwhile. Which children are placed
        before a merge then depends on the predictions alone, never on timing."""
        return (self._merging(rnd) and rnd.placed >= rnd.open_until
                and (bool(rnd.ask_after) or self.next is not None))

    def _cutoff(self) -> float | None:
        """Seconds per call beyond which a candidate is timed by its verification call alone:
        CUTOFF_FACTOR times the best so far, and never under CUTOFF_FLOOR_SECONDS, where a
        first call's cold caches could make a contender look that slow."""
        if not self.top or self.top[0].seconds is None:
            return None
        return max(CUTOFF_FACTOR * self.top[0].seconds, CUTOFF_FLOOR_SECONDS)

    def _contend(self) -> float | None:
        """Seconds per call beyond which a candidate cannot be the new best by a margin the
        timing noise would hide (CONTEND_FACTOR times the best so far): it is timed with the
        fewest samples, enough to rank it among the slower ones."""
        if not self.top or self.top[0].seconds is None:
            return None
        return CONTEND_FACTOR * self.top[0].seconds

    def _take(self, result: JobResult) -> None:
        """Record one finished job (or one shard of an expansion) of either round."""
        job = result.job
        nxt, cur = self.next, self.current
        if result.expansion is not None:
            for rnd in (nxt, cur):
                if rnd is not None and job.id in rnd.expanding:
                    self._shard_in(rnd, job.id, result)
                    return
            return  # a job abandoned earlier
        if cur is None or job.id not in cur.measuring:
            return  # a job abandoned earlier
        del cur.measuring[job.id]
        for m in result.measurements:
            self._measured(cur, m)

    def _shard_in(self, rnd: _Round, job_id: int, result: JobResult) -> None:
        """Keep one shard of a parent's expansion. In the round being measured, its children
        join the queue now, and once the last shard is in the next round is planned."""
        assert result.expansion is not None
        parent = rnd.expanding[job_id]
        rnd.parts.setdefault(parent.fingerprint, []).append(result.expansion)
        if result.final:
            del rnd.expanding[job_id]
            rnd.complete.add(parent.fingerprint)
        else:
            rnd.streamed = True
        if rnd is self.current:
            self._take_in(rnd)
            # A streamed round in the cost model's order plans its next round as soon as a
            # shard per worker is in (the first of each holds a likely winner: the next round
            # then grows from it while the rest of this one is still expanded).
            if self._merging(rnd) and len(rnd.parts.get(parent.fingerprint, ())) >= self.workers:
                self._plan_next(rnd)
            self._fill()
            if rnd.expanded():
                self._plan_next(rnd)

    def _measured(self, rnd: _Round, m: Measurement) -> None:
        """Record one child's measurement; its parent is expanded once all its children are.
        While an early ask is pending, the strategy hears of it only after the ask."""
        rnd.done += 1
        place = rnd.place.get(m.fingerprint)
        hold = bool(rnd.ask_after) and place is not None
        record = self._record(m, announce=True, tell=not hold)
        if place is not None:
            rnd.measured_places.add(place)
        if hold:
            assert place is not None
            rnd.held[place] = record
            if all(i in rnd.measured_places for i in range(rnd.ask_after)):
                self._early_ask(rnd)
        parent_id = rnd.parent_of.get(m.fingerprint)
        if parent_id is not None:
            rnd.waiting[parent_id] -= 1
            if rnd.waiting[parent_id] == 0 and self.fp_of.get(parent_id) in rnd.complete:
                assert self.sid is not None
                self.store.mark_expanded(self.sid, parent_id)

    def _measuring_order(self, fresh: list[Candidate], queued: Sequence[Candidate] = ()
                         ) -> tuple[list[Candidate], dict[str, float]]:
        """New children and those still queued from earlier shards of the round, in measuring
        order, and the predictions (by fingerprint; none: proposal order).

        Only new children are ever pruned (queued ones are stored already), so pruning is
        left out while others are queued. Children skipped by ``prune`` leave ``seen``
        again: another parent may propose them later.
        """
        if self.guide is None:
            return [*queued, *fresh], {}
        c = self.config
        elapsed, evaluated = self.elapsed(), self.counters.measured
        ordering = self.guide.order(
            [*queued, *fresh],
            seconds_left=c.max_seconds - elapsed if c.max_seconds is not None else None,
            seconds_per_candidate=elapsed / evaluated if evaluated else None,
            candidates_left=c.max_candidates - evaluated if c.max_candidates is not None else None,
            prune=not queued,
        )
        for child in ordering.skipped:
            self.seen.discard(child.fingerprint)
        if ordering.skipped:
            self.counters = self.counters.plus(pruned=len(ordering.skipped))
        return ordering.children, ordering.predicted

    def _record_accuracy(self) -> None:
        if self.guide is not None and self.sid is not None:
            self.store.update_search(self.sid, model_accuracy=self.guide.accuracy())

    def _record(self, m: Measurement, *, announce: bool, tell: bool = True) -> CandidateRecord:
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
        self.counters = self.counters.plus(evaluated=1, ok=int(ok), failed=int(not ok),
                                           reused=int(m.reused_candidate_id is not None))
        self.store.update_search(self.sid, counters=self.counters, elapsed_seconds=self.elapsed())
        if tell:
            self.strategy.tell(record)
        if self.guide is not None:
            self.guide.learn(record)
        improved = self._offer(record)
        if announce:
            self._emit(EventKind.EVALUATED, record, message=origin_text(record))
            if improved:
                self._emit(EventKind.NEW_BEST, record, message=f"candidate {record.id}, depth {record.depth}")
        return record

    def _offer(self, record: CandidateRecord) -> bool:
        """Keep ``record`` in the top list if it is ok and fast; True when it is the new best."""
        if record.status is not Status.OK or record.seconds is None:
            return False
        previous = self.top[0].id if self.top else None
        self.top = sorted([r for r in self.top if r.id != record.id] + [record], key=rank_key)[:TOP_N]
        return self.top[0].id == record.id and previous != record.id

    def _candidate(self, record: CandidateRecord) -> Candidate:
        if record.fingerprint == self.root.fingerprint:
            return self.root
        return Candidate(
            schedule=record.schedule, c_source=record.c_source, fingerprint=record.fingerprint,
            proc_text=record.proc_text, depth=record.depth,
            parent=self.fp_of.get(record.parent_id) if record.parent_id is not None else None,
            features=record.features,
        )

    # ------------------------------------------------------------------ finish

    def _finish(self, status: SearchStatus) -> SearchOutcome:
        assert self.sid is not None
        self._record_accuracy()
        best = self.top[0] if self.top else None
        best_seconds = best.seconds if best else None
        best_speedup = best.speedup if best else None
        baseline = self.baseline
        if best is not None and status is not SearchStatus.INTERRUPTED:
            best, best_seconds, best_speedup, baseline = self._finalists(best)
        elif best is not None:
            self._emit(EventKind.FINALISTS, message="interrupted: finalists not re-measured; "
                                                    "the search's own times stand")
        self.phase = Phase.DONE
        elapsed = self.elapsed()
        self.store.update_search(
            self.sid, status=status, ended_at=time.time(), counters=self.counters, elapsed_seconds=elapsed,
            best_candidate_id=best.id if best else None, best_seconds=best_seconds, best_speedup=best_speedup,
            baseline_seconds=baseline,
        )
        self._emit(EventKind.FINISHED, self.top[0] if self.top else best, message=status.value)
        return SearchOutcome(self.sid, status, best, best_seconds, best_speedup, baseline, self.counters, elapsed)

    def _finalists(self, best: CandidateRecord) -> tuple[CandidateRecord, float | None, float | None, float | None]:
        """Re-measure the top candidates and the root side by side; pick the winner from that.

        Falls back to the search's own measurements (and says so in the FINALISTS event)
        when the re-measurement cannot run, is stopped, or outlasts the time budget.
        """
        assert self.sid is not None and self.root_record is not None
        fallback = (best, best.seconds, best.speedup, self.baseline)
        top = [
            r for r in self.store.top_candidates(self.sid, max(1, self.config.finalists))
            if r.status is Status.OK and r.id != self.root_record.id
        ]
        if not top:
            return fallback
        contenders = [self.root_record, *top]
        self.phase = Phase.REMEASURING
        self._emit(EventKind.TICK, message=f"re-measuring {len(contenders)} side by side")
        job = Job(next(self.job_ids), JobKind.REMEASURE, tuple(self._candidate(r) for r in contenders))
        try:
            self.executor.submit(self.workload, self.root, [job])
            ms = self._remeasured(job)
        except Exception as e:  # noqa: BLE001 - keep the search's result; report why
            self._cancel()
            self._emit(EventKind.FINALISTS, message=f"re-measurement failed: {type(e).__name__}: {e}")
            return fallback
        if ms is None:
            self._cancel()
            return fallback
        root_m = ms[0] if ms else None
        reference = root_m.seconds if root_m and root_m.status is Status.OK and root_m.seconds else self.baseline
        timed = [
            dataclasses.replace(
                r,
                timing=m.timing,
                speedup=(reference / m.seconds) if reference else None,
                gflops=self.workload.flops / m.seconds / 1e9 if self.workload.flops else None,
            )
            for r, m in zip(contenders, ms, strict=False)
            if m.status is Status.OK and m.seconds is not None and m.seconds > 0
        ]
        timed.sort(key=rank_key)
        if not timed:
            self._emit(EventKind.FINALISTS, message="no finalist re-measured ok; keeping the search's best")
            return fallback
        winner = timed[0]
        # From here on events show the side-by-side times: they decide the winner.
        self.top = timed[:TOP_N]
        self._emit(EventKind.FINALISTS, winner, message=f"re-measured {len(contenders)} side by side",
                   top=tuple(timed))
        stored = self.store.get_candidate(winner.id)
        return stored, winner.seconds, winner.speedup, reference

    def _remeasured(self, job: Job) -> tuple[Measurement, ...] | None:
        """The re-measurement's results, or None (after saying why) when a stop or the end
        of the time budget (plus a little grace) comes first."""
        limit = self.config.max_seconds
        while True:
            if self.stop.is_set():
                self._emit(EventKind.FINALISTS, message="stopped during the re-measurement; "
                                                        "the search's own times stand")
                return None
            if limit is not None and self.elapsed() >= limit + FINALIST_GRACE_SECONDS:
                self._emit(EventKind.FINALISTS, message="the re-measurement outlasted the time budget; "
                                                        "the search's own times stand")
                return None
            for result in self.executor.poll(POLL_SECONDS):
                if result.job.id == job.id:
                    return result.measurements
            self._tick()
