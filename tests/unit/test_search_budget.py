"""``search.budget``: the seconds and candidates a search has spent and has left, one formula each."""

from __future__ import annotations

import dataclasses

import pytest

from schedsearch.core import CandidateRecord, Counters, SearchConfig, Status
from schedsearch.search import make_strategy
from schedsearch.search.budget import Budget
from schedsearch.search.finalists import finalist_reserve
from schedsearch.search.ledger import Ledger
from schedsearch.store import InMemoryStore
from schedsearch.testing.builders import make_schedule, make_timing
from schedsearch.testing.fake_executor import FakeClock
from schedsearch.testing.fake_tree import fake_root, fake_workload


def _budget(*, head_start: float = 0.0, **kw: object) -> tuple[Budget, Ledger, FakeClock]:
    kw.setdefault("max_seconds", 60.0)
    cfg = SearchConfig(**kw)  # type: ignore[arg-type]
    clock = FakeClock()
    ledger = Ledger(fake_workload(), fake_root(), make_strategy(cfg), InMemoryStore(), lambda e: None, clock, None,
                    activity=lambda: "", head_start=head_start)
    return Budget(cfg, ledger), ledger, clock


def _record(rid: int, seconds: float, run_seconds: float, depth: int = 1) -> CandidateRecord:
    return CandidateRecord(id=rid, search_id=1, parent_id=None, depth=depth, schedule=make_schedule(f"n{rid}", depth),
                           fingerprint=f"fp{rid}", status=Status.OK, timing=make_timing(seconds),
                           run_seconds=run_seconds)


def _measured(ledger: Ledger, n: int, reused: int = 0) -> None:
    ledger.counters = dataclasses.replace(ledger.counters, evaluated=n + reused, reused=reused)


def test_the_seconds_spent_are_the_ledgers_neither_the_start_nor_the_baselines_wait_counted() -> None:
    budget, ledger, clock = _budget(head_start=3.0)
    clock.advance(10.0)
    ledger.unbilled = 4.0
    assert budget.spent() == ledger.budget_spent() == pytest.approx(6.0)


def test_new_work_keeps_the_finalists_reserve_and_the_models_pruning_reads_the_whole_budget() -> None:
    budget, ledger, clock = _budget(finalists=3)
    ledger.top = [_record(2, 1e-3, run_seconds=2.0), _record(3, 2e-3, run_seconds=2.0)]
    clock.advance(40.0)
    reserve = finalist_reserve(budget.config, ledger.top, ledger.root_record)
    assert reserve == budget.reserve() == pytest.approx(1.0 + 1.5 * 4.0)
    assert budget.seconds_left() == pytest.approx(60.0 - reserve - 40.0)
    assert budget.seconds_left_whole() == pytest.approx(20.0)
    assert not budget.spent_out()
    clock.advance(20.0 - reserve)  # the reserve is all that is left
    assert budget.seconds_left() == pytest.approx(0.0, abs=1e-9)
    assert budget.spent_out() and budget.seconds_left_whole() == pytest.approx(reserve)


def test_the_reserve_is_at_most_a_share_of_the_budget() -> None:
    budget, ledger, _ = _budget(max_seconds=10.0, finalists=3)
    ledger.top = [_record(2, 1.0, run_seconds=30.0)]
    assert budget.reserve() == pytest.approx(2.5)


def test_the_finalists_may_overrun_the_budget_by_the_grace_only() -> None:
    budget, _, clock = _budget(max_seconds=20.0)
    clock.advance(21.0)
    assert budget.spent_out() and not budget.overrun(3.0)
    clock.advance(2.0)
    assert budget.overrun(3.0)


def test_candidates_left_count_what_this_search_measured_and_those_in_flight() -> None:
    budget, ledger, _ = _budget(max_candidates=10)
    _measured(ledger, 4, reused=5)  # reused measurements cost nothing
    assert budget.candidates_left() == 6
    assert budget.candidates_left(in_flight=2) == 4
    assert budget.candidates_left(in_flight=8) == -2


def test_the_pace_is_spent_seconds_per_measured_candidate() -> None:
    budget, ledger, clock = _budget()
    clock.advance(12.0)
    assert budget.seconds_per_candidate() is None and not budget.outlasts(1000)
    _measured(ledger, 4)
    assert budget.seconds_per_candidate() == pytest.approx(3.0)
    assert not budget.outlasts(15)  # 45 s of the 48 left
    assert budget.outlasts(16)  # 48 s


def test_the_pace_does_not_count_the_wait_for_the_baseline() -> None:
    # A large naive nest: its baseline took 9 of the first 10 s; 4 measured since.
    budget, ledger, clock = _budget(max_seconds=40.0)
    clock.advance(10.0)
    ledger.unbilled = 9.0
    _measured(ledger, 4)
    assert budget.seconds_per_candidate() == pytest.approx(0.25)
    assert not budget.outlasts(19)  # about 5 s of the 39 left: a next round fits


def test_without_budgets_nothing_is_left_to_count_and_nothing_is_ever_spent() -> None:
    budget, ledger, clock = _budget(max_seconds=None, max_candidates=None)
    clock.advance(1e6)
    _measured(ledger, 10**6)
    assert budget.seconds_left() is None and budget.seconds_left_whole() is None
    assert budget.candidates_left(in_flight=3) is None
    assert not budget.spent_out() and not budget.overrun(0.0) and not budget.outlasts(10**9)
    assert budget.reserve() == 0.0


def test_the_answers_follow_the_books_as_they_move() -> None:
    budget, ledger, clock = _budget(max_candidates=3)
    ledger.counters = Counters()
    assert budget.candidates_left() == 3
    _measured(ledger, 3)
    assert budget.candidates_left() == 0
    clock.advance(61.0)
    assert budget.spent_out()
