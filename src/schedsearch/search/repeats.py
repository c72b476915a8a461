"""How far apart this search's own repeated measurements of one kernel are.

Every new best is measured twice, in two processes (``search.confirm``), so each
search collects, as it goes, pairs of times of the same C taken seconds apart on the machine
it runs on. How far apart they are is the timing noise that decides whether two near-equal
candidates can be told apart. It differs several-fold between a quiet machine and a shared
one, so a fixed share cannot be right everywhere: best-first's ties (``best_first.tied``)
take the share from here.

Standard library only.
"""

from __future__ import annotations

import math
import statistics
from collections import deque

#: The share below which times are never told apart, however close the repeats came: two
#: searches' medians of the same C differ by about this much on a quiet machine.
FLOOR = 0.02
#: The share above which times are always told apart: beyond it the repeats say more about a
#: passing disturbance (a confirmation 90% slower than the first time, builds running
#: beside it) than about the noise between two candidates measured alike.
CEILING = 0.10
#: Repeats needed before they are heeded: one or two pairs are mostly chance.
MIN_REPEATS = 3
#: The latest repeats heeded: the host's noise drifts with its neighbours' load.
WINDOW = 20


class RepeatNoise:
    """The pairs of times of the same kernel a search has taken, and the share of a time
    within which two candidates cannot be told apart (``share``)."""

    def __init__(self, floor: float = FLOOR, ceiling: float = CEILING, window: int = WINDOW) -> None:
        if not 0.0 <= floor <= ceiling:
            raise ValueError("need 0 <= floor <= ceiling")
        self.floor, self.ceiling = floor, ceiling
        self._gaps: deque[float] = deque(maxlen=window)

    def __len__(self) -> int:
        return len(self._gaps)

    def add(self, first: float, second: float) -> None:
        """Learn two times (seconds) of one kernel; times that are not positive are ignored."""
        if first > 0 and second > 0 and math.isfinite(first) and math.isfinite(second):
            self._gaps.append(abs(math.log(second / first)))

    def share(self) -> float:
        """The median gap of the latest repeats as a share of a time (``exp(gap) - 1``),
        kept within ``[floor, ceiling]``; ``floor`` until ``MIN_REPEATS`` repeats are in."""
        if len(self._gaps) < MIN_REPEATS:
            return self.floor
        return min(self.ceiling, max(self.floor, math.expm1(statistics.median(self._gaps))))
