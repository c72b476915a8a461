"""Random search: expand a uniformly chosen frontier node (a baseline for the others)."""

from __future__ import annotations

from schedsearch.core import CandidateRecord
from schedsearch.search.frontier import FrontierStrategy


class RandomFrontier(FrontierStrategy):
    """``core.SearchStrategy`` picking frontier nodes uniformly with a seeded RNG."""

    def ask(self, n: int) -> list[CandidateRecord]:
        """Up to ``n`` uniformly chosen records (same seed and tells => same picks)."""
        chosen: list[CandidateRecord] = []
        while len(chosen) < n and self._frontier:
            chosen.append(self._frontier.pop_random(self._rng))
        return chosen
