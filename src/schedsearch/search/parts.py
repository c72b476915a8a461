"""``TwoParts``: a large parent is expanded in two parts, its costly rewrites last.

A large parent (a register tile, an unrolled nest: ``expand.DEFER_FROM_STATEMENTS``) is
expanded in two parts (``core.ExpansionPart``, ``SearchConfig.defer_costly``): the first time
the strategy picks it, its cheap rewrites; its reorders, hoists, sinks and packs
(``Rule.deferred``, which Exo checks over the whole nest) wait. Once its first part is
announced it goes back into the strategy's frontier at its own measured time, and its second
part comes when the strategy picks it again, or - at the latest - with the first expansion of
one of its children (``with_waiting_parents``). Why the latter: each child of a large node is
large too and defers its own costly rewrites, so on a plateau of children a little faster
than their parents "picked again" never came, and the costly rewrites were put off at every
level.

Guarantees:

- Only a strategy that takes single nodes back (not whole rounds) splits, and not when the
  model leads: its pick is expanded whole, sharded over every expander.
- Each parent's first part and second part are each asked for once; a parent picked after its
  second part was asked for is not expanded again.
- A parent whose first part left no costly rewrite (or failed) is done with its first part.
- Which parents come along depends on the asked ones only (and, for a parent whose first part
  was still streaming in, on when its last shard came in), so the same seed gives the same
  search.
"""

from __future__ import annotations

from schedsearch.core import CandidateRecord, ExpansionPart, SearchStrategy
from schedsearch.search.rounds import Round, final_part


class TwoParts:
    """Which parents of one run had which part of their rewrites asked for (one per run)."""

    def __init__(self, enabled: bool, strategy: SearchStrategy) -> None:
        self.enabled, self.strategy = enabled, strategy
        self.first_done: set[int] = set()  # parents whose first part has been asked for
        self.second_done: set[int] = set()  # ... and those whose second part has been asked for
        self.first_coming: set[int] = set()  # parents whose first part is not all in yet
        # Parents whose first part left costly rewrites, not yet asked for again, by id.
        self.costly_waiting: dict[int, CandidateRecord] = {}
        # Parents a child of which was expanded before their first part was all in (a
        # streamed round): their second part comes with the next round once they are.
        self.costly_owed: set[int] = set()

    def done(self, parent: CandidateRecord) -> bool:
        """Whether ``parent``'s second part was asked for already: it is not expanded again."""
        return parent.id in self.second_done

    def second(self, parent: CandidateRecord) -> bool:
        """Whether ``parent`` would be expanded for its second part now (``part_for``)."""
        return self.enabled and parent.id in self.first_done

    def part_for(self, parent: CandidateRecord) -> ExpansionPart:
        """The part of ``parent``'s rewrites to expand now, noted as asked for: the first part
        when it is picked the first time, its costly rewrites when it is picked again."""
        if not self.enabled:
            return ExpansionPart.ALL
        if self.second(parent):
            self.second_done.add(parent.id)
            self.costly_waiting.pop(parent.id, None)
            return ExpansionPart.DEFERRED
        self.first_done.add(parent.id)
        self.first_coming.add(parent.id)
        return ExpansionPart.FIRST

    def with_waiting_parents(self, parents: list[CandidateRecord]) -> list[CandidateRecord]:
        """``parents``, each preceded by its own parent when that one's costly rewrites still
        wait. A parent whose first part is still coming in (a streamed round) is owed: its
        second part comes with the first round asked once the first is all in."""
        asked = {p.id for p in parents}
        out: list[CandidateRecord] = []
        for pid in sorted(self.costly_owed - self.first_coming):
            self.costly_owed.discard(pid)
            if pid in self.costly_waiting and pid not in asked:  # else its first part left nothing
                asked.add(pid)
                out.append(self.costly_waiting[pid])
        for parent in parents:
            parent_id = parent.parent_id
            if parent_id is not None and parent_id in self.costly_waiting and parent_id not in asked:
                asked.add(parent_id)
                out.append(self.costly_waiting[parent_id])
            elif parent_id is not None and parent_id in self.first_coming:
                self.costly_owed.add(parent_id)
            out.append(parent)
        return out

    def announced(self, rnd: Round, parent: CandidateRecord) -> bool:
        """``parent``'s expansion in ``rnd`` is all in and announced; whether it was its last
        part. When it was not, its costly rewrites wait: it goes back into the frontier, at
        its own time, to be picked again when no faster node is left to expand first - or to
        come along with the first of its children to be expanded."""
        self.first_coming.discard(parent.id)
        if final_part(rnd, parent.fingerprint):
            return True
        self.strategy.tell(parent)
        self.costly_waiting[parent.id] = parent
        return False
