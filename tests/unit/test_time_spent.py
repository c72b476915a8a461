"""Where a search's time went (``TimeSpent``): counted from what the jobs report, kept with
the search, and read back from searches stored before it was counted."""

from __future__ import annotations

import pytest

from schedsearch.core import Counters, SearchConfig, TimeSpent
from schedsearch.search import make_strategy, pipeline, run_search
from schedsearch.store import InMemoryStore
from schedsearch.testing.fake_executor import FakeClock, FakeExecutor
from schedsearch.testing.fake_tree import FakeTree, fake_root, fake_workload


def test_time_spent_adds_up_and_round_trips_through_json() -> None:
    spent = TimeSpent().plus(expanding=2.5, idle=1.0).plus(expanding=0.5, measuring=0.25)
    assert spent == TimeSpent(expanding=3.0, building=0.0, measuring=0.25, idle=1.0)
    counters = Counters(evaluated=3, spent=spent)
    assert Counters.from_json(counters.to_json()) == counters
    # A search stored before time was counted reads back as having counted none.
    old = {k: v for k, v in counters.to_json().items() if k != "spent"}
    assert Counters.from_json(old).spent == TimeSpent()


def _search(expand_seconds: float, eval_seconds: float):
    clock = FakeClock()
    ex = FakeExecutor(FakeTree(failure_rate=0.0), clock=clock, eval_seconds=eval_seconds,
                      expand_seconds=expand_seconds, report_seconds=True)
    cfg = SearchConfig(max_seconds=None, max_candidates=30)
    store = InMemoryStore()
    outcome = run_search(fake_workload(), fake_root(), make_strategy(cfg), ex, store, cfg, clock=clock)
    return outcome, ex, store


def test_a_search_counts_the_seconds_its_jobs_report_and_its_runner_waited() -> None:
    outcome, ex, store = _search(expand_seconds=3.0, eval_seconds=0.2)
    spent = outcome.counters.spent
    # Every expansion that came back reported 3 s, every evaluation (the baseline's too) 0.2 s.
    assert spent.expanding == pytest.approx(3.0 * len(ex.shards_sent))
    assert spent.measuring == pytest.approx(0.2 * len(ex.evaluated))
    assert spent.building == 0.0  # the fake builds nothing
    # The fake runs one job at a time: at least the root's expansion found nothing to
    # measure, and no second is both idle and spent measuring.
    assert spent.idle >= 3.0 - pipeline.POLL_SECONDS
    assert spent.idle + spent.measuring <= outcome.elapsed + pipeline.POLL_SECONDS
    # Kept with the search.
    assert store.get_search(outcome.search_id).counters.spent == spent


def test_idle_time_is_only_the_time_nothing_was_being_measured() -> None:
    slow, _, _ = _search(expand_seconds=3.0, eval_seconds=0.2)
    quick, _, _ = _search(expand_seconds=0.1, eval_seconds=0.2)
    # Same tree, same evaluations; only the expansions the runner waits for differ.
    assert quick.counters.evaluated == slow.counters.evaluated
    assert quick.counters.spent.idle < slow.counters.spent.idle - 3.0
    assert quick.counters.spent.idle <= 0.25 * quick.elapsed
