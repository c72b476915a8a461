"""The default stopping rule (``schedsearch.stopping``): the rule itself, and a search that
ends by it (run_search over the simulated executor and a fake clock; no exo/cc/ray)."""

from __future__ import annotations

import pytest

from schedsearch.cli.numbers_view import status_text
from schedsearch.core import EventKind, SearchConfig, SearchStatus
from schedsearch.numbers import Ending, ending
from schedsearch.search import make_strategy, run_search
from schedsearch.stopping import DEFAULT_RULE, StoppingRule
from schedsearch.store import InMemoryStore
from schedsearch.testing.fake_executor import FakeClock, FakeExecutor
from schedsearch.testing.fake_tree import FakeTree, fake_root, fake_workload

RULE = StoppingRule(patience=2.0, min_candidates=100, min_seconds=60.0)


@pytest.mark.parametrize(("gain", "now", "since", "stop"), [
    ((10.0, 20), 69.0, 500, False),   # 59 s since the gain: under the 60-s floor
    ((10.0, 20), 70.0, 99, False),    # 99 candidates since: under the 100-candidate floor
    ((10.0, 20), 70.0, 100, True),    # both floors met, and both beyond twice the search before
    ((100.0, 300), 299.0, 600, False),  # a late gain: the stretch must be twice its 100 s
    ((100.0, 300), 300.0, 599, False),  # ... and twice its 300 candidates
    ((100.0, 300), 300.0, 600, True),
])
def test_the_stretch_without_a_gain_must_be_long_against_the_search_before_it(
        gain: tuple[float, int], now: float, since: int, stop: bool) -> None:
    assert RULE.should_stop(gain[0], gain[1], now, since) is stop


def test_the_default_rule_is_the_documented_one() -> None:
    assert DEFAULT_RULE == RULE


def _search(cfg: SearchConfig):
    clock = FakeClock()
    store = InMemoryStore()
    events = []
    ex = FakeExecutor(FakeTree(moves=9), clock=clock, eval_seconds=0.5, expand_seconds=0.25)
    outcome = run_search(fake_workload(), fake_root(), make_strategy(cfg), ex, store, cfg, events.append, clock=clock)
    return outcome, store.get_search(outcome.search_id), events


def test_a_search_ends_by_the_default_rule_soon_after_it_holds() -> None:
    outcome, stored, events = _search(SearchConfig(max_seconds=3000.0, confirm_best=False))
    c = stored.counters
    assert outcome.status is SearchStatus.COMPLETED and ending(stored) is Ending.STOPPED_IMPROVING
    assert outcome.elapsed < 1500.0  # far from the budget
    seconds = stored.elapsed_seconds - c.spent.baseline_wait
    assert RULE.should_stop(c.gain_seconds, c.gain_measured, seconds, c.since_best)
    # ... and soon after it first held: within a round of measurements
    assert c.since_best <= max(100, 2 * c.gain_measured) + 10
    # The last new best beyond noise is where the counters say the gain came.
    bests = [e for e in events if e.kind is EventKind.NEW_BEST]
    assert bests and bests[-1].counters.evaluated - bests[-1].counters.reused >= c.gain_measured
    text = status_text(stored)
    assert "stopped improving" in text or "stopped_improving" in text or "no new best" in text
    assert f"after {c.gain_measured} candidates" in text and "before the end" in text


def test_without_the_rule_the_search_runs_to_its_budget() -> None:
    outcome, stored, _ = _search(SearchConfig(max_seconds=300.0, confirm_best=False, auto_stop=False))
    assert ending(stored) in (Ending.BUDGET, Ending.EXHAUSTED)
    assert outcome.elapsed >= 250.0 or ending(stored) is Ending.EXHAUSTED


def test_n_candidates_in_a_row_replace_the_rule() -> None:
    _, stored, _ = _search(SearchConfig(max_seconds=3000.0, confirm_best=False, early_stop=7))
    assert ending(stored) is Ending.STOPPED_IMPROVING and stored.counters.since_best == 7
