"""The part of ``Pipeline`` that decides between rounds: when the expanded round starts
measuring, when the next round's parents are asked for (at once, or in an early ask once the
round's first children in measuring order are measured), and when the next round merges into
the current one.

Private to ``search.pipeline`` (``Pipeline`` is made of ``RoundPlanning`` and
``RoundResults``). Guarantees: while an early ask is armed, the round's results are held back
from the strategy and told in measuring order once it is made, so what the strategy has seen
when asked does not depend on the order measurements complete in; a merge waits until both
rounds are ready, whatever that order.
"""

from __future__ import annotations

from schedsearch.core import SearchConfig, SearchStrategy
from schedsearch.search.asking import Asker
from schedsearch.search.ledger import Ledger
from schedsearch.search.measuring import Measuring
from schedsearch.search.rounds import Round, absorb, early_ask_point, likely


class RoundPlanning:
    """Between rounds (see ``Pipeline``): the round whose children are measured
    (``current``) and the one whose parents are expanded (``next``)."""

    strategy: SearchStrategy
    config: SearchConfig
    ledger: Ledger
    current: Round | None
    next: Round | None
    measuring: Measuring
    asker: Asker

    def _take_in(self, rnd: Round) -> Round:  # pragma: no cover - RoundResults'
        raise NotImplementedError

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

    def _ask_again(self) -> None:
        """Ask for the next round again when the last ask found no room for it
        (``Asker.refused``) and the children still queued now fit in the budget left."""
        cur = self.current
        if self.next is not None or cur is None or cur.ask_after or not self.asker.refused:
            return
        if not self.asker.no_room(cur, self.measuring.merging(cur)):
            self.next = self._start_expanding()

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
            # A leading model's picks go on at once: the next round merges as soon as it is
            # ready, ahead of this round's likely winners still queued (``SearchConfig``).
            rnd.shut = self.config.model_leads
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
        if likely(cur) and not cur.shut:
            return
        self._release(cur)
        absorb(cur, nxt)
        self.next = None
        self._take_in(cur)
        self.ledger.record_accuracy()
        self._plan_next(cur)  # armed before anything more is placed: the ask counts from here
        self._fill()
