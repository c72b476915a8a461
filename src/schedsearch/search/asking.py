"""``Asker``: the next round - its parents asked of the strategy and sent to be expanded.

Guarantees:

- No round is started that could not be measured: not when the children still queued use up
  the candidates left, or the seconds left at the search's pace so far (``no_room``), and -
  while children are queued - not when it would come in too late for its first children to
  be measured (``too_late``, at this search's own pace of expanding, ``search.pace``). Parents
  asked for a round held back go back to the frontier, and no round is started while children
  are queued until it is said to fit; with nothing queued the cores would idle, so one is.
- A parent at ``max_depth``, or whose second part was asked for already, is never expanded.
- When the model leads, a round expands the one parent it picked, sharded over every
  expander; otherwise ``expand_batch`` parents, a large one's costly rewrites in a second
  part of their own (``parts``).
- A round refused for room is asked for again as soon as the queued children fit
  (``refused``): their pace so far is an estimate, and the first children of a round
  measured in the cost model's order are its fastest.
- A round's expansions stream back shard by shard when nothing is queued meanwhile (the
  search waits for them) and always when the model leads.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

from schedsearch.core import (
    Candidate,
    CandidateRecord,
    EventKind,
    Executor,
    ExpansionPart,
    Job,
    JobKind,
    SearchConfig,
    SearchStrategy,
    Workload,
)
from schedsearch.search.budget import Budget
from schedsearch.search.ledger import Ledger
from schedsearch.search.pace import Pace, comes_in_too_late
from schedsearch.search.parts import TwoParts
from schedsearch.search.ranking import expansion_priority
from schedsearch.search.rounds import Round, asked_message, likely


class Asker:
    """Starts the rounds of one run of a search (one instance per run)."""

    def __init__(
        self,
        workload: Workload,
        root: Candidate,
        strategy: SearchStrategy,
        executor: Executor,
        config: SearchConfig,
        ledger: Ledger,
        budget: Budget,
        job_ids: Iterator[int],
        *,
        workers: int,
        in_flight_cap: int,
    ) -> None:
        self.workload, self.root, self.strategy, self.executor = workload, root, strategy, executor
        self.config, self.ledger, self.budget, self.job_ids = config, ledger, budget, job_ids
        self.workers, self.in_flight_cap = workers, in_flight_cap
        self.round_numbers = itertools.count(1)
        # A leading model's pick is expanded whole: the model picked it as the one node to go
        # on from, and its costly rewrites are where the next step often is.
        self.parts = TwoParts(config.defer_costly and not strategy.whole_rounds and not config.model_leads, strategy)
        # How long expansions take here, and whether one more round still comes in in time.
        self.pace = Pace()
        # A round would have come in too late (``too_late``): none is started while children
        # are queued; ``late_said``: the live view was told so once.
        self.held_back = self.late_said = False
        # The last ask found no room (``no_room``) while children were queued: asked again
        # once they fit (``Pipeline._ask_again``).
        self.refused = False

    def start(self, cur: Round | None, merging: bool) -> Round | None:
        """The next round, its expansions submitted, or None: nothing to ask for, or no round
        is started now. ``cur``: the round being measured; ``merging``: it takes the next
        round in (its also-rans are then measured after the new round's children)."""
        self.refused = self.no_room(cur, merging)
        if self.refused:
            return None
        queued = cur is not None and bool(cur.queue)
        if queued and self.held_back:
            return None
        while True:
            # A leading model's pick is expanded alone, sharded over every expander.
            asked = self.strategy.ask(1 if self.config.model_leads else max(1, self.config.expand_batch))
            if not asked:
                return None
            # A parent picked again after its second part came with a child's is done.
            parents = [p for p in asked if p.depth < self.config.max_depth and not self.parts.done(p)]
            if parents:
                break
        # Only while children are queued: with none, the cores would idle otherwise.
        if queued and self.too_late(parents, cur):
            for parent in parents:  # back to the frontier: they were not expanded
                self.strategy.tell(parent)
            self.held_back = True
            return None
        self.held_back = False
        return self.submit(parents, cur)

    def no_room(self, cur: Round | None, merging: bool) -> bool:
        """Whether the children of ``cur`` still queued use up the rest of the budget: a
        round expanded now could never be measured, and expanding it would only take the CPU
        from those measurements. Candidates left are counted exactly; seconds left are
        estimated at this search's pace so far (``Budget.outlasts``)."""
        if cur is None or not cur.queue:
            return False
        # A merging round's also-rans would be measured after the new round's children.
        queued = likely(cur) if merging else len(cur.queue)
        left = self.budget.candidates_left(len(cur.measuring))
        if left is not None and queued >= left:
            return True
        return self.budget.outlasts(queued)

    def too_late(self, parents: Sequence[CandidateRecord], cur: Round | None) -> bool:
        """Whether a round of ``parents`` would come in too late for its first children to be
        measured within the time budget, at this search's pace (``search.pace``). Said once
        in the live view."""
        left = self.budget.seconds_left()
        if left is None:
            return False
        seconds = self.pace.round_seconds([self.parts.second(p) for p in parents], self.workers)
        measure_first = self.in_flight_cap * self.pace.seconds_per_measurement()
        if seconds is None or not comes_in_too_late(seconds, left, measure_first):
            return False
        if not self.late_said:
            self.late_said = True
            queued = len(cur.queue) if cur is not None else 0
            self.ledger.emit(
                EventKind.ASKED,
                message=(
                    f"round held back: expanding {', '.join(f'#{p.id}' for p in parents)} would take about {seconds:.0f} s "
                    f"and {max(0.0, left):.0f} s are left; the {queued} children queued are measured first"
                ),
            )
        return True

    def submit(self, parents: list[CandidateRecord], cur: Round | None) -> Round:
        """A new round of ``parents``, their expansions submitted (``cur``: the round being
        measured meanwhile, if any)."""
        rnd = Round(next(self.round_numbers), parents)
        jobs = []
        # Nothing left to measure meanwhile: the search waits for this round, so its
        # expansions may come back shard by shard and measuring start with the first. A
        # leading model's always do: the next round is planned from its first shards
        # (``rounds.leaders_in``), and it merges with its first shard.
        stream = cur is None or not cur.queue or self.config.model_leads
        for parent in parents:
            part = self.parts.part_for(parent)
            rnd.part[parent.fingerprint] = part
            # A leading model goes on once every register tile is in (``rounds.leaders_in``):
            # they come first. Otherwise the cheap rewrites share the shards with all but the
            # first tile per worker: measured as they come, they keep the builders busy.
            job = Job(
                next(self.job_ids),
                JobKind.EXPAND,
                (self.ledger.parent(parent),),
                stream=stream,
                part=part,
                priority=expansion_priority(parent),
                all_heavy_first=stream and self.config.model_leads,
            )
            rnd.expanding[job.id] = parent
            self.pace.ask(job.id, self.ledger.elapsed(), part is ExpansionPart.DEFERRED)
            jobs.append(job)
        self.executor.submit(self.workload, self.root, jobs)
        self.ledger.emit(EventKind.ASKED, message=asked_message(rnd))
        return rnd
