"""The cost model's half of the stopping rule: is anything untried predicted faster?

Once the stretch without a real gain is long enough (``schedsearch.stopping``), the search
asks the model about the children it has made and not yet measured - the queues of the
round being measured and of the one being expanded - and goes on while any is predicted
faster than the best by more than the model's typical error (``stopping.ahead``). The best
and the untried are predicted by the same model at the same moment, so a model that is
biased (all its predictions too fast, say) compares them on one scale.
"""

from __future__ import annotations

from collections.abc import Iterable

from schedsearch.core import Candidate
from schedsearch.search.guidance import Guidance
from schedsearch.search.ledger import Ledger
from schedsearch.search.rounds import Round
from schedsearch.stopping import ahead

#: Seconds between two looks: a look predicts every untried child, and the answer changes
#: only as rounds come in.
LOOK_SECONDS = 5.0


class UntriedLook:
    """Looks, at most every ``LOOK_SECONDS``, at how many untried children the model
    predicts faster than the best (``count``); 0 without a model, before the model has
    shown its typical error, or with nothing untried."""

    def __init__(self, guide: Guidance | None, ledger: Ledger) -> None:
        self.guide, self.ledger = guide, ledger
        self.last: tuple[float, int] | None = None  # (search seconds, count) of the last look

    def count(self, rounds: Iterable[Round | None]) -> int:
        now = self.ledger.search_seconds()
        if self.last is not None and now - self.last[0] < LOOK_SECONDS:
            return self.last[1]
        found = self._look([c for r in rounds if r is not None for c in r.queue])
        self.last = (now, found)
        return found

    def _look(self, untried: list[Candidate]) -> int:
        guide = self.guide
        best = self.ledger.top[0] if self.ledger.top else None
        error = guide.typical_error() if guide is not None else None
        mine = self.ledger.candidate(best) if best is not None else None
        if guide is None or error is None or mine is None or not untried:
            return 0
        predicted = guide.predictions([mine, *untried])
        return ahead(predicted[0], predicted[1:], error) if predicted else 0
