"""``run_search``: the one loop that asks, expands, deduplicates, evaluates, stores and tells.

A round takes ``expand_batch`` parents from the strategy, expands them all in parallel,
records every child whose C is new to this search, then submits all of them for
evaluation at once (so every worker stays busy) and records each measurement as it
streams back. The driver is the store's only writer.

Crash safety: children are stored as ``pending`` before they are evaluated, and a parent
is marked expanded only once all its new children are measured. A search killed half-way
is resumed by re-evaluating its pending candidates and re-expanding unfinished parents;
fingerprint dedup against the store makes the re-expansion cheap.

``stop`` and the budgets are checked between streamed results: an evaluation already
running is abandoned (its iterator is closed) rather than waited for.

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
import threading
import time
from collections.abc import Callable, Iterator, Sequence

from schedsearch.core import (
    Candidate,
    CandidateRecord,
    CostModel,
    CostModelMode,
    Counters,
    EventKind,
    Executor,
    Measurement,
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


def _close(iterator: Iterator[object]) -> None:
    close = getattr(iterator, "close", None)
    if close is not None:
        close()


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
    # ------------------------------------------------------------------ driver

    def execute(self, search_id: int | None) -> SearchOutcome:
        if search_id is None:
            self.sid = self.store.create_search(self.workload, self.config, self.executor.machine())
        else:
            self.sid = search_id
        try:
            if search_id is None:
                self._start()
            else:
                self._resume()
            status = self._search()
            return self._finish(status)
        except KeyboardInterrupt:
            self._abort(SearchStatus.INTERRUPTED)
            raise
        except SchedsearchError as e:
            self._abort(SearchStatus.FAILED, str(e))
            # Tell the caller which search stopped, so it can say how to resume it.
            if e.search_id is None:
                e.search_id = self.sid
            raise
        except BaseException as e:
            self._abort(SearchStatus.FAILED, f"internal error: {type(e).__name__}: {e}")
            raise

    def elapsed(self) -> float:
        return self.prior_elapsed + (self.clock() - self.t0)

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
        self.on_event(SearchEvent(
            kind=kind, search_id=self.sid, elapsed=self.elapsed(), counters=self.counters, record=record,
            best=top[0] if top else None, top=top, message=message,
        ))

    # ------------------------------------------------------------------ start / resume

    def _start(self) -> None:
        assert self.sid is not None
        self.root_record = self.store.add_candidate(self.sid, self.root)
        self.fp_of[self.root_record.id] = self.root.fingerprint
        self.seen.add(self.root.fingerprint)
        self._emit(EventKind.STARTED, message=f"search {self.sid} of {self.workload.label}")
        self._baseline()
        self._seed()

    def _resume(self) -> None:
        assert self.sid is not None
        search = self.store.get_search(self.sid)
        self.counters = search.counters
        self.prior_elapsed = search.elapsed_seconds
        self.baseline = search.baseline_seconds
        self.store.update_search(self.sid, status=SearchStatus.RUNNING, failure="")
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
            self._evaluate([self._candidate(r) for r in pending], {}, {})

    def _baseline(self) -> None:
        """Evaluate the root against itself; its median is the baseline."""
        assert self.sid is not None
        iterator = self.executor.evaluate(self.workload, self.root, [self.root])
        try:
            m = next(iterator, None)
        finally:
            _close(iterator)
        if m is None:
            raise SearchError(f"the executor returned no measurement for the unscheduled {self.workload.label}")
        if m.status is not Status.OK or m.seconds is None or m.seconds <= 0:
            self.store.record_measurement(self.sid, dataclasses.replace(m, measured_at=self.elapsed()), None, None)
            self.counters = self.counters.plus(evaluated=1, failed=1)
            detail = f": {m.error.strip()}" if m.error.strip() else ""
            raise SearchError(f"the unscheduled {self.workload.label} failed ({m.status.value}){detail}")
        self.baseline = m.seconds
        record = self._record(m, announce=False)
        self.root_record = record
        self.store.update_search(self.sid, baseline_seconds=self.baseline)
        self._emit(EventKind.BASELINE, record, message=f"baseline {m.seconds:.3g} s")

    # ------------------------------------------------------------------ the loop

    def _seed(self) -> None:
        """Record the warm-start seeds as children of the root and evaluate them first."""
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
        self._evaluate(fresh, {}, {})

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

    def _budget_spent(self) -> bool:
        c = self.config
        if c.max_seconds is not None and self.elapsed() >= c.max_seconds:
            return True
        return c.max_candidates is not None and self.counters.measured >= c.max_candidates

    def _should_stop(self) -> bool:
        return self.stop.is_set() or self._budget_spent()

    def _search(self) -> SearchStatus:
        while True:
            if self.stop.is_set():
                return SearchStatus.INTERRUPTED
            if self._budget_spent() or self.strategy.exhausted():
                return SearchStatus.COMPLETED
            asked = self.strategy.ask(max(1, self.config.expand_batch))
            if not asked:
                return SearchStatus.COMPLETED
            parents = [p for p in asked if p.depth < self.config.max_depth]
            if parents:
                self._round(parents)

    def _round(self, parents: Sequence[CandidateRecord]) -> None:
        assert self.sid is not None
        expansions = {}
        iterator = self.executor.expand(self.workload, [self._candidate(p) for p in parents])
        try:
            for expansion in iterator:
                expansions[expansion.parent] = expansion
                if self._should_stop():
                    # Keep what was expanded: its children are recorded as pending below and
                    # measured by a resume, while unfinished parents stay unexpanded.
                    break
        finally:
            _close(iterator)
        fresh: list[Candidate] = []
        parent_of: dict[str, int] = {}
        expanded: list[CandidateRecord] = []
        # Parents in ask order (not completion order) so ids are deterministic.
        for parent in parents:
            expansion = expansions.get(parent.fingerprint)
            if expansion is None:
                continue
            expanded.append(parent)
            new = 0
            dups = expansion.duplicates
            for child in expansion.children:
                if child.fingerprint in self.seen:
                    dups += 1
                    continue
                self.seen.add(child.fingerprint)
                parent_of[child.fingerprint] = parent.id
                fresh.append(child)
                new += 1
            # generated = every rewrite tried, so generated - duplicates - illegal is exactly
            # the number of new candidates recorded
            self.counters = self.counters.plus(
                generated=max(expansion.attempted, len(expansion.children) + expansion.duplicates + expansion.illegal),
                duplicates=dups, illegal=expansion.illegal,
            )
            message = f"{new} new, {dups} duplicate, {expansion.illegal} illegal"
            if expansion.error:
                message += f"; cannot replay: {expansion.error.strip()}"
            self._emit(EventKind.EXPANDED, parent, message=message)
        ordered, predicted = self._measuring_order(fresh)
        waiting: dict[int, int] = {}
        for child in ordered:
            record = self.store.add_candidate(self.sid, child, predicted.get(child.fingerprint))
            self.fp_of[record.id] = child.fingerprint
            waiting[parent_of[child.fingerprint]] = waiting.get(parent_of[child.fingerprint], 0) + 1
        for parent in expanded:
            if parent.id not in waiting:
                self.store.mark_expanded(self.sid, parent.id)
        if ordered and not self._should_stop():
            self._evaluate(ordered, parent_of, waiting)
        self._record_accuracy()

    def _measuring_order(self, children: list[Candidate]) -> tuple[list[Candidate], dict[str, float]]:
        """The children to measure, in order, and their predictions (by fingerprint).

        Children skipped by ``prune`` leave ``seen`` again: another parent may propose them later.
        """
        if self.guide is None:
            return children, {}
        c = self.config
        elapsed, evaluated = self.elapsed(), self.counters.measured
        ordered, predicted, skipped = self.guide.order(
            children,
            seconds_left=c.max_seconds - elapsed if c.max_seconds is not None else None,
            seconds_per_candidate=elapsed / evaluated if evaluated else None,
            candidates_left=c.max_candidates - evaluated if c.max_candidates is not None else None,
        )
        for child in skipped:
            self.seen.discard(child.fingerprint)
        if skipped:
            self.counters = self.counters.plus(pruned=len(skipped))
        return ordered, predicted

    def _record_accuracy(self) -> None:
        if self.guide is not None and self.sid is not None:
            self.store.update_search(self.sid, model_accuracy=self.guide.accuracy())

    def _evaluate(self, candidates: Sequence[Candidate], parent_of: dict[str, int], waiting: dict[int, int]) -> None:
        """Take what earlier searches measured, evaluate the rest (within the candidate
        budget), and record each result as it streams back."""
        assert self.sid is not None
        if self.stop.is_set():
            return
        reused, candidates = self._reuse(candidates)
        if self.config.max_candidates is not None:
            candidates = candidates[: max(0, self.config.max_candidates - self.counters.measured)]
        if not candidates and not reused:
            return
        iterator = self.executor.evaluate(self.workload, self.root, candidates) if candidates else iter(())
        try:
            for m in itertools.chain(reused, iterator):
                self._record(m, announce=True)
                parent_id = parent_of.get(m.fingerprint)
                if parent_id is not None:
                    waiting[parent_id] -= 1
                    if waiting[parent_id] == 0:
                        self.store.mark_expanded(self.sid, parent_id)
                if self._should_stop():
                    return
        finally:
            _close(iterator)

    def _record(self, m: Measurement, *, announce: bool) -> CandidateRecord:
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
        best = self.top[0] if self.top else None
        best_seconds = best.seconds if best else None
        best_speedup = best.speedup if best else None
        baseline = self.baseline
        if best is not None:
            best, best_seconds, best_speedup, baseline = self._finalists(best)
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
        when the re-measurement cannot run.
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
        try:
            ms = self.executor.remeasure(self.workload, self.root, [self._candidate(r) for r in contenders])
        except Exception as e:  # noqa: BLE001 - keep the search's result; report why
            self._emit(EventKind.FINALISTS, message=f"re-measurement failed: {type(e).__name__}: {e}")
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
