"""``Pace``: how long this search's expansions take from ask to last shard and how fast it
measures, and whether a round asked now would come in while there is still time to measure
its first children.

Why: near the end of a time budget a round of large parents - register tiles, and above all
their second parts, whose reorders and packs Exo checks over the whole nest in seconds each -
could take longer to expand than the budget had left: its children were never measured,
those of earlier rounds waited unmeasured behind it, and the expanders held cores the builds
of those children needed. A round that cannot come in with time to spare is therefore not
started; the rest of the budget measures what is queued.

The estimate is this search's own: the median time from ask to last shard of the parents
expanded so far, first picks and second parts apart (a kind not seen yet is taken to be as
slow as the slowest parent seen), a round's parents shared out among the expanders; and the
time its first children take, at the pace of the latest measurements (the search's average
would count its first seconds, the workers starting and the root's expansion, against every
round). It depends on timing, as the budget does: a search with a time budget is the same
for the same seed only as long as its work takes the same time.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

#: Measurements the pace of measuring is taken over.
RECENT = 9


@dataclass
class Pace:
    """The ask-to-last-shard seconds of each parent's expansion, by kind (a second part or
    not), and when the latest measurements were recorded."""

    first: list[float] = field(default_factory=list)  # first picks (a large parent's cheap rewrites, or all)
    second: list[float] = field(default_factory=list)  # second parts: a large parent's costly rewrites
    asked: dict[int, tuple[float, bool]] = field(default_factory=dict)  # job id -> (asked at, second part)
    recent: deque[float] = field(default_factory=lambda: deque(maxlen=RECENT))  # when measured

    def measured(self, at: float) -> None:
        """A measurement was recorded at ``at``."""
        self.recent.append(at)

    def seconds_per_measurement(self) -> float:
        """Seconds between the latest measurements (0 before two)."""
        if len(self.recent) < 2:
            return 0.0
        return (self.recent[-1] - self.recent[0]) / (len(self.recent) - 1)

    def ask(self, job_id: int, at: float, second: bool) -> None:
        """An expansion job was submitted at ``at`` (seconds of the search)."""
        self.asked[job_id] = (at, second)

    def came_in(self, job_id: int, at: float) -> None:
        """The job's last shard came in at ``at``."""
        asked = self.asked.pop(job_id, None)
        if asked is not None:
            (self.second if asked[1] else self.first).append(max(0.0, at - asked[0]))

    def expected(self, second: bool) -> float | None:
        """Seconds a parent's expansion of this kind is expected to take; None before any
        expansion came in."""
        own = self.second if second else self.first
        if own:
            return statistics.median(own)
        seen = self.first + self.second
        return max(seen) if seen else None

    def round_seconds(self, parts: Sequence[bool], expanders: int) -> float | None:
        """Seconds a round whose parents' expansions are of these kinds is expected to take,
        its parents shared out among ``expanders``; None before any expansion came in."""
        each = [self.expected(second) for second in parts]
        if not each or any(e is None for e in each):
            return None
        return sum(e for e in each if e is not None) / max(1, min(len(each), expanders))


def comes_in_too_late(round_seconds: float, seconds_left: float, measure_first: float) -> bool:
    """Whether a round expected to take ``round_seconds`` leaves less than ``measure_first``
    seconds (its first children's measurements) of the ``seconds_left`` once it is in."""
    return round_seconds + measure_first > seconds_left
