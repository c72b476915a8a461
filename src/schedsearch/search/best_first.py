"""Best-first search: always expand the fastest measured candidate not yet expanded.

Pure greedy on the median time is the dominant behaviour. Timing noise can make one node
look a few percent faster than it is and starve its siblings, so every ``explore_every``-th
pick (default: one in eight) takes a uniformly random frontier node other than the best,
drawn from an RNG seeded with the search seed. Set ``explore_every=0`` for pure greedy.

With the cost model on, the model breaks ties: of the frontier's best nodes ``tied`` with
the first (their times cannot be told apart), the pick takes the one the model predicted
fastest before it was measured. Only ties: a measurement outweighs a prediction. A blend
that pulled each node's measured time a quarter of the way towards its prediction let the
model's errors (tens of percent, against about 2% of timing noise) choose the lineage: on
the 16x16 i8 matmul (Zen 5) the searches with the model followed nodes it wrongly favoured,
and none of 9 cold runs (90 s to 2 minutes) reached 100 ns, where 5 of 9 without the model did.

Two times are tied when they are at most ``TIE_SHARE`` apart or their ranges overlap.
"""

from __future__ import annotations

from schedsearch.core import CandidateRecord
from schedsearch.numbers import within_noise
from schedsearch.search.frontier import FrontierStrategy, RankKey, rank_key

#: Times within this share of each other count as tied, whatever their spreads say: two
#: searches' medians of the same C differ by about that much on a quiet machine, and within
#: one search a kernel's spread understates it.
TIE_SHARE = 0.02
#: How many of the frontier's first nodes a pick looks at for ties.
TIE_WINDOW = 16


def tied(best: CandidateRecord, other: CandidateRecord, share: float = TIE_SHARE) -> bool:
    """Whether ``other``'s time cannot be told from ``best``'s: at most ``share`` slower,
    or their ranges (median +- half the interquartile range) overlap."""
    if best.seconds is None or other.seconds is None:
        return False
    return other.seconds <= best.seconds * (1 + share) or bool(within_noise(best.timing, other.timing))


class BestFirst(FrontierStrategy):
    """``core.SearchStrategy`` ordering the frontier by measured median seconds."""

    def __init__(
        self, max_depth: int, seed: int = 0, explore_every: int = 8, key: RankKey = rank_key, predictions: bool = False
    ) -> None:
        if explore_every < 0:
            raise ValueError("explore_every must be >= 0")
        super().__init__(max_depth, seed, key)
        self._explore_every = explore_every
        self._predictions = predictions  # break ties between measured nodes by prediction
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
        """The frontier's first node or, with ``predictions``, of the nodes tied with it the
        one predicted fastest (the first in frontier order among equal predictions)."""
        head = self._frontier.peek(TIE_WINDOW if self._predictions else 1)
        ties = [r for r in head if r is head[0] or tied(head[0], r)]
        pick = min(ties, key=self._predicted)
        removed = self._frontier.remove(pick.id)
        assert removed is not None
        return removed

    @staticmethod
    def _predicted(record: CandidateRecord) -> float:
        return record.predicted if record.predicted is not None else 0.0
