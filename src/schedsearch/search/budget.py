"""``Budget``: what is spent and what is left of a search's budgets, one formula each.

A search has two budgets (``SearchConfig``): wall seconds (``max_seconds``) and candidates it
measures (``max_candidates``). The seconds spent are the ledger's alone
(``Ledger.budget_spent``: the run's clock, its start, the earlier runs; not the wait for the
baseline), so every event, every decision and the finalists' deadline read one number.

Guarantees:

- New work stops in time for the finalists' re-measurement: ``seconds_left``, ``spent_out``
  and ``outlasts`` all count the finalists' reserve (``finalists.finalist_reserve``).
- The cost model's pruning reads the whole budget, without the reserve
  (``seconds_left_whole``); see that method for why.
- The re-measurement of the finalists may run past the budget by a grace only (``overrun``).
- Candidates left are what this search may still measure (reused measurements do not count),
  less those in flight when the caller says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from schedsearch.core import SearchConfig
from schedsearch.search.finalists import finalist_reserve
from schedsearch.search.ledger import Ledger


@dataclass(frozen=True)
class Budget:
    """The budgets of one run of a search (``config``), read off its books (``ledger``),
    which move as it runs: every answer is as of the call."""

    config: SearchConfig
    ledger: Ledger

    def spent(self) -> float:
        """Seconds of the time budget used (``Ledger.budget_spent``)."""
        return self.ledger.budget_spent()

    def reserve(self) -> float:
        """Seconds kept for re-measuring the finalists (0 without a time budget)."""
        return finalist_reserve(self.config, self.ledger.top, self.ledger.root_record)

    def seconds_left(self) -> float | None:
        """Seconds left for new work - expanding and measuring - once the finalists' reserve
        is kept (None: no time budget). May be negative."""
        limit = self.config.max_seconds
        if limit is None:
            return None
        return limit - self.reserve() - self.spent()

    def seconds_left_whole(self) -> float | None:
        """Seconds left of the whole time budget, the finalists' reserve included (None: no
        time budget). Only the cost model's pruning reads this (``Guidance.order``): its test
        of a short budget has always counted the whole budget, and counting the reserve there
        would prune more children - a change of the search's decisions, which needs its own
        measurements before it is made."""
        limit = self.config.max_seconds
        if limit is None:
            return None
        return limit - self.spent()

    def spent_out(self) -> bool:
        """Whether no time is left for new work (``seconds_left`` at or below zero): the
        rounds end and the finalists are re-measured."""
        left = self.seconds_left()
        return left is not None and left <= 0.0

    def overrun(self, grace: float) -> bool:
        """Whether the time budget is spent by more than ``grace`` seconds: the finalists'
        re-measurement, which the reserve was kept for, is given up then."""
        limit = self.config.max_seconds
        return limit is not None and self.spent() >= limit + grace

    def candidates_left(self, in_flight: int = 0) -> int | None:
        """Candidates this search may still measure, less ``in_flight`` being measured
        (None: no candidate budget). May be negative."""
        limit = self.config.max_candidates
        if limit is None:
            return None
        return limit - self.ledger.counters.measured - in_flight

    def seconds_per_candidate(self) -> float | None:
        """The search's pace so far: seconds of the budget spent (``spent``) per candidate
        measured (None before one). On the budget's own clock, so the wait for the
        unscheduled kernel - minutes for a large naive nest - does not pass for the pace of
        the candidates measured since."""
        measured = self.ledger.counters.measured
        return self.spent() / measured if measured else None

    def outlasts(self, candidates: int) -> bool:
        """Whether measuring ``candidates`` more at the search's pace so far
        (``seconds_per_candidate``) would use up the seconds left for new work (False
        without a time budget, or before a measurement)."""
        pace = self.seconds_per_candidate()
        left = self.seconds_left()
        if left is None or pace is None:
            return False
        return candidates * pace >= left
