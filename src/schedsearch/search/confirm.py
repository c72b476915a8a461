"""``Confirmations``: a new best is measured a second time before it counts.

With ``SearchConfig.confirm_best``, a measurement faster than the best so far (both on the
search's scale) is not recorded at once: its candidate is measured again, in a new process,
and the slower of the two times is what the search records (``confirmed``). Why: the fastest
of many measurements of near-equal kernels is mostly the luckiest one, and a new best sets
the bar every later candidate is timed against (``measuring``'s cutoff) and steers the
strategy for the rest of the search.

Guarantees:

- Only an ``ok`` measurement strictly faster than the best so far is confirmed; none before
  there is a best (the baseline is the first best).
- A confirmed candidate records the slower of its two times, or its second measurement when
  that one failed: a kernel that verified once and then failed is not trusted.
- How far apart the two times came is the search's timing noise (``repeats``); the strategy
  hears it (``heed_noise``) after every pair of ``ok`` times.
- While a confirmation is in flight the search is not judged to have stopped improving
  (``pending``): the confirmed time may end the run without progress.
"""

from __future__ import annotations

from schedsearch.core import Measurement, SearchStrategy, Status
from schedsearch.search.ledger import Ledger
from schedsearch.search.repeats import RepeatNoise


class Confirmations:
    """The confirmations of one run (one instance per run): which measurements are
    confirmed, those in flight (by job id), and the timing noise their pairs show."""

    def __init__(self, enabled: bool, ledger: Ledger, strategy: SearchStrategy) -> None:
        self.enabled, self.ledger, self.strategy = enabled, ledger, strategy
        # Job id -> the first measurement (placed) of the candidate it measures again.
        self.in_flight: dict[int, Measurement] = {}
        # How far apart the two times of each confirmed candidate were: the strategy's ties.
        self.repeats = RepeatNoise()

    def wanted(self, m: Measurement) -> bool:
        """Whether ``m`` (placed on the search's scale) would be the new best: then it is
        measured again before it counts."""
        top = self.ledger.top
        if not self.enabled or m.status is not Status.OK or m.seconds is None or not top:
            return False
        best = top[0].seconds
        return best is not None and m.seconds < best

    def started(self, job_id: int, first: Measurement) -> None:
        """Job ``job_id`` measures again the candidate first measured as ``first``."""
        self.in_flight[job_id] = first

    def take(self, job_id: int) -> Measurement | None:
        """The first measurement job ``job_id`` confirms (None: not a confirmation); the
        job is no longer in flight."""
        return self.in_flight.pop(job_id, None)

    def pending(self) -> bool:
        """Whether a confirmation is in flight."""
        return bool(self.in_flight)

    def clear(self) -> None:
        """Forget the confirmations in flight (their jobs were abandoned)."""
        self.in_flight.clear()

    def settle(self, first: Measurement, second: Measurement) -> tuple[Measurement, str]:
        """What a confirmed candidate records and what is said of it (``confirmed``), once
        the strategy has heard the timing noise the pair shows."""
        self.heed(first, second)
        return confirmed(first, second)

    def heed(self, first: Measurement, second: Measurement) -> None:
        """Learn how far apart two measurements of one candidate came (both placed, both
        ok), and tell the strategy the search's timing noise as it now stands."""
        if first.seconds is None or second.seconds is None or second.status is not Status.OK:
            return
        self.repeats.add(first.seconds, second.seconds)
        self.strategy.heed_noise(self.repeats.share())


def confirmed(first: Measurement, second: Measurement) -> tuple[Measurement, str]:
    """What a confirmed candidate records, and what is said of it: the slower of its two
    measurements (both placed on the search's scale), or the second when that one failed -
    a kernel that verified once and then failed is not to be trusted."""
    if second.status is not Status.OK or second.seconds is None or not first.seconds:
        return second, f"measured twice: ok, then {second.status.value}"
    slower = max(first, second, key=lambda m: m.seconds or 0.0)
    change = second.seconds / first.seconds - 1.0
    return slower, f"measured twice: the second time {change:+.1%} from the first; the slower counts"
