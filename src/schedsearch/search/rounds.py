"""A round of the search pipeline (``pipeline``) as a record, and what one round alone decides.

A round's parents are expanded (an expansion may come back shard by shard,
``JobResult.final``); their new children are queued in measuring order and measured.
``Round`` holds all of that, ``Tally`` what one parent's expansion gave. The functions
here look at one round and nothing else: which child is measured next (``next_child``),
the bar a likely winner is within (``STREAM_GATE``, ``gate_bar``) and how many of the
queued children pass it (``likely``), after how many children an early ask comes
(``early_ask_point``), how the children of newly arrived shards are taken out
(``take_shards``), and the words that describe the pipeline to the live view.

While a round's expansions are still coming in - or, in the cost model's order, while its
early ask is pending or the next round is expanded from its answer
(``Measuring.gated``) - only its likely winners are measured: children predicted within
``STREAM_GATE`` of the round's best prediction. Which children wait depends on the
predictions only, so the same seed still gives the same search.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from schedsearch.core import Candidate, CandidateRecord, Counters, Expansion, ExpansionPart, Phase

#: While a round's expansions are still coming in, only children expected within this
#: factor of the best predicted time in the round so far are measured (natural log of 4): the
#: likely winners at once, the rest once every shard is in. Measuring an also-ran would
#: pause the expanders (quiet timing) that are still making the round's best children.
STREAM_GATE = math.log(4.0)
#: An early ask of a round in proposal order waits for this share of its children (the
#: first in measuring order), and for at least one in-flight cap of them. A round in the
#: cost model's order waits for its likely winners only: at most one in-flight cap of the
#: children next in measuring order that are within ``STREAM_GATE`` of its best prediction.
EARLY_ASK_SHARE = 0.25
#: The share of a parent's shards a leading model plans the next round after, when none of
#: them holds a heavy rewrite alone (``leaders_in``).
LEADING_SHARE = 0.5


@dataclass
class Tally:
    """What one parent's expansion gave so far (it may come in several shards)."""

    new: int = 0
    duplicates: int = 0
    illegal: int = 0
    error: str = ""
    remembered: bool = False
    deferred: int = 0  # rewrites a FIRST expansion left for the parent's second one


@dataclass
class Round:
    """One round of the pipeline: its parents' expansions, then its children's measurements.
    A round may start measuring while some of its expansions are still coming in, shard by
    shard (when nothing else is left to measure); their children join the queue as they come."""

    number: int  # 0: a warm start's seeds, or what the last run left pending
    parents: list[CandidateRecord]
    part: dict[str, ExpansionPart] = field(default_factory=dict)  # parent fingerprint -> the part expanded
    expanding: dict[int, CandidateRecord] = field(default_factory=dict)  # job id -> parent
    parts: dict[str, list[Expansion]] = field(default_factory=dict)  # parent fingerprint -> shards in
    complete: set[str] = field(default_factory=set)  # parents whose last shard is in
    taken: dict[str, int] = field(default_factory=dict)  # parent fingerprint -> shards taken into the queue
    tally: dict[str, Tally] = field(default_factory=dict)  # parent fingerprint -> what its shards gave
    announced: set[str] = field(default_factory=set)  # parents whose expansion was announced
    streamed: bool = False  # an expansion of it came in shards (``JobResult.final``)
    keys: dict[str, float] = field(default_factory=dict)  # child fingerprint -> its prediction
    # The best prediction of a child still queued when the round took its children in
    # (lowered by later shards, set anew at a merge): what the gate's bar is counted from.
    anchor: float | None = None
    queue: deque[Candidate] = field(default_factory=deque)  # children not yet submitted, in order
    measuring: dict[int, Candidate] = field(default_factory=dict)  # job id -> child in flight
    parent_of: dict[str, int] = field(default_factory=dict)  # child fingerprint -> parent id
    waiting: dict[int, int] = field(default_factory=dict)  # parent id -> children not yet measured
    total: int = 0  # children to measure
    done: int = 0  # children measured
    ranked: bool = False  # measured in the cost model's order (likely winners first)
    # Early ask: the next parents are asked for once the first ``ask_after`` children in
    # measuring order are measured; until then results are held back from the strategy.
    ask_after: int = 0  # 0: no early ask pending in this round
    # In the cost model's order, places from here on go to likely winners only while an ask
    # is pending or the next round is expanded (``Measuring.gated``): the first ``ask_after``.
    open_until: int = 0
    # When the model leads (``SearchConfig.model_leads``): while gated, no place beyond
    # ``open_until`` either - the next round merges as soon as it is ready (``Pipeline._merge``).
    shut: bool = False
    # A child's place in measuring order is given when it leaves the queue (submitted, or
    # measured by an earlier search), so a queue re-ordered by late shards keeps it exact.
    place: dict[str, int] = field(default_factory=dict)  # child fingerprint -> place in measuring order
    placed: int = 0  # places given so far
    measured_places: set[int] = field(default_factory=set)
    held: dict[int, CandidateRecord] = field(default_factory=dict)  # place -> measured, not yet told

    def expanded(self) -> bool:
        return not self.expanding

    def has_new_shards(self) -> bool:
        """Shards in whose children are not in the queue yet."""
        return any(len(parts) > self.taken.get(fp, 0) for fp, parts in self.parts.items())

    def finished(self) -> bool:
        return not self.queue and not self.measuring and self.expanded()

    def take_place(self, fingerprint: str) -> None:
        """The child leaves the queue: its place in measuring order is the next one."""
        if fingerprint not in self.place:
            self.place[fingerprint] = self.placed
            self.placed += 1


def absorb(cur: Round, nxt: Round) -> None:
    """Take the round ``nxt`` (being expanded) into ``cur`` (being measured): its parents,
    expansions and shards join ``cur``, which takes its number; the children those shards
    hold are still to be taken in. The gate's anchor is set anew from the merged queue."""
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
    cur.anchor = None  # the merged queue's best prediction, not a measured child's


def next_child(rnd: Round, gated: bool = False) -> Candidate | None:
    """The next child to measure: the queue's first, except while the round's expansions
    are still coming in (or, ``gated``, while the next round's are), when only one that
    passes the gate (``passes``) may go (None: the rest wait for those expansions)."""
    if (rnd.expanded() and not gated) or not rnd.keys:
        return rnd.queue.popleft()
    bar = gate_bar(rnd)
    for i, child in enumerate(rnd.queue):
        if passes(rnd, child, bar):
            del rnd.queue[i]
            return child
    return None


def next_built(rnd: Round) -> Candidate | None:
    """The first queued child of ``rnd`` whose kernel is built already (``Candidate.built``),
    taken out of the queue (None: no such child)."""
    for i, child in enumerate(rnd.queue):
        if child.built:
            del rnd.queue[i]
            return child
    return None


def passes(rnd: Round, child: Candidate, bar: float) -> bool:
    """Whether ``child`` is measured while ``rnd`` is gated: it is predicted within ``bar``
    (a child without a prediction never is)."""
    return rnd.keys.get(child.fingerprint, math.inf) <= bar


def gate_bar(rnd: Round) -> float:
    """The slowest prediction a likely winner of ``rnd`` may have (it has predictions):
    ``STREAM_GATE`` above the round's anchor, the best prediction among the children it
    had queued. Not the best prediction it ever had: a child predicted far faster than it
    measured would hold the bar down for every round merged after it."""
    anchor = rnd.anchor if rnd.anchor is not None else min(rnd.keys.values())
    return anchor + STREAM_GATE


def likely(rnd: Round) -> int:
    """Queued children of ``rnd`` that pass the gate (all of them when it has no predictions)."""
    if not rnd.keys:
        return len(rnd.queue)
    bar = gate_bar(rnd)
    return sum(passes(rnd, c, bar) for c in rnd.queue)


def early_ask_point(rnd: Round, in_flight_cap: int) -> int:
    """How many of ``rnd``'s first children in measuring order are measured before its early
    ask: in the cost model's order those placed so far (in flight or measured) and its
    likely winners queued (``likely``), at most ``in_flight_cap`` of those; else
    ``EARLY_ASK_SHARE`` of the round (at least ``in_flight_cap``, at most all of it)."""
    if rnd.ranked:
        # Counted from the places given so far (a deterministic point: the round's start,
        # a merge, or a streamed shard): the next children, likely winners only.
        return rnd.placed + min(in_flight_cap, likely(rnd))
    return min(rnd.total, max(in_flight_cap, math.ceil(rnd.total * EARLY_ASK_SHARE)))


def leaders_in(parts: Sequence[Expansion], depth: int, *, workers: int, model_leads: bool) -> bool:
    """Whether a streamed round in the cost model's order plans its next round now, with
    ``parts`` of a parent's expansion in (the parent at ``depth``): the next round then grows
    from them while the rest of this one is still expanded.

    - Without a leading model: once a shard per worker is in (the first of each holds a
      likely winner).
    - A leading model ranks a node's children as a whole: it plans once every shard that
      holds a heavy rewrite alone (a register tile, ``Expansion.leading``) is in; the next
      round's expansions then go ahead of this one's last shards (``expansion_priority``).
    - When no shard leads: once ``LEADING_SHARE`` of a deeper parent's shards are in (the
      rewrites are dealt to the shards in turn, so the first ones hold every kind), and only
      once all of the root's are in - its children differ the most and set the search's
      course, and its last shards would otherwise wait behind every deeper round's.
    """
    if not model_leads:
        return len(parts) >= workers
    leads = max((e.leads for e in parts), default=0)
    if leads == 0:
        return depth > 0 and len(parts) >= LEADING_SHARE * max((e.shards for e in parts), default=1)
    return sum(e.leading for e in parts) >= leads


def final_part(rnd: Round, fingerprint: str) -> bool:
    """Whether the expansion of the parent ``fingerprint`` in ``rnd`` is its last: every
    rewrite, its costly ones, or a first part that left none for later."""
    part = rnd.part.get(fingerprint, ExpansionPart.ALL)
    tally = rnd.tally.get(fingerprint)
    return part is not ExpansionPart.FIRST or (tally is not None and (not tally.deferred or bool(tally.error)))


def take_shards(rnd: Round, seen: set[str], counters: Counters) -> tuple[list[Candidate], Counters]:
    """Take the children out of the round's shards that came in since the last call.

    Children whose C is in ``seen`` are duplicates; the others are new: added to ``seen``,
    their parent noted in ``rnd.parent_of``. Each parent's ``Tally`` and the counters count
    them. Returns the new children (parents in ask order) and the counters.
    """
    fresh: list[Candidate] = []
    # Parents in ask order (not completion order) so ids are deterministic.
    for parent in rnd.parents:
        fp = parent.fingerprint
        shards = rnd.parts.get(fp, [])
        tally = rnd.tally.setdefault(fp, Tally())
        for expansion in shards[rnd.taken.get(fp, 0) :]:
            new = 0
            dups = expansion.duplicates
            for child in expansion.children:
                if child.fingerprint in seen:
                    dups += 1
                    continue
                seen.add(child.fingerprint)
                rnd.parent_of[child.fingerprint] = parent.id
                fresh.append(child)
                new += 1
            # generated = every rewrite tried, so generated - duplicates - illegal is
            # exactly the number of new candidates recorded
            counters = counters.plus(
                generated=max(expansion.attempted, len(expansion.children) + expansion.duplicates + expansion.illegal),
                duplicates=dups,
                illegal=expansion.illegal,
            )
            tally.new += new
            tally.duplicates += dups
            tally.illegal += expansion.illegal
            tally.error = tally.error or expansion.error
            tally.remembered = tally.remembered or expansion.remembered
            tally.deferred = max(tally.deferred, expansion.deferred)
        rnd.taken[fp] = len(shards)
    return fresh, counters


def expansion_message(tally: Tally, part: ExpansionPart = ExpansionPart.ALL) -> str:
    """What an ``expanded`` event says of a parent's expansion (or of one of its parts)."""
    message = f"{tally.new} new, {tally.duplicates} duplicate, {tally.illegal} illegal"
    if part is ExpansionPart.FIRST and tally.deferred and not tally.error:
        message += f"; {tally.deferred} costly rewrites wait until it is picked again or a child of it is expanded"
    elif part is ExpansionPart.DEFERRED:
        message += " from its costly rewrites"
    if tally.error:
        message += f"; cannot replay: {tally.error.strip()}"
    elif tally.remembered:
        message += "; expanded by an earlier search (from the cache)"
    return message


def asked_message(rnd: Round) -> str:
    """What an ``asked`` event says of a round just sent to be expanded: its number and each
    parent, the second part of a large one (its costly rewrites) said so."""
    return f"round {rnd.number}: expanding {', '.join(_named(rnd, p) for p in rnd.parents)}"


def _named(rnd: Round, parent: CandidateRecord) -> str:
    """A parent being expanded, for the live view: its id, and which part when its second."""
    if rnd.part.get(parent.fingerprint) is ExpansionPart.DEFERRED:
        return f"#{parent.id} (its costly rewrites)"
    return f"#{parent.id}"


def activity_text(phase: Phase, cur: Round | None, nxt: Round | None) -> str:
    """What the pipeline is doing, in a few words, for the live view: ``cur`` is the round
    being measured, ``nxt`` the one being expanded."""
    parts = []
    if phase is Phase.BASELINE:
        parts.append("timing the unscheduled proc")
    if cur is not None and cur.total:
        what = f"round {cur.number}" if cur.number else "the warm start and what was left pending"
        parts.append(f"measuring {cur.done}/{cur.total} of {what} ({len(cur.measuring)} in flight)")
    if nxt is not None and not nxt.expanded():
        ids = ", ".join(_named(nxt, p) for p in nxt.expanding.values())
        parts.append(f"expanding {ids} for round {nxt.number}")
    elif nxt is not None:
        children = sum(len(e.children) for shards in nxt.parts.values() for e in shards)
        parts.append(f"round {nxt.number} expanded: {children} children wait to be measured")
    if cur is not None and not cur.expanded():
        ids = ", ".join(_named(cur, p) for p in cur.expanding.values())
        parts.append(f"{ids} still expanding (its children join round {cur.number} as they come)")
    return "; ".join(parts)
