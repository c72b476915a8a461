"""Random search: expand a uniformly chosen frontier node (a baseline for the others)."""

from __future__ import annotations

import random

from schedsearch.core import CandidateRecord
from schedsearch.search.frontier import Frontier, expandable


class RandomFrontier:
    """``core.SearchStrategy`` picking frontier nodes uniformly with a seeded RNG."""

    def __init__(self, max_depth: int, seed: int = 0) -> None:
        self._max_depth = max_depth
        self._rng = random.Random(seed)
        self._frontier = Frontier()

    def tell(self, record: CandidateRecord) -> None:
        """Learn a measured candidate; ``ok`` ones below max depth join the frontier."""
        if expandable(record, self._max_depth):
            self._frontier.push(record)
        else:
            self._frontier.remove(record.id)

    def ask(self, n: int) -> list[CandidateRecord]:
        """Up to ``n`` uniformly chosen records (same seed and tells => same picks)."""
        chosen: list[CandidateRecord] = []
        while len(chosen) < n and self._frontier:
            chosen.append(self._frontier.pop_random(self._rng))
        return chosen

    def exhausted(self) -> bool:
        """True when no expandable record is left."""
        return not self._frontier
