"""Beam search: expand the best ``width`` candidates of each depth, one depth at a time.

The beam of depth ``d`` is chosen when the search first asks for work at that depth, i.e.
after every parent of depth ``d - 1`` in the previous beam has been expanded and its children
measured (the loop evaluates a round completely before asking again). Children that arrive
later for an already chosen level are recorded but do not join its beam. Members are
ranked by their measured times, with the cost model on too (``best_first`` says why a
measurement outweighs a prediction).
"""

from __future__ import annotations

from schedsearch.core import CandidateRecord, Status
from schedsearch.search.frontier import RankKey, expandable, rank_key


class Beam:
    """``core.SearchStrategy`` keeping the ``width`` fastest ``ok`` nodes per depth level."""

    whole_rounds = True  # a level's beam is chosen once: from the whole previous level

    def __init__(self, width: int, max_depth: int, key: RankKey = rank_key) -> None:
        if width < 1:
            raise ValueError("beam width must be >= 1")
        self._key = key
        self._width = width
        self._max_depth = max_depth
        self._levels: dict[int, dict[int, CandidateRecord]] = {}
        self._level = 0
        self._queue: list[CandidateRecord] | None = None  # beam of the current level not yet asked

    @property
    def level(self) -> int:
        """The depth whose beam is being expanded."""
        return self._level

    def tell(self, record: CandidateRecord) -> None:
        """Learn a measured candidate; ``ok`` ones become members of their depth level."""
        level = self._levels.setdefault(record.depth, {})
        if record.status is Status.OK and record.seconds is not None:
            level[record.id] = record
        else:
            level.pop(record.id, None)

    def _ready(self) -> bool:
        """Make sure the current level has queued work, moving down levels as they finish."""
        while True:
            if self._queue is None:
                members = sorted(self._levels.get(self._level, {}).values(), key=self._key)
                # Members expanded in an earlier run still take their place in the beam.
                self._queue = [r for r in members[: self._width] if expandable(r, self._max_depth)]
            if self._queue:
                return True
            if not self._levels.get(self._level + 1):
                return False
            self._level += 1
            self._queue = None

    def ask(self, n: int) -> list[CandidateRecord]:
        """Up to ``n`` beam members of the current level, fastest first (never two levels)."""
        if n <= 0 or not self._ready():
            return []
        assert self._queue is not None
        chosen, self._queue = self._queue[:n], self._queue[n:]
        return chosen

    def exhausted(self) -> bool:
        """True when the current beam is done and the next level has no members."""
        return not self._ready()
