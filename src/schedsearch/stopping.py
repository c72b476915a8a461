"""When a search should stop before its budget: the default stopping rule.

A search that has not improved beyond timing noise for a while is unlikely to improve by
going on, but "a while" must grow with what the search has already seen: a gain found after
ten minutes of nothing is worth waiting for only if earlier gains also came late. So the
rule compares the stretch since the last real gain (``Counters.since_best``: candidates
measured since a new best beyond the noise of the best it beat) with the search up to that
gain (``Counters.gain_seconds``, ``gain_measured``):

    stop when  measured since the gain >= max(MIN_CANDIDATES, PATIENCE * measured up to it)
         and   seconds since the gain  >= max(MIN_SECONDS,    PATIENCE * seconds up to it)

Both must hold: a slow kernel measures few candidates a minute, a fast expansion many.
And a search with a cost model also waits while the model predicts an untried candidate
(one made, not yet measured) faster than the best by more than the model's typical error
(``ahead``): what the model still expects to pay is measured before the search ends.
Seconds are the search's own (``Ledger.search_seconds``: without the wait for the
baseline, which grows with the problem's size, not with the search). The rule is a pure
function of numbers a search records, so ``benchmarks/early_stop.py`` replays recorded
searches through this very function to choose its constants. ``--no-early-stop`` turns it
off; ``--early-stop N`` replaces it with "N candidates in a row without a real gain".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from schedsearch.core import Counters

#: The stretch without a gain must be at least this many times the search before the gain.
PATIENCE = 2.0
#: ... and never shorter than this many measured candidates
MIN_CANDIDATES = 100
#: ... nor than this many seconds of search.
MIN_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class StoppingRule:
    """The stopping rule with its constants (the defaults are the search's; a benchmark may
    try others)."""

    patience: float = PATIENCE
    min_candidates: int = MIN_CANDIDATES
    min_seconds: float = MIN_SECONDS

    def should_stop(self, gain_seconds: float, gain_measured: int, seconds: float, since_best: int) -> bool:
        """Whether a search whose last real gain came at ``gain_seconds`` after
        ``gain_measured`` measured candidates, now at ``seconds`` with ``since_best``
        candidates measured since, has waited long enough without another."""
        return since_best >= max(self.min_candidates, self.patience * gain_measured) and seconds - gain_seconds >= max(
            self.min_seconds, self.patience * gain_seconds
        )


DEFAULT_RULE = StoppingRule()


def ahead(best: float, untried: Sequence[float], error: float) -> int:
    """How many of the ``untried`` candidates' predictions (log time ratios) beat the
    prediction for the best, ``best``, by more than ``error``, the model's typical error."""
    return sum(1 for p in untried if p < best - error)


def stopped_improving(counters: Counters, seconds: float, rule: StoppingRule = DEFAULT_RULE) -> bool:
    """``rule`` applied to a search's counters at ``seconds`` of search."""
    return rule.should_stop(counters.gain_seconds, counters.gain_measured, seconds, counters.since_best)
