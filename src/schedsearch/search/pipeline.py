"""``Pipeline``: the rounds of a running search - ask, expand, deduplicate, store, measure, tell.

The loop is a pipeline over an executor's ``submit`` / ``poll``. A round's parents (asked of
the strategy, ``asking``) are expanded in parallel; its new children - C new to this search -
are stored as ``pending`` and measured (``measuring``), the likely winners first. While round
k is measured, round k+1's parents are already being expanded, so the workers that build and
benchmark never wait for Exo. The parts: ``budget`` (what is spent and left), ``asking`` (the
next round, and whether one is started), ``parts`` (a large parent's two parts), ``measuring``
(the queue and its cutoff), ``reuse`` (earlier searches' measurements), ``rounds`` (one round's record and what it alone decides). This
module drives the rounds for the driver; what is decided between rounds is
``pipeline_planning``'s, how results are taken in ``pipeline_results``'s.

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
    Phase,
    SearchConfig,
    SearchStatus,
    SearchStrategy,
    Store,
    Workload,
)
from schedsearch.search.asking import Asker
from schedsearch.search.budget import Budget
from schedsearch.search.guidance import Guidance
from schedsearch.search.intake import Intake
from schedsearch.search.ledger import Ledger
from schedsearch.search.measuring import CUTOFF_FACTOR, CUTOFF_FLOOR_SECONDS, Measuring
from schedsearch.search.pipeline_results import RoundResults
from schedsearch.search.reuse import EarlierSearches
from schedsearch.search.rounds import LEADING_SHARE, Round, activity_text
from schedsearch.search.untried import UntriedLook
from schedsearch.stopping import stopped_improving

#: The longest the loop waits for results before it looks at ``stop`` and the budget again.
POLL_SECONDS = 0.25

# Names that lived here before the measuring queue had a module of its own.
__all__ = [
    "CUTOFF_FACTOR",
    "CUTOFF_FLOOR_SECONDS",
    "LEADING_SHARE",
    "POLL_SECONDS",
    "Pipeline",
    "Stopped",
]


class Stopped(Exception):
    """Raised inside the loop when ``stop`` is set while it waits for one job."""


class Pipeline(RoundResults):
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
        self.intake = Intake(
            store, ledger, self.measuring, self.asker.parts, EarlierSearches(config, store, executor, root, ledger)
        )
        self.untried = UntriedLook(guide, ledger)  # the stopping rule's model half
        # The last look that found nothing being measured (``_count_idle``; None: something was).
        self.idle_since: float | None = None

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
            self._ask_again()
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
        untried child faster than the best (``schedsearch.stopping``, ``search.untried``)."""
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
