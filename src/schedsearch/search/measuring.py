"""``Measuring``: the measuring queue - which child is measured next, and with which cutoff.

A round's new children are queued in measuring order: the cost model's (``order``: predicted
fastest first, seeded exploration draws among them, and in ``prune`` mode with a short budget
the predicted-slower share left out) or the order they were proposed in. ``fill`` hands them
to the executor from the front of the queue.

Guarantees:

- At most ``in_flight_cap`` (two per worker, or per CPU of a cluster) evaluations are in
  flight: every worker is busy, and a round's order still decides what is measured first.
- Nothing is submitted beyond the candidate budget, counting those in flight.
- While a round in the cost model's order is gated (``gated``: its early ask is pending or the
  next round is being expanded from its answer), only its likely winners leave the queue
  (``rounds.next_child``), and none when the model leads (``Round.shut``); the rest wait
  for the merge. Which children wait depends on the predictions alone.
- The one exception, when the model leads: while the next round is expanded and nothing is
  being measured, an also-ran whose kernel is built already is measured, one at a time
  (``runner_idle``) - only the benchmark runner's otherwise idle time is spent. How many are
  measured then depends on how long the expansion takes.
- Every evaluation carries the ``cutoff`` of the best so far, beyond which it is timed by its
  verification call alone; there is none before a best.
- Only new children are ever pruned; a pruned child leaves ``seen`` again, so another parent
  may propose it later.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from schedsearch.core import Candidate, Executor, Job, JobKind, SearchConfig, SearchStrategy, Workload
from schedsearch.search.budget import Budget
from schedsearch.search.guidance import Guidance
from schedsearch.search.ledger import Ledger
from schedsearch.search.rounds import Round, next_built, next_child

#: A candidate whose first (verification) call is this many times slower than the best so
#: far cannot win: it is timed by that call alone instead of ``samples`` more calls.
CUTOFF_FACTOR = 4.0
#: ... but only beyond this many seconds per call, where a cold first call is not the
#: reason a contender looks slow (and where timing it fully starts to cost real time).
CUTOFF_FLOOR_SECONDS = 0.01


class Measuring:
    """The measuring queue of one run of a search (one instance per run)."""

    def __init__(
        self,
        workload: Workload,
        root: Candidate,
        strategy: SearchStrategy,
        executor: Executor,
        config: SearchConfig,
        ledger: Ledger,
        budget: Budget,
        guide: Guidance | None,
        job_ids: Iterator[int],
    ) -> None:
        self.workload, self.root, self.strategy, self.executor = workload, root, strategy, executor
        self.config, self.ledger, self.budget, self.guide, self.job_ids = config, ledger, budget, guide, job_ids
        self.workers = max(1, getattr(executor, "workers", config.workers) or 1)
        # At most this many evaluations in flight: enough to keep every worker busy,
        # few enough that a round's order (likely winners first) still decides. On a
        # cluster the builders are its CPUs (``slots``), not the expanders: with the cap at
        # two per expander, a second node of one CPU built 4 of a 15-s search's 41 kernels.
        self.in_flight_cap = 2 * max(self.workers, getattr(executor, "slots", 0) or 0)

    def merging(self, rnd: Round | None) -> bool:
        """Whether ``rnd`` takes the next round in (``Pipeline._merge``): it is measured in
        the cost model's order and the strategy takes asks before a round is completely
        measured."""
        return rnd is not None and rnd.ranked and not self.strategy.whole_rounds

    def gated(self, rnd: Round, nxt: Round | None) -> bool:
        """Whether children of ``rnd`` beyond the gate wait: once the early ask's own children
        are placed, while the ask is pending or the next round (``nxt``) is being expanded
        from its answer. That round's children are to be measured before this round's
        also-rans (they join one queue), and the expanders keep the CPU meanwhile."""
        return self.merging(rnd) and rnd.placed >= rnd.open_until and (bool(rnd.ask_after) or nxt is not None)

    def runner_idle(self, rnd: Round, nxt: Round | None) -> bool:
        """Whether an also-ran of the gated round ``rnd`` is measured now, one at a time: the
        model leads, nothing is being measured, and the next round (``nxt``) is still being
        expanded. Only one whose kernel was built for gcc's notes is taken
        (``rounds.next_built``): it costs the benchmark runner's time alone, which would
        otherwise go unused until the merge."""
        return (
            self.config.model_leads
            and not rnd.measuring
            and nxt is not None
            and not nxt.expanded()
            and not rnd.ask_after
        )

    def cutoff(self) -> float | None:
        """Seconds per call beyond which a candidate is timed by its verification call alone:
        ``CUTOFF_FACTOR`` times the best so far, and never under ``CUTOFF_FLOOR_SECONDS``,
        where a first call's cold caches could make a contender look that slow."""
        if not self.ledger.top or self.ledger.top[0].seconds is None:
            return None
        return max(CUTOFF_FACTOR * self.ledger.top[0].seconds, CUTOFF_FLOOR_SECONDS)

    def evaluation(self, child: Candidate) -> Job:
        """A job measuring ``child``, with the cutoff of the best so far."""
        return Job(next(self.job_ids), JobKind.EVALUATE, (child,), cutoff=self.cutoff())

    def fill(self, rnd: Round | None, nxt: Round | None) -> None:
        """Submit ``rnd``'s next children (the round being measured; ``nxt``: the one being
        expanded), up to the in-flight cap and the candidate budget."""
        if rnd is None:
            return
        jobs = []
        while rnd.queue and len(rnd.measuring) < self.in_flight_cap:
            left = self.budget.candidates_left(len(rnd.measuring))
            if left is not None and left <= 0:
                break
            gated = self.gated(rnd, nxt)
            # The rest wait for the merge once the gate is shut (``Round.shut``).
            child = None if gated and rnd.shut else next_child(rnd, gated)
            if child is None and gated and self.runner_idle(rnd, nxt):
                child = next_built(rnd)  # the next also-ran, while nothing else can be measured
            if child is None:
                break
            rnd.take_place(child.fingerprint)
            job = self.evaluation(child)
            rnd.measuring[job.id] = child
            jobs.append(job)
        if jobs:
            self.executor.submit(self.workload, self.root, jobs)

    def order(
        self, fresh: list[Candidate], queued: Sequence[Candidate], seen: set[str]
    ) -> tuple[list[Candidate], dict[str, float]]:
        """New children (``fresh``) and those still queued from earlier shards of the round,
        in measuring order, and the predictions (by fingerprint; none: proposal order).

        Only new children are ever pruned: queued ones are stored already, and keep their
        place in the order however slow they are predicted. Children skipped by ``prune``
        leave ``seen`` again: another parent may propose them later.
        """
        if self.guide is None:
            return [*queued, *fresh], {}
        budget = self.budget
        ordering = self.guide.order(
            [*queued, *fresh],
            seconds_left=budget.seconds_left_whole(),
            seconds_per_candidate=budget.seconds_per_candidate(),
            # Not less those in flight: the pruning has always counted the measured alone.
            candidates_left=budget.candidates_left(),
            stored={c.fingerprint for c in queued},
        )
        for child in ordering.skipped:
            seen.discard(child.fingerprint)
        if ordering.skipped:
            self.ledger.counters = self.ledger.counters.plus(pruned=len(ordering.skipped))
        return ordering.children, ordering.predicted
