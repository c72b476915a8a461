"""``Intake``: a round's expansions taken in - children deduplicated, stored, queued in order.

Guarantees:

- A child is new when its C is not in ``seen`` (this search's C); only new children are
  stored, each as ``pending`` with its prediction, in measuring order, before anything
  measures it (a search killed half-way measures them when resumed).
- The round's queue is its children in measuring order (``Measuring.order``), re-ordered
  whenever later shards add children; the counters count every rewrite tried.
- A parent's expansion is announced once, when its last shard is taken in; it is marked
  expanded then if it was its last part and none of its new children wait to be measured.
- Children an earlier search measured the same way (``search.reuse``) leave the queue and are
  handed back to be recorded instead of measured.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from schedsearch.core import Candidate, EventKind, ExpansionPart, Measurement, Store
from schedsearch.search.ledger import Ledger
from schedsearch.search.measuring import Measuring
from schedsearch.search.parts import TwoParts
from schedsearch.search.reuse import EarlierSearches
from schedsearch.search.rounds import Round, expansion_message, take_shards


class Intake:
    """Takes in the expansions of one run's rounds (one instance per run)."""

    def __init__(
        self, store: Store, ledger: Ledger, measuring: Measuring, parts: TwoParts, earlier: EarlierSearches
    ) -> None:
        self.store, self.ledger, self.measuring, self.parts, self.earlier = store, ledger, measuring, parts, earlier

    def take_in(self, rnd: Round, seen: set[str]) -> list[Measurement]:
        """Take the round's shards that came in since the last call: their new children are
        deduplicated against ``seen`` (and added to it), stored as pending with their
        predictions and queued, the queue in measuring order. Returns the earlier searches'
        measurements of the new children, to be recorded (``reused``)."""
        ledger = self.ledger
        assert ledger.sid is not None
        fresh, ledger.counters = take_shards(rnd, seen, ledger.counters)
        rest = list(rnd.queue)
        ordered, predicted = self.measuring.order(fresh, rest, seen)
        rnd.keys.update(predicted)
        queued = [predicted[c.fingerprint] for c in ordered if c.fingerprint in predicted]
        if queued:  # later shards may lower the anchor; a merge sets it anew (``Pipeline._merge``)
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
                if self.parts.announced(rnd, parent) and not rnd.waiting.get(parent.id):
                    self.store.mark_expanded(ledger.sid, parent.id)
        rnd.queue = deque(ordered)
        rnd.total += len(ordered) - len(rest)
        rnd.ranked = rnd.ranked or bool(predicted)
        return self.reused(rnd, stored)

    def reused(self, rnd: Round, new: Sequence[Candidate] | None = None) -> list[Measurement]:
        """What earlier searches measured of the round's queued children (of ``new`` only,
        when given: the rest of the queue was looked up already), taken out of its queue."""
        reused, _ = self.earlier.lookup(list(rnd.queue) if new is None else new)
        if reused:
            taken = {m.fingerprint for m in reused}
            rnd.queue = deque(c for c in rnd.queue if c.fingerprint not in taken)
        return reused
