"""``Pipeline``: the rounds of a running search - ask, expand, deduplicate, store, measure, tell.

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
comes once its likely winners (within ``rounds.STREAM_GATE`` of its best prediction, at
most one in-flight cap) are measured - for a streamed round, as soon as a shard per worker
is in (unless the model leads: then once every shard that holds a register tile alone is
in, or, when none does, half of a deeper parent's shards and all of the root's,
``_leaders_in``; a leading model's expansions always stream) - and while the next round is
expanded from them, the round's also-rans wait. The next round's children then join the
same queue (``_merge``), so the likely winners one level deeper are measured before the
also-rans of this one; those are measured when nothing more likely is left. Which
children wait depends on the predictions only, so this keeps the same seed's search the
same (streamed rounds aside, as above).
When the model leads (``SearchConfig.model_leads``: with gcc's notes it ranks a node's
children right from the first round), a round expands one parent, sharded over every
expander, and only one in-flight cap of likely winners beyond the early ask's own is
placed while the next round is expanded: that round merges as soon as it is in. With a
model that ranked the i8 matmul's children backwards (no notes) that cap let the search
grow from the wrong picks (1 of 3 runs reached 95%); with a perfect one it halved the time
to 95% (14.1 -> 7.2 s, Zen 4). Both points are counted in places. While that round is
expanded and nothing is being measured, the also-rans behind the gate are measured one at
a time (``_runner_idle``), those gcc's notes built already: only the benchmark runner's
otherwise idle time is spent. How many are measured before the merge depends on how long
the expansion takes, so a leading search is the same for the same seed as long as its work
completes in the same order.
Measurements stream back and are recorded one by one (``ledger``); the driver is the
store's only writer, and it never runs Exo or a compiler itself, so it stays responsive:
it looks at ``stop`` and the budget at least four times a second and sends a ``tick``
event at least once a second.

Crash safety: children are stored as ``pending`` before they are evaluated, and a parent
is marked expanded only once all its new children are measured. A search killed half-way
is resumed by re-evaluating its pending candidates and re-expanding unfinished parents;
fingerprint dedup against the store makes the re-expansion cheap. Expansions that came
in for a round that never started measuring are kept the same way: their children are
stored as pending when the search ends (``keep_expanded``).

With a cost model (``core.CostModel``) a round's new children are measured in order of
predicted speed (``ranking.measuring_order``, seeded exploration included) and, in
``prune`` mode with a short budget, the predicted-slower share is not measured at all.
Each prediction is stored with its child before it is measured; the rank correlation of
the latest predictions with their measurements is recorded with the search. The model
learns every ``ok`` measurement as it arrives and retrains without blocking this loop.

A large parent (a register tile, an unrolled nest: ``expand.DEFER_FROM_STATEMENTS``) is
expanded in two parts (``core.ExpansionPart``, ``config.defer_costly``): the first time the
strategy picks it, its cheap rewrites; its reorders, hoists, sinks and packs (``Rule.deferred``:
Exo checks them over the whole nest, seconds each there) wait. When its first part is
announced it goes back into the strategy's frontier, at its own measured time, and the
strategy picks it again when no faster node is left to expand first, or it comes along with
the first of its children to be expanded (``_with_waiting_parents``) - so the costly
rewrites are spent on the nodes the search goes on from, and each round is expanded
sooner. It is marked expanded once its second part's children are measured. Both points are fixed in the
sequence of rounds, so the same seed still gives the same search.

A candidate measured faster than the best so far is measured a second time, in a new
process, before it is recorded (``config.confirm_best``), and the slower of its two times
counts: the fastest of hundreds of measurements of near-equal kernels is mostly the
luckiest one. On Zen 4 the i8 matmul's searches climbed from 156 to 117 ns by their own
times through kernels that side by side all ran at 161 ns; a lucky new best also sets the
bar (``contend``, ``cutoff``) every later candidate is timed against and steers the
strategy for the rest of the search. Big steps are confirmed too: one yardstick timed cold
made a 185 ns i8 kernel look 71.7 ns, twice as fast as anything else the search found.
How far apart the two times come is the search's timing noise (``search.repeats``); the
strategy hears it (``heed_noise``) and counts times that close as tied.

Candidates whose C an earlier search measured the same way take that measurement instead
of being measured (``_reuse``; ``search.reuse`` says when). Reused measurements do not
count against ``max_candidates``, which counts what this search measures
(``Counters.measured``).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections import deque
from collections.abc import Iterator, Sequence

from schedsearch.core import (
    Candidate,
    CandidateRecord,
    EventKind,
    Expansion,
    ExpansionPart,
    Executor,
    Job,
    JobKind,
    JobResult,
    Measurement,
    Phase,
    ReuseScope,
    SearchConfig,
    SearchStatus,
    SearchStrategy,
    Status,
    Store,
    Workload,
)
from schedsearch.search.finalists import finalist_reserve
from schedsearch.search.guidance import Guidance
from schedsearch.search.ledger import Ledger
from schedsearch.search.pace import Pace, comes_in_too_late
from schedsearch.search.ranking import expansion_priority
from schedsearch.search.repeats import RepeatNoise
from schedsearch.search.reuse import reuse_message, split
from schedsearch.stopping import stopped_improving
from schedsearch.search.rounds import (
    Round,
    activity_text,
    asked_message,
    early_ask_point,
    expansion_message,
    final_part,
    likely,
    next_built,
    next_child,
    take_shards,
)

#: The share of a parent's shards a leading model plans the next round after, when none of
#: them holds a heavy rewrite alone (``Pipeline._leaders_in``).
LEADING_SHARE = 0.5
#: The longest the loop waits for results before it looks at ``stop`` and the budget again.
POLL_SECONDS = 0.25
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
        self.workload, self.root, self.strategy = workload, root, strategy
        self.executor, self.store, self.config = executor, store, config
        self.ledger, self.guide, self.stop, self.job_ids = ledger, guide, stop, job_ids
        self.seen: set[str] = set()
        self.reuse_scope: ReuseScope | None = None  # built on first use: it leaves this search out
        self.round_numbers = itertools.count(1)
        self.current: Round | None = None  # children being measured
        self.next: Round | None = None  # parents being expanded
        # At most this many evaluations in flight: enough to keep every worker busy,
        # few enough that a round's order (likely winners first) still decides.
        self.workers = max(1, getattr(executor, "workers", config.workers) or 1)
        self.in_flight_cap = 2 * self.workers
        # A large parent is expanded in two parts (``core.ExpansionPart``): its cheap
        # rewrites first, then - once the frontier's order picks it again - its costly ones.
        # Only a strategy that takes single nodes back (not whole rounds) can pick it again.
        # A leading model's pick is expanded whole, sharded over every expander: the model
        # picked it as the one node to go on from, and its costly rewrites are where the next
        # step often is. On SGEMM 512 with AVX2 (Zen 3) the first tile's packed B panel came
        # 7-14 s after that tile's cheap children, with the expansion of one of them.
        self.split = config.defer_costly and not strategy.whole_rounds and not config.model_leads
        self.first_done: set[int] = set()  # parents whose first part has been asked for
        self.second_done: set[int] = set()  # ... and those whose second part has been asked for
        self.first_coming: set[int] = set()  # parents whose first part is not all in yet
        # Parents whose first part left costly rewrites, not yet asked for again, by id.
        self.costly_waiting: dict[int, CandidateRecord] = {}
        # Parents a child of which was expanded before their first part was all in (a
        # streamed round): their second part comes with the next round once they are.
        self.costly_owed: set[int] = set()
        # Confirmation jobs in flight (``_take``): job id -> the first measurement, placed.
        self.confirming: dict[int, Measurement] = {}
        # How far apart the two times of each confirmed candidate were: the strategy's ties.
        self.repeats = RepeatNoise()
        # The last look that found nothing being measured (``_count_idle``; None: something was).
        self.idle_since: float | None = None
        # How long expansions take here, and whether one more round still comes in in time.
        self.pace = Pace()
        # A round would have come in too late (``_too_late``): none is started while children
        # are queued; ``late_said``: the live view was told so once.
        self.held_back = self.late_said = False

    # ------------------------------------------------------------------ for the driver

    def expand_first(self, parents: list[CandidateRecord]) -> None:
        """Start expanding the first round (the root's, while its baseline is measured)."""
        self.next = self._submit_round(parents)

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
        self.confirming.clear()

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
            self.ledger.emit(EventKind.STOPPING, message="stopping: cancelling the work in flight; "
                                                         "everything measured is kept")
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

    # ------------------------------------------------------------------ earlier searches

    def _reuse(self, candidates: Sequence[Candidate]) -> tuple[list[Measurement], list[Candidate]]:
        """Earlier searches' measurements of the same C (``search.reuse``), and the
        candidates still to measure. Nothing is reused with ``config.remeasure``."""
        assert self.ledger.sid is not None
        if self.config.remeasure or not candidates:
            return [], list(candidates)
        if self.reuse_scope is None:
            self.reuse_scope = ReuseScope.of(self.config, self.executor.machine().fingerprint, self.root.fingerprint,
                                             exclude_search=self.ledger.sid)
        found = self.store.reusable_measurements([c.fingerprint for c in candidates], self.reuse_scope)
        reused, rest = split(candidates, found)
        if reused:
            self.ledger.emit(EventKind.REUSED, message=reuse_message(reused))
        return reused, rest

    def _reuse_in(self, rnd: Round, new: Sequence[Candidate] | None = None) -> Round:
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
        """Seconds to keep for re-measuring the finalists (``finalists.finalist_reserve``)."""
        return finalist_reserve(self.config, self.ledger.top, self.ledger.root_record)

    def _time_spent(self) -> bool:
        c = self.config
        return c.max_seconds is not None and self.ledger.budget_spent() >= c.max_seconds - self._finalist_reserve()

    def _stopped_improving(self) -> bool:
        """Whether ``config.early_stop`` candidates in a row brought no new best
        (``Counters.since_best``), or, without it, ``config.auto_stop``'s rule says the
        stretch since the last real gain is long enough (``schedsearch.stopping``). A new best
        still being confirmed is waited for: it may end the run of measurements without progress."""
        if self.confirming:
            return False
        c = self.ledger.counters
        if self.config.early_stop is not None:
            return c.since_best >= self.config.early_stop
        return self.config.auto_stop and stopped_improving(c, self.ledger.search_seconds())

    def _candidates_left(self) -> int | None:
        """Evaluations the candidate budget still allows beyond those in flight."""
        if self.config.max_candidates is None:
            return None
        flying = len(self.current.measuring) if self.current is not None else 0
        return self.config.max_candidates - self.ledger.counters.measured - flying

    def run(self) -> SearchStatus:
        """Run rounds until a budget is spent or nothing is left to expand or measure
        (``completed``); raises ``Stopped`` as soon as ``stop`` is set."""
        try:
            return self._rounds()
        finally:
            self._count_idle(ending=True)

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

    def _rounds(self) -> SearchStatus:
        while True:
            self._check_stop()
            left = self._candidates_left()
            if self._time_spent() or (left is not None and left <= 0 and not (self.current and self.current.measuring)):
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
            self.ledger.record_accuracy()
            if nxt.expanded() and self._merging(self.current):
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
        measured (``rounds.early_ask_point``): in the cost model's order those in flight and its
        likely winners queued, at most one in-flight cap of them, else ``EARLY_ASK_SHARE`` of
        the round (at least one cap). Until then the round's results are held back from the
        strategy, so what it has seen when it is asked - every earlier round, and exactly
        those children - does not depend on the order in which measurements complete: the
        same seed still gives the same search."""
        if rnd.ask_after:
            return  # armed already
        k = early_ask_point(rnd, self.in_flight_cap)
        if rnd.ranked:
            rnd.open_until = k  # places beyond it wait behind the gate (``_gated``)
            if self.config.model_leads:
                # One in-flight cap of likely winners more while the next round is expanded,
                # then the merge: the model's picks are trusted to lead (``SearchConfig``).
                rnd.shut_at = k + self.in_flight_cap
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
        if cur is None or nxt is None or not ready or not self._merging(cur) or cur.placed < cur.open_until:
            return
        if likely(cur) and not cur.shut():
            return
        self._release(cur)
        for fp in nxt.part:
            # A parent's second part: what the round kept of its first is done with.
            cur.taken.pop(fp, None)
            cur.tally.pop(fp, None)
            cur.complete.discard(fp)
            cur.announced.discard(fp)
            cur.parts.pop(fp, None)
        cur.number = nxt.number
        cur.parents += nxt.parents
        cur.part.update(nxt.part)
        cur.expanding.update(nxt.expanding)
        cur.parts.update(nxt.parts)
        cur.complete |= nxt.complete
        cur.taken.update(nxt.taken)
        cur.streamed = cur.streamed or nxt.streamed
        self.next = None
        cur.anchor = None  # the merged queue's best prediction, not a measured child's
        self._take_in(cur)
        self.ledger.record_accuracy()
        self._plan_next(cur)  # armed before anything more is placed: the ask counts from here
        self._fill()

    def _start_expanding(self) -> Round | None:
        if self._no_room_for_another_round():
            return None
        queued = self.current is not None and bool(self.current.queue)
        if queued and self.held_back:
            return None
        while True:
            # A leading model's pick is expanded alone, sharded over every expander.
            asked = self.strategy.ask(1 if self.config.model_leads else max(1, self.config.expand_batch))
            if not asked:
                return None
            # A parent picked again after its second part came with a child's is done.
            parents = [p for p in asked if p.depth < self.config.max_depth and p.id not in self.second_done]
            if parents:
                break
        whole = self._with_waiting_parents(parents)
        # Only while children are queued: with none, the cores would idle otherwise.
        if queued and self._too_late(whole):
            for parent in parents:  # back to the frontier: they were not expanded
                self.strategy.tell(parent)
            self.held_back = True
            return None
        self.held_back = False
        return self._submit_round(whole)

    def _too_late(self, parents: Sequence[CandidateRecord]) -> bool:
        """Whether a round of ``parents`` would come in too late for its first children to be
        measured within the time budget, at this search's pace (``search.pace``): then
        the children queued are measured instead, and no round is started until none is left.
        Said once in the live view."""
        c = self.config
        if c.max_seconds is None:
            return False
        seconds = self.pace.round_seconds([self._second_part(p) for p in parents], self.workers)
        left = c.max_seconds - self._finalist_reserve() - self.ledger.budget_spent()
        measure_first = self.in_flight_cap * self.pace.seconds_per_measurement()
        if seconds is None or not comes_in_too_late(seconds, left, measure_first):
            return False
        if not self.late_said:
            self.late_said = True
            queued = len(self.current.queue) if self.current is not None else 0
            self.ledger.emit(EventKind.ASKED, message=(
                f"round held back: expanding {', '.join(f'#{p.id}' for p in parents)} would take about {seconds:.0f} s "
                f"and {max(0.0, left):.0f} s are left; the {queued} children queued are measured first"))
        return True

    def _second_part(self, parent: CandidateRecord) -> bool:
        """Whether ``parent`` would be expanded for its second part now (``_part_for``)."""
        return self.split and parent.id in self.first_done

    def _with_waiting_parents(self, parents: list[CandidateRecord]) -> list[CandidateRecord]:
        """``parents``, each preceded by its own parent when that one's costly rewrites still
        wait: a node's second part comes at the latest with the first expansion of one of its
        children. Why: each child of a large node is large too and defers its own costly
        rewrites, so on a plateau of children a little faster than their parents (loop
        splits, each a few percent) "picked again when nothing faster is left" never came,
        and the costly rewrites - a packed panel, a reorder - were put off at every level.
        On SGEMM 512 with AVX2 (Zen 3) the packed B panel behind the register tile was 1.28x
        faster and came 25-65 s into 3-minute searches; a child's expansion comes seconds
        after its parent's first part. A parent whose first part is still coming in (a
        streamed round) is owed: its second part comes with the first round asked once the
        first is all in. Which parents come along depends on the asked ones only (and, for
        an owed one, on when its streamed shards came in, as for everything in a streamed
        round), so the same seed still gives the same search."""
        asked = {p.id for p in parents}
        out: list[CandidateRecord] = []
        for pid in sorted(self.costly_owed - self.first_coming):
            self.costly_owed.discard(pid)
            if pid in self.costly_waiting and pid not in asked:  # else its first part left nothing
                asked.add(pid)
                out.append(self.costly_waiting[pid])
        for parent in parents:
            pid = parent.parent_id
            if pid is not None and pid in self.costly_waiting and pid not in asked:
                asked.add(pid)
                out.append(self.costly_waiting[pid])
            elif pid is not None and pid in self.first_coming:
                self.costly_owed.add(pid)
            out.append(parent)
        return out

    def _submit_round(self, parents: list[CandidateRecord]) -> Round:
        """A new round: its parents' expansions submitted."""
        rnd = Round(next(self.round_numbers), parents)
        jobs = []
        # Nothing left to measure meanwhile: the search waits for this round, so its
        # expansions may come back shard by shard and measuring start with the first. A
        # leading model's always do: the next round is planned from its first half
        # (``_leaders_in``), and it merges with its first shard.
        stream = self.current is None or not self.current.queue or self.config.model_leads
        for parent in parents:
            part = self._part_for(parent)
            rnd.part[parent.fingerprint] = part
            # A leading model goes on once every register tile is in (``_leaders_in``): they
            # come first. Otherwise the cheap rewrites share the shards with all but the first
            # tile per worker: measured as they come, they keep the builders busy.
            job = Job(next(self.job_ids), JobKind.EXPAND, (self.ledger.parent(parent),), stream=stream, part=part,
                      priority=expansion_priority(parent), all_heavy_first=stream and self.config.model_leads)
            rnd.expanding[job.id] = parent
            self.pace.ask(job.id, self.ledger.elapsed(), part is ExpansionPart.DEFERRED)
            jobs.append(job)
        self.executor.submit(self.workload, self.root, jobs)
        self.ledger.emit(EventKind.ASKED, message=asked_message(rnd))
        return rnd

    def _part_for(self, parent: CandidateRecord) -> ExpansionPart:
        """The part of ``parent``'s rewrites to expand now: the first part when it is picked
        the first time, its costly rewrites when it is picked again (``_take_in`` puts it
        back in the frontier when its first part left any)."""
        if not self.split:
            return ExpansionPart.ALL
        if self._second_part(parent):
            self.second_done.add(parent.id)
            self.costly_waiting.pop(parent.id, None)
            return ExpansionPart.DEFERRED
        self.first_done.add(parent.id)
        self.first_coming.add(parent.id)
        return ExpansionPart.FIRST

    def _no_room_for_another_round(self) -> bool:
        """Whether the current round's children still queued use up the rest of the budget:
        a round expanded now could never be measured, and expanding it would only take the
        CPU from those measurements. Candidates left are counted exactly; seconds left are
        estimated at this search's pace so far (elapsed over measured)."""
        cur = self.current
        if cur is None or not cur.queue:
            return False
        # A merging round's also-rans would be measured after the new round's children.
        queued = likely(cur) if self._merging(cur) else len(cur.queue)
        left = self._candidates_left()
        if left is not None and queued >= left:
            return True
        c = self.config
        if c.max_seconds is None or self.ledger.counters.measured < 1:
            return False
        seconds_left = c.max_seconds - self._finalist_reserve() - self.ledger.budget_spent()
        return queued * self.ledger.elapsed() / self.ledger.counters.measured >= seconds_left

    def _take_in(self, rnd: Round) -> Round:
        """Take the round's shards that came in since the last call: their new children are
        deduplicated, stored as pending with their predictions and queued, the queue in
        measuring order (re-ordered with them). A parent's expansion is announced when its
        last shard is taken in. Returns ``rnd``."""
        ledger = self.ledger
        assert ledger.sid is not None
        fresh, ledger.counters = take_shards(rnd, self.seen, ledger.counters)
        rest = list(rnd.queue)
        ordered, predicted, rnd.explored = self._measuring_order(fresh, rest)
        rnd.keys.update(predicted)
        queued = [predicted[c.fingerprint] for c in ordered if c.fingerprint in predicted]
        if queued:  # later shards may lower the anchor; a merge sets it anew (``_merge``)
            rnd.anchor = min(queued) if rnd.anchor is None else min(rnd.anchor, min(queued))
        new_fps = {c.fingerprint for c in fresh}
        stored = [c for c in ordered if c.fingerprint in new_fps]  # children skipped by prune are not
        for child in stored:  # in measuring order
            record = self.store.add_candidate(ledger.sid, child, predicted.get(child.fingerprint))
            ledger.fp_of[record.id] = child.fingerprint
            parent_id = rnd.parent_of[child.fingerprint]
            rnd.waiting[parent_id] = rnd.waiting.get(parent_id, 0) + 1
        for parent in rnd.parents:
            fp = parent.fingerprint
            if fp in rnd.complete and fp not in rnd.announced:
                rnd.announced.add(fp)
                part = rnd.part.get(fp, ExpansionPart.ALL)
                ledger.emit(EventKind.EXPANDED, parent, message=expansion_message(rnd.tally[fp], part))
                self.first_coming.discard(parent.id)
                if not final_part(rnd, fp):
                    # Its costly rewrites wait: back in the frontier, at its own time, it is
                    # picked again when no faster node is left to expand first - or comes
                    # along with the first of its children to be expanded.
                    self.strategy.tell(parent)
                    self.costly_waiting[parent.id] = parent
                elif not rnd.waiting.get(parent.id):
                    self.store.mark_expanded(ledger.sid, parent.id)
        rnd.queue = deque(ordered)
        rnd.total += len(ordered) - len(rest)
        rnd.ranked = rnd.ranked or bool(predicted)
        return self._reuse_in(rnd, stored)

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
            gated = self._gated(rnd)
            # The rest wait for the merge once the gate is shut (``Round.shut``).
            child = None if gated and rnd.shut() else next_child(rnd, gated)
            if child is None and gated and self._runner_idle(rnd):
                child = next_built(rnd)  # the next also-ran, while nothing else can be measured
            if child is None:
                break
            rnd.take_place(child.fingerprint)
            job = self._evaluation(child, contend=self._contend())
            rnd.measuring[job.id] = child
            jobs.append(job)
        if jobs:
            self.executor.submit(self.workload, self.root, jobs)

    def _evaluation(self, child: Candidate, contend: float | None = None, quiet: bool = False) -> Job:
        """A job measuring ``child`` beside the current yardstick, with the cutoff of the
        best so far (and ``contend``: see ``_contend``; ``quiet``: see ``Job.quiet``)."""
        yardsticks = self.ledger.yardsticks
        return Job(next(self.job_ids), JobKind.EVALUATE, (child,), cutoff=self._cutoff(), contend=contend,
                   yardstick=yardsticks.current if yardsticks is not None else None, quiet=quiet)

    def _merging(self, rnd: Round | None) -> bool:
        """Whether ``rnd`` takes the next round in (``_merge``): it is measured in the cost
        model's order and the strategy takes asks before a round is completely measured."""
        return rnd is not None and rnd.ranked and not self.strategy.whole_rounds

    def _gated(self, rnd: Round) -> bool:
        """Children beyond the gate wait, once the early ask's own children are placed, while
        the ask is pending or the next round is being expanded from its answer: that round's
        children are to be measured before this round's also-rans (they join one queue,
        ``_merge``), and the expanders keep the CPU meanwhile. Which children are placed
        before a merge then depends on the predictions alone, never on timing."""
        return (self._merging(rnd) and rnd.placed >= rnd.open_until
                and (bool(rnd.ask_after) or self.next is not None))

    def _runner_idle(self, rnd: Round) -> bool:
        """Whether an also-ran of the gated round ``rnd`` is measured now, one at a time: the
        model leads, nothing is being measured, and the next round is still being expanded.
        Only one whose kernel was built for gcc's notes is taken (``rounds.next_built``): it
        costs the benchmark runner's time alone, which would otherwise go unused until the
        merge. On the i8 matmul (Zen 3) a leading search measured nothing for 117-133 s of 180:
        a depth-3 node's whole expansion, a build per child, took 40-50 s while the also-rans
        (0.07 s of timing each) waited behind the gate. Timing-dependent: see the module text."""
        return (self.config.model_leads and not rnd.measuring and self.next is not None
                and not self.next.expanded() and not rnd.ask_after)

    def _cutoff(self) -> float | None:
        """Seconds per call beyond which a candidate is timed by its verification call alone:
        CUTOFF_FACTOR times the best so far, and never under CUTOFF_FLOOR_SECONDS, where a
        first call's cold caches could make a contender look that slow."""
        if not self.ledger.top or self.ledger.top[0].seconds is None:
            return None
        return max(CUTOFF_FACTOR * self.ledger.top[0].seconds, CUTOFF_FLOOR_SECONDS)

    def _contend(self) -> float | None:
        """Seconds per call beyond which a candidate cannot be the new best by a margin the
        timing noise would hide (CONTEND_FACTOR times the best so far): it is timed with the
        fewest samples, enough to rank it among the slower ones."""
        if not self.ledger.top or self.ledger.top[0].seconds is None:
            return None
        return CONTEND_FACTOR * self.ledger.top[0].seconds

    def _take(self, result: JobResult) -> None:
        """Record one finished job (or one shard of an expansion) of either round."""
        job = result.job
        nxt, cur = self.next, self.current
        # Time spent counts whether or not the job is still wanted: it was spent.
        self.ledger.spend(expanding=result.expansion.seconds if result.expansion is not None else 0.0,
                          measurements=result.measurements)
        if result.expansion is not None:
            for rnd in (nxt, cur):
                if rnd is not None and job.id in rnd.expanding:
                    self._shard_in(rnd, job.id, result)
                    return
            return  # a job abandoned earlier
        if cur is None or job.id not in cur.measuring:
            return  # a job abandoned earlier
        child = cur.measuring.pop(job.id)
        first = self.confirming.pop(job.id, None)
        for m in result.measurements:
            m = self.ledger.place(m)
            if first is not None:
                self._heed_repeat(first, m)
                m, note = confirmed(first, m)
                self._measured(cur, m, note)
            elif self._to_confirm(m):
                self._confirm(cur, child, m)
            else:
                self._measured(cur, m)

    def _to_confirm(self, m: Measurement) -> bool:
        """Whether ``m`` (placed on the search's scale) would be the new best: then it is
        measured again before it counts."""
        top = self.ledger.top
        if not self.config.confirm_best or m.status is not Status.OK or m.seconds is None or not top:
            return False
        best = top[0].seconds
        return best is not None and m.seconds < best

    def _heed_repeat(self, first: Measurement, second: Measurement) -> None:
        """Learn how far apart two measurements of one candidate came (both placed, both
        ok), and tell the strategy the search's timing noise as it now stands."""
        if first.seconds is None or second.seconds is None or second.status is not Status.OK:
            return
        self.repeats.add(first.seconds, second.seconds)
        self.strategy.heed_noise(self.repeats.share())

    def _confirm(self, rnd: Round, child: Candidate, first: Measurement) -> None:
        """Measure ``child`` again (``first``: its first measurement, placed); the round
        waits for it as for any child being measured."""
        # Timed in full and quietly: it is measured as a new best, and what it measures decides
        # where the search goes.
        job = self._evaluation(child, quiet=True)
        rnd.measuring[job.id] = child
        self.confirming[job.id] = first
        self.executor.submit(self.workload, self.root, [job])

    def _shard_in(self, rnd: Round, job_id: int, result: JobResult) -> None:
        """Keep one shard of a parent's expansion. In the round being measured, its children
        join the queue now, and once the last shard is in the next round is planned."""
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
            if self._merging(rnd) and self._leaders_in(rnd.parts.get(parent.fingerprint, ()), parent.depth):
                self._plan_next(rnd)
            self._fill()
            if rnd.expanded():
                self._plan_next(rnd)

    def _leaders_in(self, parts: Sequence[Expansion], depth: int = 0) -> bool:
        """Whether a streamed round in the cost model's order plans its next round now, with
        ``parts`` of a parent's expansion in (the next round then grows from them while the
        rest of this one is still expanded): once a shard per worker is in (the first of each
        holds a likely winner), or, when the model leads, once every shard that holds a heavy
        rewrite alone (a register tile, ``Expansion.leading``) is in - a leading model ranks
        a node's children as a whole, and the next round's expansions go ahead of this one's
        last shards (``expansion_priority``). A leading model waits for all of a parent's
        shards when none leads. conv1d_mc (Zen 3): the root's 5x16 tile came in 45-70 s
        into leading searches that had grown from the first shards' 6x16 ones; 15 s in with
        the model off. When none leads and the parent (at ``depth``) is not the root, a
        leading model plans once ``LEADING_SHARE`` of its shards are in: the rewrites are
        dealt to the shards in turn, so the first ones hold every kind of rewrite, and on the
        i8 matmul (Zen 4) the rest of a round's builds took 6-7 s more, which the next
        round's expansion now overlaps. Not the root's: its children differ the most and
        set the search's course, and its last shards would wait behind every deeper round's
        (on the i8 matmul, 1 of 3 searches so planned missed the root's best child for
        45 s)."""
        if not self.config.model_leads:
            return len(parts) >= self.workers
        leads = max((e.leads for e in parts), default=0)
        if leads == 0:
            return depth > 0 and len(parts) >= LEADING_SHARE * max((e.shards for e in parts), default=1)
        return sum(e.leading for e in parts) >= leads

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

    def _measuring_order(self, fresh: list[Candidate], queued: Sequence[Candidate] = ()
                         ) -> tuple[list[Candidate], dict[str, float], frozenset[str]]:
        """New children and those still queued from earlier shards of the round, in measuring
        order, the predictions (by fingerprint; none: proposal order) and the children an
        exploration draw placed.

        Only new children are ever pruned: queued ones are stored already, and keep their
        place in the order however slow they are predicted. Children skipped by ``prune``
        leave ``seen`` again: another parent may propose them later.
        """
        if self.guide is None:
            return [*queued, *fresh], {}, frozenset()
        c = self.config
        elapsed, evaluated = self.ledger.elapsed(), self.ledger.counters.measured
        ordering = self.guide.order(
            [*queued, *fresh],
            seconds_left=c.max_seconds - self.ledger.budget_spent() if c.max_seconds is not None else None,
            seconds_per_candidate=elapsed / evaluated if evaluated else None,
            candidates_left=c.max_candidates - evaluated if c.max_candidates is not None else None,
            stored={c.fingerprint for c in queued},
        )
        for child in ordering.skipped:
            self.seen.discard(child.fingerprint)
        if ordering.skipped:
            self.ledger.counters = self.ledger.counters.plus(pruned=len(ordering.skipped))
        return ordering.children, ordering.predicted, ordering.explored


def confirmed(first: Measurement, second: Measurement) -> tuple[Measurement, str]:
    """What a confirmed candidate records, and what is said of it: the slower of its two
    measurements (both placed on the search's scale), or the second when that one failed -
    a kernel that verified once and then failed is not to be trusted."""
    if second.status is not Status.OK or second.seconds is None or not first.seconds:
        return second, f"measured twice: ok, then {second.status.value}"
    slower = max(first, second, key=lambda m: m.seconds or 0.0)
    change = second.seconds / first.seconds - 1.0
    return slower, f"measured twice: the second time {change:+.1%} from the first; the slower counts"
