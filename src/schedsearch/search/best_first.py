"""Best-first search: always expand the fastest measured candidate not yet expanded.

Pure greedy on the median time is the dominant behaviour. Timing noise can make one node
look a few percent faster than it is and starve its siblings, so every ``explore_every``-th
pick (default: one in eight) takes a uniformly random frontier node other than the best,
drawn from an RNG seeded with the search seed. Set ``explore_every=0`` for pure greedy.

With the cost model on, the frontier is ordered by ``ranking.blended_key``: each node's
measured time relative to the root, pulled a quarter of the way towards what the model
predicted for it before it was measured.
"""

from __future__ import annotations

from schedsearch.core import CandidateRecord
from schedsearch.search.frontier import FrontierStrategy, RankKey, rank_key


class BestFirst(FrontierStrategy):
    """``core.SearchStrategy`` ordering the frontier by measured median seconds."""

    def __init__(self, max_depth: int, seed: int = 0, explore_every: int = 8, key: RankKey = rank_key) -> None:
        if explore_every < 0:
            raise ValueError("explore_every must be >= 0")
        super().__init__(max_depth, seed, key)
        self._explore_every = explore_every
        self._picks = 0

    def ask(self, n: int) -> list[CandidateRecord]:
        """Up to ``n`` records, fastest first (with the occasional exploratory pick)."""
        chosen: list[CandidateRecord] = []
        while len(chosen) < n and self._frontier:
            self._picks += 1
            explore = self._explore_every > 0 and self._picks % self._explore_every == 0
            if explore and len(self._frontier) > 1:
                chosen.append(self._frontier.pop_random(self._rng, skip_best=True))
            else:
                chosen.append(self._frontier.pop_best())
        return chosen
