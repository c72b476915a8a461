"""``run_search``: the one loop that asks, expands, deduplicates, evaluates, stores and tells.

One run of a search opens it, runs its rounds and closes it. A new search stores the
root and measures it for the baseline while the root's expansion already runs, then
records the warm start's seeds; a resumed one rebuilds its counters, the strategy's
frontier and the fastest records from the store, marks the rows found tampered, and
measures first what its last run left pending - as rebuilt from their schedules: nothing
a stored row holds is built (``inherited``). The rounds - ask, expand, deduplicate, store, measure, tell, the next
round's expansion overlapping this one's measurements - are the ``pipeline``'s; they run
until a budget is spent, nothing is left, or ``stop`` is set. The run closes with the
finalists' side-by-side re-measurement and the outcome (``finalists``).

The time budget is wall time and includes the finalists' re-measurement (the search stops
early enough for it), but not the wait for the baseline: the unscheduled kernel's answer
key and timing cost what the problem's size makes them cost, whatever the search does. A
stop (Ctrl-C, SIGTERM) is announced at once with a ``stopping`` event, work in flight is cancelled, and no re-measurement runs. An exception marks the
search failed (interrupted, for ``KeyboardInterrupt``) before it propagates; candidates
being evaluated stay pending, and a resume measures them.

Knowledge from earlier searches: candidates whose C an earlier search measured the same
way take that measurement instead of being measured (``pipeline``; ``search.reuse`` says
when), and a new search's ``seeds`` — schedules earlier searches found, replayed on this
workload by the caller — are recorded as children of the root (depth: their length) and
evaluated right after the baseline, before anything is expanded (``_seed``). Reused
measurements do not count against ``max_candidates``, which counts what this search
measures (``Counters.measured``).

The pieces: ``pipeline`` runs the rounds (with ``asking``, ``parts``, ``intake``
and ``measuring``), ``rounds`` holds a round's record and what one round alone
decides (which child is next, the gate of likely winners), ``budget`` what is spent and
left, ``ledger`` the run's books (every store write of a measurement, every event),
``finalists`` the end; this module opens and closes a run around them.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
import time
from collections.abc import Callable, Sequence

from schedsearch.core import (
    Candidate,
    CostModel,
    CostModelMode,
    EventKind,
    Executor,
    Job,
    JobKind,
    Phase,
    SearchConfig,
    SearchEvent,
    SearchStatus,
    SearchStrategy,
    Status,
    Store,
    Workload,
)
from schedsearch.errors import SchedsearchError, SearchError
from schedsearch.search.finalists import FINALIST_GRACE_SECONDS, finish
from schedsearch.search.guidance import Guidance
from schedsearch.search.inherited import Inherited
from schedsearch.search.lease import LeaseKeeper
from schedsearch.search.ledger import TICK_SECONDS, TOP_N, Ledger, ObserverError
from schedsearch.search.loop_resume import resume_run
from schedsearch.search.measuring import CUTOFF_FACTOR, CUTOFF_FLOOR_SECONDS
from schedsearch.search.outcome import SearchOutcome
from schedsearch.search.pipeline import POLL_SECONDS, Pipeline, Stopped
from schedsearch.search.ranking import ALIKE
from schedsearch.search.rounds import EARLY_ASK_SHARE, STREAM_GATE

#: A baseline whose measuring took this long says so (and that the budget does not count it).
UNBILLED_NOTE_SECONDS = 10.0

# The loop's constants live with the code that reads them (patch them there); they stay
# importable from here.
__all__ = [
    "CUTOFF_FACTOR",
    "CUTOFF_FLOOR_SECONDS",
    "EARLY_ASK_SHARE",
    "FINALIST_GRACE_SECONDS",
    "POLL_SECONDS",
    "STREAM_GATE",
    "TICK_SECONDS",
    "TOP_N",
    "run_search",
]


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
    started: float | None = None,
    lease: LeaseKeeper | None = None,
    inherited: Inherited | None = None,
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

    ``started``: when the caller's command began, on ``clock``'s scale (None: now). The
    search's own clock (``elapsed``, every ``measured_at``) and its time budget start now,
    with the workers ready (``Ledger.budget_spent``); the seconds in between - loading the
    workload, starting the workers - are kept as ``spent.starting``.

    ``inherited`` (a resume): the rows of the earlier runs rebuilt from their schedules, and
    those found tampered (``search.inherited.rebuild_inherited``). Nothing a row of an earlier
    run holds is built: a row not rebuilt there is never measured again, nor re-measured among
    the finalists; the tampered ones are marked ``tampered`` and never used. None: no row of an
    earlier run is built.

    ``lease``: the driver's hold on the search (the caller releases it). A new search is
    created leased to it; a resumed one is taken (``SearchBusyError``, the search left as it
    is, when another live driver runs it; nothing when ``lease`` holds it already).
    """
    if config.cost_model is CostModelMode.OFF:
        cost_model = None
    head_start = clock() - started if started is not None else 0.0
    run = Run(
        workload,
        root,
        strategy,
        executor,
        store,
        config,
        on_event,
        stop or threading.Event(),
        clock,
        cost_model,
        seeds,
        head_start,
        inherited or Inherited(),
    )
    return run.execute(search_id, lease)


class Run:
    """One run of ``run_search`` (private: one instance per call): opens the search, runs
    its rounds (``Pipeline``) and closes it (``finalists.finish``)."""

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
        head_start: float = 0.0,
        inherited: Inherited = Inherited(),
    ) -> None:
        self.workload, self.root, self.strategy = workload, root, strategy
        self.inherited = inherited
        self.executor, self.store, self.config = executor, store, config
        self.stop = stop
        self.seeds = tuple(seeds)
        guide = (
            Guidance(
                cost_model,
                config.seed,
                prune=config.cost_model is CostModelMode.PRUNE,
                workload_key=workload.key,
                apart=ALIKE if config.model_leads else 0.0,
            )
            if cost_model is not None
            else None
        )
        self.job_ids = itertools.count(1)
        self.ledger = Ledger(
            workload,
            root,
            strategy,
            store,
            on_event,
            clock,
            guide,
            activity=self._activity,
            head_start=head_start,
        )
        self.pipeline = Pipeline(
            workload, root, strategy, executor, store, config, self.ledger, guide, stop, self.job_ids
        )

    def _activity(self) -> str:
        """What events say the pipeline is doing (the ledger is made before the pipeline)."""
        return self.pipeline.activity()

    # ------------------------------------------------------------------ driver

    def execute(self, search_id: int | None, lease: LeaseKeeper | None = None) -> SearchOutcome:
        ledger, pipeline = self.ledger, self.pipeline
        if search_id is None:
            create = lease.create if lease is not None else self.store.create_search
            ledger.sid = create(self.workload, self.config, self.executor.machine())
        else:
            if lease is not None:  # before anything is written: a busy search is left untouched
                lease.hold(search_id)
            ledger.sid = search_id
        try:
            try:
                if search_id is None:
                    ledger.spend(starting=ledger.head_start)  # a resume adds it to the stored counters
                    self._start()
                else:
                    self._resume()
                status = pipeline.run()
            except Stopped:
                status = SearchStatus.INTERRUPTED
            pipeline.keep_expanded()
            pipeline.cancel()
            return finish(
                ledger,
                status,
                self.executor,
                pipeline.budget,
                stop=self.stop,
                job_ids=self.job_ids,
                cancel=pipeline.cancel,
                poll_seconds=POLL_SECONDS,
            )
        except KeyboardInterrupt:
            pipeline.cancel()
            ledger.abort(SearchStatus.INTERRUPTED)
            raise
        except SchedsearchError as e:
            pipeline.cancel()
            ledger.abort(SearchStatus.FAILED, str(e))
            # Tell the caller which search stopped, so it can say how to resume it.
            if e.search_id is None:
                e.search_id = ledger.sid
            raise
        except ObserverError as e:
            # A progress callback that raises is the caller's: the search is interrupted
            # (resumable, everything measured kept) and the caller gets its exception back.
            pipeline.cancel()
            ledger.abort(SearchStatus.INTERRUPTED, f"stopped by the progress observer, which raised {e}")
            raise e.original from None
        except BaseException as e:
            pipeline.cancel()
            ledger.abort(SearchStatus.FAILED, f"internal error: {type(e).__name__}: {e}")
            raise

    # ------------------------------------------------------------------ start / resume

    def _start(self) -> None:
        ledger = self.ledger
        assert ledger.sid is not None
        ledger.root_record = self.store.add_candidate(ledger.sid, self.root)
        ledger.fp_of[ledger.root_record.id] = self.root.fingerprint
        self.pipeline.seen.add(self.root.fingerprint)
        ledger.emit(EventKind.STARTED, message=f"search {ledger.sid} of {self.workload.label}{self._start_note()}")
        self._baseline(expand_root=True)
        self._seed()

    def _resume(self) -> None:
        resume_run(self)

    def _start_note(self) -> str:
        """What the run's start took, said when the search's clock starts (the budget does not count it)."""
        head = self.ledger.head_start
        return f" (after {head:.1f} s starting; the budget counts from here)" if head >= 0.05 else ""

    def _baseline(self, expand_root: bool = False) -> None:
        """Evaluate the root against itself; its median is the baseline. ``expand_root``:
        round 1, the root's expansion, starts at once too - Exo works while the baseline is
        measured (the first expansion is the longest wait before anything new is measured)."""
        ledger = self.ledger
        assert ledger.sid is not None and ledger.root_record is not None
        ledger.phase = Phase.BASELINE
        job = Job(next(self.job_ids), JobKind.EVALUATE, (self.root,))
        waited_from = ledger.clock()
        self.executor.submit(self.workload, self.root, [job])
        if expand_root:
            self.pipeline.expand_first([ledger.root_record])
        result = self.pipeline.wait_for(job)
        waited = ledger.clock() - waited_from
        ledger.unbilled += waited
        ledger.spend(baseline_wait=waited)
        ledger.spend(measurements=result.measurements)
        m = result.measurements[0] if result.measurements else None
        if m is None:
            raise SearchError(f"the executor returned no measurement for the unscheduled {self.workload.label}")
        if m.status is not Status.OK or m.seconds is None or m.seconds <= 0:
            self.store.record_measurement(ledger.sid, dataclasses.replace(m, measured_at=ledger.elapsed()), None, None)
            ledger.counters = ledger.counters.plus(evaluated=1, failed=1)
            detail = f": {m.error.strip()}" if m.error.strip() else ""
            raise SearchError(f"the unscheduled {self.workload.label} failed ({m.status.value}){detail}")
        ledger.baseline = m.seconds
        record = ledger.record(m, announce=False, tell=False)
        # The strategy must not offer a root that is being expanded already.
        expanding = self.pipeline.expanding(record)
        self.strategy.tell(dataclasses.replace(record, expanded=True) if expanding else record)
        ledger.root_record = record
        self.store.update_search(ledger.sid, baseline_seconds=ledger.baseline)
        ledger.emit(
            EventKind.BASELINE,
            record,
            message=f"baseline {m.seconds:.3g} s"
            + (
                f" (measuring it took {ledger.unbilled:.1f} s, which the budget does not count)"
                if ledger.unbilled >= UNBILLED_NOTE_SECONDS
                else ""
            ),
        )

    # ------------------------------------------------------------------ earlier searches

    def _seed(self) -> None:
        """Record the warm-start seeds as children of the root, to be measured first."""
        ledger = self.ledger
        assert ledger.sid is not None
        fresh: list[Candidate] = []
        for seed in self.seeds:
            if seed.fingerprint in self.pipeline.seen:
                continue
            self.pipeline.seen.add(seed.fingerprint)
            seed = dataclasses.replace(seed, parent=self.root.fingerprint, depth=len(seed.schedule))
            record = self.store.add_candidate(ledger.sid, seed)
            ledger.fp_of[record.id] = seed.fingerprint
            fresh.append(seed)
        if not fresh:
            return
        ledger.counters = ledger.counters.plus(warm_started=len(fresh))
        noun = "schedule" if len(fresh) == 1 else "schedules"
        ledger.emit(EventKind.WARM_START, message=f"{len(fresh)} {noun} from earlier searches, evaluated first")
        self.pipeline.measure_first(fresh)
