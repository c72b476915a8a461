"""The part of ``Pipeline`` that takes results in: finished jobs of either round, shards of
expansions, measurements, and what earlier searches measured of the new children.

Private to ``search.pipeline`` (``Pipeline`` is made of ``RoundPlanning`` and
``RoundResults``). Guarantees: the time a job took is counted whether or not its result is
still wanted; a result of a job abandoned earlier changes nothing else; a parent is marked
expanded only once all its new children of its last part are measured.
"""

from __future__ import annotations

from schedsearch.core import JobResult, Measurement, Store
from schedsearch.search.intake import Intake
from schedsearch.search.pace import Pace
from schedsearch.search.pipeline_planning import RoundPlanning
from schedsearch.search.rounds import Round, final_part, leaders_in


class RoundResults(RoundPlanning):
    """Results as they come in (see ``Pipeline``), against the C this search has seen
    (``seen``, to deduplicate against)."""

    store: Store
    seen: set[str]
    intake: Intake

    @property
    def pace(self) -> Pace:
        """How fast this search expands and measures (the asker's, which judges late rounds)."""
        return self.asker.pace

    @pace.setter
    def pace(self, pace: Pace) -> None:
        self.asker.pace = pace

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
        del cur.measuring[job.id]
        for m in result.measurements:
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

    def _measured(self, rnd: Round, m: Measurement) -> None:
        """Record one child's measurement; its parent is expanded once all its children are. While an early ask is pending, the strategy hears of it
        only after the ask."""
        rnd.done += 1
        self.pace.measured(self.ledger.elapsed())
        place = rnd.place.get(m.fingerprint)
        hold = bool(rnd.ask_after) and place is not None
        record = self.ledger.record(m, announce=True, tell=not hold)
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
