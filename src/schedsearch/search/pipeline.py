"""``Pipeline``: the rounds of a running search - ask, expand, deduplicate, store, measure, tell.

The loop is a pipeline over an executor's ``submit`` / ``poll``. A round's parents (asked of
the strategy, ``asking``) are expanded in parallel; its new children - C new to this search -
are stored as ``pending`` and measured (``measuring``), the likely winners first. While round
k is measured, round k+1's parents are already being expanded, so the workers that build and
benchmark never wait for Exo. The parts: ``budget`` (what is spent and left), ``asking`` (the
next round, and whether one is started), ``parts`` (a large parent's two parts), ``measuring``
(the queue and its bars), ``confirm`` (a new best measured twice), ``reuse`` (earlier
searches' measurements), ``rounds`` (one round's record and what it alone decides).

Guarantees:

- Same seed, same search. Round k+1's parents are asked for when round k's measuring starts,
  or - when round k is measured in the cost model's order, or that ask found no parent - once
  its first children in measuring order are measured (an early ask: the next round then grows
  from this one's likely best). Until then the round's results are held back from the
  strategy, so what it has seen when asked does not depend on the order measurements complete
  in. A round in the cost model's order takes the next one in (``_merge``) once that one's
  expansions are in and its own likely winners have left the queue: one queue in predicted
  order, a deeper likely winner before a shallower also-ran. Exceptions, each bought for
  latency and said where it is made: a round expanded while nothing is queued streams its
  shards and starts measuring with the first (``Job.stream``), a leading model's round also
  merges with its first shard and measures built also-rans while the runner idles
  (``measuring``), and a time budget makes everything depend on how long work takes.
- Crash safety: children are stored as ``pending`` before they are evaluated, and a parent is
  marked expanded only once all its new children (of its last part) are measured; a resume
  re-evaluates the pending and re-expands the unfinished. Expansions that came in for a round
  that never started measuring are stored as pending when the search ends (``keep_expanded``).
- The driver is the store's only writer and never runs Exo or a compiler itself: it looks at
  ``stop`` and the budget at least every ``POLL_SECONDS`` and sends a ``tick`` event at least
  once a second (``Ledger.tick``).
- Reused measurements (``search.reuse``) do not count against ``max_candidates``, which counts
  what this search measures (``Counters.measured``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections import deque
from collections.abc import Iterator

from schedsearch.core import (
    Candidate,
    CandidateRecord,
    EventKind,
    Executor,
    Job,
    JobResult,
    Measurement,
    Phase,
    SearchConfig,
    SearchStatus,
    SearchStrategy,
    Store,
    Workload,
)
from schedsearch.search.asking import Asker
from schedsearch.search.budget import Budget
from schedsearch.search.confirm import Confirmations, confirmed
from schedsearch.search.guidance import Guidance
from schedsearch.search.intake import Intake
from schedsearch.search.ledger import Ledger
from schedsearch.search.measuring import CONTEND_FACTOR, CUTOFF_FACTOR, CUTOFF_FLOOR_SECONDS, Measuring
from schedsearch.search.pace import Pace
from schedsearch.search.reuse import EarlierSearches
from schedsearch.search.rounds import (
    LEADING_SHARE,
    Round,
    absorb,
    activity_text,
    early_ask_point,
    final_part,
    leaders_in,
    likely,
)
from schedsearch.search.untried import UntriedLook
from schedsearch.stopping import stopped_improving

#: The longest the loop waits for results before it looks at ``stop`` and the budget again.
POLL_SECONDS = 0.25

# Names that lived here before the measuring queue and confirmations had modules of their own.
__all__ = [
    "CONTEND_FACTOR",
    "CUTOFF_FACTOR",
    "CUTOFF_FLOOR_SECONDS",
    "LEADING_SHARE",
    "POLL_SECONDS",
    "Pipeline",
    "Stopped",
    "confirmed",
]


class Stopped(Exception):
    """Raised inside the loop when ``stop`` is set while it waits for one job."""


class Pipeline:
    """The rounds of one run of ``run_search`` (one instance per run): the round whose
    children are measured (``current``), the one whose parents are expanded (``next``), and
    the C this search has seen (``seen``, to deduplicate against).

    The driver opens a run with ``expand_first`` (the root's round, while the baseline is
    measured: ``wait_for``) and ``measure_first`` (round 0), then ``run``s it; ``cancel``
    abandons the work in flight and ``keep_expanded`` keeps what came in for a round that
    never got to measuring.
    """

    def __init__(
        self,
        workload: Workload,
        root: Candidate,
        strategy: SearchStrategy,
        executor: Executor,
        store: Store,
        config: SearchConfig,
        ledger: Ledger,
        guide: Guidance | None,
        stop: threading.Event,
        job_ids: Iterator[int],
    ) -> None:
        self.strategy, self.executor, self.store, self.config = strategy, executor, store, config
        self.ledger, self.stop = ledger, stop
        self.seen: set[str] = set()
        self.current: Round | None = None  # children being measured
        self.next: Round | None = None  # parents being expanded
        self.budget = Budget(config, ledger)
        self.measuring = Measuring(workload, root, strategy, executor, config, ledger, self.budget, guide, job_ids)
        self.asker = Asker(
            workload,
            root,
            strategy,
            executor,
            config,
            ledger,
            self.budget,
            job_ids,
            workers=self.measuring.workers,
            in_flight_cap=self.measuring.in_flight_cap,
        )
        self.confirms = Confirmations(config.confirm_best, ledger, strategy)
        self.intake = Intake(
            store, ledger, self.measuring, self.asker.parts, EarlierSearches(config, store, executor, root, ledger)
        )
        self.untried = UntriedLook(guide, ledger)  # the stopping rule's model half
        # The last look that found nothing being measured (``_count_idle``; None: something was).
        self.idle_since: float | None = None

    @property
    def pace(self) -> Pace:
        """How fast this search expands and measures (the asker's, which judges late rounds)."""
        return self.asker.pace

    @pace.setter
    def pace(self, pace: Pace) -> None:
        self.asker.pace = pace

    # ------------------------------------------------------------------ for the driver

    def expand_first(self, parents: list[CandidateRecord]) -> None:
        """Start expanding the first round (the root's, while its baseline is measured)."""
        self.next = self.asker.submit(parents, self.current)

    def expanding(self, record: CandidateRecord) -> bool:
        """Whether ``record`` is a parent of the round being expanded."""
        return self.next is not None and any(p.id == record.id for p in self.next.parents)

    def measure_first(self, children: list[Candidate]) -> None:
        """Round 0: children measured before anything new (a warm start's seeds, or what the
        last run left pending); what earlier searches measured of them is reused."""
        self.current = self._reuse_in(Round(0, [], queue=deque(children), total=len(children)))

    def cancel(self) -> None:
        """Abandon work in flight: its candidates stay pending (a resume measures them)."""
        if self.executor.pending():
            with contextlib.suppress(Exception):  # already failing or finishing: best effort
                self.executor.cancel()
        self.current = self.next = None
        self.confirms.clear()

    def keep_expanded(self) -> None:
        """Record the children of the expansions that came in for a round that never got
        to measuring, as pending: a resume measures them instead of expanding again."""
        nxt = self.next
        if nxt is not None and nxt.complete:
            nxt.parents = [p for p in nxt.parents if p.fingerprint in nxt.complete]
            self._take_in(nxt)
        self.next = None

    def activity(self) -> str:
        """What the pipeline is doing, in a few words, for the live view."""
        return activity_text(self.ledger.phase, self.current, self.next)

    def _check_stop(self) -> None:
        if self.stop.is_set():
            self.ledger.phase = Phase.STOPPING
            self.ledger.emit(
                EventKind.STOPPING, message="stopping: cancelling the work in flight; everything measured is kept"
            )
            raise Stopped

    def wait_for(self, job: Job) -> JobResult:
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
            self.ledger.tick()

    def run(self) -> SearchStatus:
        """Run rounds until a budget is spent or nothing is left to expand or measure
        (``completed``); raises ``Stopped`` as soon as ``stop`` is set."""
        try:
            return self._rounds()
        finally:
            self._count_idle(ending=True)

    # ------------------------------------------------------------------ the rounds

    def _rounds(self) -> SearchStatus:
        while True:
            self._check_stop()
            left = self._candidates_left()
            measuring = bool(self.current and self.current.measuring)
            if self.budget.spent_out() or (left is not None and left <= 0 and not measuring):
                return SearchStatus.COMPLETED
            if self._stopped_improving():
                return SearchStatus.COMPLETED
            if self.current is None or self.current.finished():
                self._finish_round()
                if self.current is None and self.next is None:
                    return SearchStatus.COMPLETED
                if self.current is not None and self.current.finished():
                    continue  # a round with nothing new to measure
            self._merge()
            self._fill()
            self.ledger.phase = Phase.MEASURING if self.current is not None else Phase.EXPANDING
            self._count_idle()
            for result in self.executor.poll(POLL_SECONDS):
                self._take(result)
            self.ledger.tick()

    def _count_idle(self, ending: bool = False) -> None:
        """Count the wall time with no candidate being measured (``TimeSpent.idle``): the
        time since the last look counts when that look found nothing in flight. Looked at
        before every poll, where work is handed out, so the count is never more than a poll
        behind (the live view shows it as it grows)."""
        now = self.ledger.elapsed()
        if self.idle_since is not None:
            self.ledger.spend(idle=now - self.idle_since)
        busy = self.current is not None and bool(self.current.measuring)
        self.idle_since = None if busy or ending else now

    def _stopped_improving(self) -> bool:
        """Whether ``config.early_stop`` candidates in a row brought no new best
        (``Counters.since_best``), or, without it, ``config.auto_stop``'s rule says the
        stretch since the last real gain is long enough and the cost model predicts no
        untried child faster than the best (``schedsearch.stopping``, ``search.untried``). A new
        best still being confirmed is waited for: it may end the run of measurements without
        progress."""
        if self.confirms.pending():
            return False
        c = self.ledger.counters
        if self.config.early_stop is not None:
            return c.since_best >= self.config.early_stop
        if not (self.config.auto_stop and stopped_improving(c, self.ledger.search_seconds())):
            return False
        ahead = self.untried.count((self.current, self.next))
        self.ledger.counters = dataclasses.replace(c, untried_ahead=ahead)
        return ahead == 0

    def _candidates_left(self) -> int | None:
        """Evaluations the candidate budget still allows beyond those in flight."""
        return self.budget.candidates_left(len(self.current.measuring) if self.current is not None else 0)

    def _fill(self) -> None:
        """Submit the current round's next children (``Measuring.fill``)."""
        self.measuring.fill(self.current, self.next)

    def _start_expanding(self) -> Round | None:
        """The next round, its expansions submitted, or None (``Asker.start``)."""
        return self.asker.start(self.current, self.measuring.merging(self.current))

    def _finish_round(self) -> None:
        """Between rounds: the expanded round starts measuring, and the next parents are
        asked for - at once when the strategy has seen every earlier round's results (a round
        in proposal order), else once the round's first children in measuring order are
        measured too (``_arm_early_ask``)."""
        if self.current is not None:
            self._release(self.current)
        self.current = None
        nxt = self.next
        if nxt is not None and (nxt.expanded() or (nxt.streamed and nxt.has_new_shards())):
            # Measuring starts with what is in: the rest of a streamed expansion joins the
            # queue as it comes (``_take``), and the next round is planned when it is all in.
            self.next = None
            self.current = self._take_in(nxt)
            self.ledger.record_accuracy()
            if nxt.expanded() and self.measuring.merging(self.current):
                # Armed before anything is placed, its early ask counts from this round's start.
                self._plan_next(self.current)
                self._fill()
                return
            self._fill()  # measurements first: they keep the builders busy
            if not nxt.expanded():
                return
        self._plan_next(self.current)

    def _plan_next(self, cur: Round | None) -> None:
        """Ask for the next round's parents now, or arm an early ask in ``cur`` (whose
        expansions are all in)."""
        early = cur is not None and not cur.finished() and not self.strategy.whole_rounds
        if self.next is None and not (early and cur is not None and cur.ranked):
            self.next = self._start_expanding()
        if self.next is None and early and cur is not None:
            self._arm_early_ask(cur)

    def _arm_early_ask(self, rnd: Round) -> None:
        """Ask for the next parents once the round's next children in measuring order are
        measured (``rounds.early_ask_point``). Until then the round's results are held back
        from the strategy (``_measured``), so what it has seen when it is asked does not
        depend on the order in which measurements complete."""
        if rnd.ask_after:
            return  # armed already
        cap = self.measuring.in_flight_cap
        k = early_ask_point(rnd, cap)
        if rnd.ranked:
            rnd.open_until = k  # places beyond it wait behind the gate (``Measuring.gated``)
            if self.config.model_leads:
                # One in-flight cap of likely winners more while the next round is expanded,
                # then the merge: the model's picks are trusted to lead (``SearchConfig``).
                rnd.shut_at = k + cap
        if all(i in rnd.measured_places for i in range(k)):
            self.next = self._start_expanding()
            return
        rnd.ask_after = k

    def _early_ask(self, rnd: Round) -> None:
        """The round's first ``ask_after`` children are measured: tell the strategy those,
        ask for the next round's parents, then tell it the rest held back."""
        k, rnd.ask_after = rnd.ask_after, 0
        for i in sorted(p for p in rnd.held if p < k):
            self.strategy.tell(rnd.held.pop(i))
        if self.next is None:
            self.next = self._start_expanding()
        self._release(rnd)

    def _release(self, rnd: Round) -> None:
        """Tell the strategy every result the round still holds back (in measuring order)."""
        rnd.ask_after = 0
        for i in sorted(rnd.held):
            self.strategy.tell(rnd.held[i])
        rnd.held.clear()

    def _merge(self) -> None:
        """Take the next round into the current one (``Measuring.merging``) once both are
        ready: the next round's expansions are all in - or, streamed, its first shard - and
        every likely winner of the current round has left its queue (or its gate is shut).
        The merged queue is in the cost model's order, and the next ask comes after its own
        likely winners. Both conditions are met whatever order the work completes in."""
        cur, nxt = self.current, self.next
        # A streamed next round (nothing was queued when it was asked for) merges with its
        # first shard, as a streamed round starts measuring with it.
        ready = nxt is not None and (nxt.expanded() or (nxt.streamed and nxt.has_new_shards()))
        if cur is None or nxt is None or not ready or not self.measuring.merging(cur) or cur.placed < cur.open_until:
            return
        if likely(cur) and not cur.shut():
            return
        self._release(cur)
        absorb(cur, nxt)
        self.next = None
        self._take_in(cur)
        self.ledger.record_accuracy()
        self._plan_next(cur)  # armed before anything more is placed: the ask counts from here
        self._fill()

    # ------------------------------------------------------------------ results

    def _take(self, result: JobResult) -> None:
        """Record one finished job (or one shard of an expansion) of either round."""
        job = result.job
        nxt, cur = self.next, self.current
        # Time spent counts whether or not the job is still wanted: it was spent.
        self.ledger.spend(
            expanding=result.expansion.seconds if result.expansion is not None else 0.0,
            measurements=result.measurements,
        )
        if result.expansion is not None:
            for rnd in (nxt, cur):
                if rnd is not None and job.id in rnd.expanding:
                    self._shard_in(rnd, job.id, result)
                    return
            return  # a job abandoned earlier
        if cur is None or job.id not in cur.measuring:
            return  # a job abandoned earlier
        child = cur.measuring.pop(job.id)
        first = self.confirms.take(job.id)
        for m in result.measurements:
            m = self.ledger.place(m)
            if first is not None:
                m, note = self.confirms.settle(first, m)
                self._measured(cur, m, note)
            elif self.confirms.wanted(m):
                self.confirms.started(self.measuring.again(cur, child), m)
            else:
                self._measured(cur, m)

    def _shard_in(self, rnd: Round, job_id: int, result: JobResult) -> None:
        """Keep one shard of a parent's expansion. In the round being measured, its children
        join the queue now, and the next round is planned once enough of its shards are in
        (``rounds.leaders_in``) or the last one is."""
        assert result.expansion is not None
        parent = rnd.expanding[job_id]
        rnd.parts.setdefault(parent.fingerprint, []).append(result.expansion)
        if result.final:
            del rnd.expanding[job_id]
            rnd.complete.add(parent.fingerprint)
            self.pace.came_in(job_id, self.ledger.elapsed())
        else:
            rnd.streamed = True
        if rnd is self.current:
            self._take_in(rnd)
            if self.measuring.merging(rnd) and leaders_in(
                rnd.parts.get(parent.fingerprint, ()),
                parent.depth,
                workers=self.measuring.workers,
                model_leads=self.config.model_leads,
            ):
                self._plan_next(rnd)
            self._fill()
            if rnd.expanded():
                self._plan_next(rnd)

    def _measured(self, rnd: Round, m: Measurement, note: str = "") -> None:
        """Record one child's measurement (``note``: said with it); its parent is expanded
        once all its children are. While an early ask is pending, the strategy hears of it
        only after the ask."""
        rnd.done += 1
        self.pace.measured(self.ledger.elapsed())
        place = rnd.place.get(m.fingerprint)
        hold = bool(rnd.ask_after) and place is not None
        record = self.ledger.record(m, announce=True, tell=not hold, note=note)
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
            fp = self.ledger.fp_of.get(parent_id)
            if rnd.waiting[parent_id] == 0 and fp in rnd.complete and final_part(rnd, fp):
                assert self.ledger.sid is not None
                self.store.mark_expanded(self.ledger.sid, parent_id)

    def _take_in(self, rnd: Round) -> Round:
        """Take in the round's shards that came in since the last call (``Intake.take_in``);
        record what earlier searches measured of their new children. Returns ``rnd``."""
        return self._record_reused(rnd, self.intake.take_in(rnd, self.seen))

    def _reuse_in(self, rnd: Round) -> Round:
        """Record what earlier searches measured of the round's queued children."""
        return self._record_reused(rnd, self.intake.reused(rnd))

    def _record_reused(self, rnd: Round, reused: list[Measurement]) -> Round:
        for m in reused:
            rnd.take_place(m.fingerprint)
            self._measured(rnd, m)
        return rnd
