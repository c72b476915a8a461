"""``TwoParts``: a large parent is expanded in two parts, its costly rewrites last.

A large parent (a register tile, an unrolled nest: ``expand.DEFER_FROM_STATEMENTS``) is
expanded in two parts (``core.ExpansionPart``, ``SearchConfig.defer_costly``): the first time
the strategy picks it, its cheap rewrites; its reorders, hoists, sinks and packs
(``Rule.deferred``, which Exo checks over the whole nest) wait. Once its first part is
announced it goes back into the strategy's frontier at its own measured time, and its second
part comes when the strategy picks it again.

Guarantees:

- Only a strategy that takes single nodes back (not whole rounds) splits, and not when the
  model leads: its pick is expanded whole, sharded over every expander.
- Each parent's first part and second part are each asked for once; a parent picked after its
  second part was asked for is not expanded again.
- A parent whose first part left no costly rewrite (or failed) is done with its first part.
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
            return ExpansionPart.DEFERRED
        self.first_done.add(parent.id)
        return ExpansionPart.FIRST

    def announced(self, rnd: Round, parent: CandidateRecord) -> bool:
        """``parent``'s expansion in ``rnd`` is all in and announced; whether it was its last
        part. When it was not, its costly rewrites wait: it goes back into the frontier, at
        its own time, to be picked again when no faster node is left to expand first."""
        if final_part(rnd, parent.fingerprint):
            return True
        self.strategy.tell(parent)
        return False
