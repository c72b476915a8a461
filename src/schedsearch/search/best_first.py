"""Best-first search: always expand the fastest measured candidate not yet expanded.

Pure greedy on the median time is the dominant behaviour. Timing noise can make one node
look a few percent faster than it is and starve its siblings, so every ``explore_every``-th
pick (default: one in eight) takes a uniformly random frontier node other than the best,
drawn from an RNG seeded with the search seed. Set ``explore_every=0`` for pure greedy.

On a plateau - many nodes whose times the measurements cannot tell apart - the greedy pick
would follow noise: each new child a fraction of a percent faster than its parent is picked
next, and the search dives down one lineage. So a pick takes, of the frontier's best nodes
``tied`` with the first, the shallowest (a shorter schedule as fast leaves more of the
space below it untried) and, among equally deep ones, with the cost model on, the one the
model predicted fastest before it was measured.

The model only breaks ties: a measurement outweighs a prediction. A blend that pulled each
node's measured time a quarter of the way towards its prediction let the model's errors
(tens of percent on a plateau, against about 2% of timing noise) choose the lineage: on the
16x16 i8 matmul (Zen 5) the search followed nodes the model wrongly favoured and no search
with the model reached 90% of the best kernel in 2 minutes (0 of 6), where searches without
it did in 2 of 3.
"""

from __future__ import annotations

from schedsearch.core import CandidateRecord
from schedsearch.numbers import within_noise
from schedsearch.search.frontier import FrontierStrategy, RankKey, rank_key

#: Times within this share of each other count as tied, whatever their spreads say: two
#: searches' medians of the same C differ by about 2% on the machines measured (quiet
#: timing), and within one search a kernel's spread understates that.
TIE_SHARE = 0.02
#: How many of the frontier's first nodes a pick looks at for ties.
TIE_WINDOW = 16


def tied(best: CandidateRecord, other: CandidateRecord) -> bool:
    """Whether ``other``'s time cannot be told from ``best``'s: within ``TIE_SHARE`` of it,
    or their ranges (median +- half the interquartile range) overlap."""
    if best.seconds is None or other.seconds is None:
        return False
    return other.seconds <= best.seconds * (1 + TIE_SHARE) or bool(within_noise(best.timing, other.timing))


class BestFirst(FrontierStrategy):
    """``core.SearchStrategy`` ordering the frontier by measured median seconds."""

    def __init__(self, max_depth: int, seed: int = 0, explore_every: int = 8, key: RankKey = rank_key,
                 predictions: bool = False) -> None:
        if explore_every < 0:
            raise ValueError("explore_every must be >= 0")
        super().__init__(max_depth, seed, key)
        self._explore_every = explore_every
        self._predictions = predictions  # break ties between equally deep nodes by prediction
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
                chosen.append(self._pick())
        return chosen

    def _pick(self) -> CandidateRecord:
        """The frontier's first node or, of the nodes tied with it, the shallowest, then
        (with ``predictions``) the one predicted fastest, then the first in frontier order."""
        head = self._frontier.peek(TIE_WINDOW)
        ties = [r for r in head if r is head[0] or tied(head[0], r)]
        pick = min(ties, key=lambda r: (r.depth, self._predicted(r)))
        removed = self._frontier.remove(pick.id)
        assert removed is not None
        return removed

    def _predicted(self, record: CandidateRecord) -> float:
        if not self._predictions or record.predicted is None:
            return 0.0
        return record.predicted
