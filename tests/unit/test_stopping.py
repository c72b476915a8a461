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
    outcome, stored, events = _search(SearchConfig(max_seconds=3000.0))
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
    outcome, stored, _ = _search(SearchConfig(max_seconds=300.0, auto_stop=False))
    assert ending(stored) in (Ending.BUDGET, Ending.EXHAUSTED)
    assert outcome.elapsed >= 250.0 or ending(stored) is Ending.EXHAUSTED


def test_n_candidates_in_a_row_replace_the_rule() -> None:
    _, stored, _ = _search(SearchConfig(max_seconds=3000.0, early_stop=7))
    assert ending(stored) is Ending.STOPPED_IMPROVING and stored.counters.since_best == 7


# ----------------------------------------------------------------- the cost model's half


def test_ahead_counts_the_untried_predicted_faster_than_the_best_beyond_the_error() -> None:
    from schedsearch.stopping import ahead

    assert ahead(-1.0, [-1.05, -1.2, -0.5, -2.0], error=0.1) == 2  # -1.2 and -2.0
    assert ahead(-1.0, [-1.05, -1.09], error=0.1) == 0  # within the model's error: a tie
    assert ahead(-1.0, [], error=0.0) == 0


def _model_search(model, max_seconds: float = 3000.0):
    from schedsearch.core import CostModelMode

    clock = FakeClock()
    store = InMemoryStore()
    tree = FakeTree(moves=9, features=True, failure_rate=0.0)
    cfg = SearchConfig(max_seconds=max_seconds, cost_model=CostModelMode.RANK)
    ex = FakeExecutor(tree, clock=clock, eval_seconds=0.5, expand_seconds=0.25)
    outcome = run_search(fake_workload(), fake_root(), make_strategy(cfg), ex, store, cfg, clock=clock,
                         cost_model=model(tree))
    return outcome, store.get_search(outcome.search_id)


def test_a_search_goes_on_while_the_model_predicts_an_untried_child_faster(monkeypatch) -> None:
    from schedsearch.search.untried import UntriedLook
    from schedsearch.testing.fake_model import FakeCostModel, oracle

    # With an exact model the search ends by the rule, nothing untried predicted faster.
    outcome, stored = _model_search(lambda tree: FakeCostModel(oracle(tree)))
    assert ending(stored) is Ending.STOPPED_IMPROVING and stored.counters.untried_ahead == 0
    # While the model's look finds an untried child ahead, the search goes on: here to its budget.
    looks = []
    monkeypatch.setattr(UntriedLook, "count", lambda self, rounds: looks.append(rounds) or 2)
    longer, stored = _model_search(lambda tree: FakeCostModel(oracle(tree)), max_seconds=400.0)
    assert looks and longer.elapsed > outcome.elapsed
    assert ending(stored) in (Ending.BUDGET, Ending.EXHAUSTED) and stored.counters.untried_ahead == 2
    assert "the cost model still predicted 2 untried candidates faster" in status_text(stored)


class _Ledger:
    def __init__(self, best, candidates) -> None:
        self.top, self._candidates, self.now = [best], candidates, 0.0

    def search_seconds(self) -> float:
        return self.now

    def candidate(self, record):
        return self._candidates[record.fingerprint]


def test_the_look_predicts_the_best_and_the_untried_with_one_model_and_its_error() -> None:
    from collections import deque
    from types import SimpleNamespace

    from schedsearch.core import FeatureVector
    from schedsearch.search.guidance import ERROR_PAIRS, Guidance
    from schedsearch.search.untried import LOOK_SECONDS, UntriedLook
    from schedsearch.testing.fake_model import FakeCostModel

    def cand(name: str, value: float):
        return SimpleNamespace(fingerprint=name, features=FeatureVector("test", (value,)))

    # The model is biased (everything predicted 0.5 faster than its value) and off by 0.1.
    guide = Guidance(FakeCostModel(lambda f: f.values[0] - 0.5), seed=0, prune=False)
    best = cand("best", -1.0)
    ledger = _Ledger(SimpleNamespace(fingerprint="best"), {"best": best})
    look = UntriedLook(guide, ledger)
    rounds = [SimpleNamespace(queue=deque([cand("a", -1.05), cand("b", -1.3), cand("c", -0.2)])), None]
    assert look.count(rounds) == 0  # no typical error known yet: the model has not shown it
    ledger.now += LOOK_SECONDS
    timing = SimpleNamespace(median=1.0)
    guide._scored.extend((0.0, 0.1, timing) for _ in range(ERROR_PAIRS))
    assert look.count(rounds) == 1  # b: 0.3 ahead of the best, beyond the error 0.1; a within it
    rounds[0].queue.clear()
    assert look.count(rounds) == 1  # looked at most every LOOK_SECONDS
    ledger.now += LOOK_SECONDS
    assert look.count(rounds) == 0
    assert UntriedLook(None, ledger).count(rounds) == 0  # no model: the first half decides alone
