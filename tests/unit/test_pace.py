"""``search.pace``: how long a search's expansions take, how fast it measures, and whether a
round asked now comes in with time left to measure its first children."""

from __future__ import annotations

import dataclasses
import itertools
import threading
from collections import deque

import pytest

from schedsearch.core import CandidateRecord, EventKind, SearchConfig, Status
from schedsearch.search import make_strategy
from schedsearch.search.ledger import Ledger
from schedsearch.search.pace import RECENT, Pace, comes_in_too_late
from schedsearch.search.pipeline import Pipeline
from schedsearch.search.rounds import Round
from schedsearch.store import InMemoryStore
from schedsearch.testing.builders import make_schedule, make_timing
from schedsearch.testing.fake_executor import FakeClock, FakeExecutor
from schedsearch.testing.fake_tree import fake_candidate, fake_root, fake_workload


def test_nothing_is_expected_before_an_expansion_came_in() -> None:
    pace = Pace()
    assert pace.expected(False) is None and pace.round_seconds([False, True], expanders=2) is None
    pace.ask(1, at=3.0, second=False)
    assert pace.expected(False) is None  # asked, not in


def test_each_kind_is_expected_to_take_its_median_and_an_unseen_kind_the_slowest_seen() -> None:
    pace = Pace()
    for job, (asked, came) in enumerate([(0.0, 4.0), (10.0, 20.0), (12.0, 18.0)]):
        pace.ask(job, at=asked, second=False)
        pace.came_in(job, at=came)
    assert pace.expected(False) == 6.0  # median of 4, 10, 6
    assert pace.expected(True) == 10.0  # no second part seen yet: as slow as the slowest
    pace.ask(9, at=20.0, second=True)
    pace.came_in(9, at=45.0)
    assert pace.expected(True) == 25.0
    pace.came_in(9, at=60.0)  # a job counts once
    assert pace.second == [25.0]


def test_a_rounds_parents_are_shared_out_among_the_expanders() -> None:
    pace = Pace(first=[6.0], second=[20.0])
    assert pace.round_seconds([False], expanders=2) == 6.0
    assert pace.round_seconds([False, True], expanders=2) == 13.0
    assert pace.round_seconds([False, True, True], expanders=2) == 23.0
    assert pace.round_seconds([False, True], expanders=1) == 26.0


def test_the_pace_of_measuring_is_that_of_the_latest_measurements() -> None:
    pace = Pace()
    assert pace.seconds_per_measurement() == 0.0
    pace.measured(10.0)  # the first, after the workers started and the root was expanded
    for i in range(RECENT):
        pace.measured(20.0 + 0.5 * i)
    assert pace.seconds_per_measurement() == pytest.approx(0.5)


def test_a_round_is_too_late_when_its_first_children_could_not_be_measured_after_it() -> None:
    assert not comes_in_too_late(10.0, seconds_left=15.0, measure_first=4.0)
    assert comes_in_too_late(12.0, seconds_left=15.0, measure_first=4.0)
    assert comes_in_too_late(20.0, seconds_left=15.0, measure_first=0.0)


# --------------------------------------------------------------------------- in the pipeline


def _record(rid: int, seconds: float) -> CandidateRecord:
    schedule = make_schedule(f"n{rid}", 1)
    return CandidateRecord(id=rid, search_id=1, parent_id=None, depth=1, schedule=schedule,
                           fingerprint=f"fp{rid}", status=Status.OK, timing=make_timing(seconds))


def _pipeline(at: float, *, max_seconds: float | None = 60.0, queued: int = 10, expansions: Pace | None = None):
    """A pipeline ``at`` seconds into its search, two parents in its strategy's frontier,
    ``queued`` children waiting to be measured, and expansions so far as ``expansions`` says."""
    clock = FakeClock()
    cfg = SearchConfig(max_seconds=max_seconds, expand_batch=2)
    strategy = make_strategy(cfg)
    store, events = InMemoryStore(), []
    ledger = Ledger(fake_workload(), fake_root(), strategy, store, events.append, clock, None, activity=lambda: "")
    ledger.sid = 1
    ex = FakeExecutor(clock=clock)
    pipe = Pipeline(fake_workload(), fake_root(), strategy, ex, store, cfg, ledger, None, threading.Event(),
                    itertools.count(1))
    for rid, seconds in [(2, 1e-3), (3, 2e-3)]:
        strategy.tell(_record(rid, seconds))
        ledger.fp_of[rid] = f"fp{rid}"
    pipe.current = Round(1, [], queue=deque(fake_candidate(f"m{i}") for i in range(queued)))
    pipe.pace = expansions or Pace(first=[20.0, 22.0])
    clock.advance(at)
    return pipe, strategy, ex, events


def test_a_round_that_would_come_in_after_the_budget_is_held_back_while_children_wait() -> None:
    # 45 s into a 60-s search, two parents that take about 21 s: they would come in after the end.
    pipe, strategy, ex, events = _pipeline(45.0)
    assert pipe._start_expanding() is None
    assert ex.expand_calls == []  # nothing was sent to be expanded
    assert len(strategy.ask(5)) == 2  # both parents are still in the frontier
    said = [e.message for e in events if e.kind is EventKind.ASKED]
    assert len(said) == 1 and "round held back" in said[0] and "#2" in said[0] and "the 10 children queued" in said[0]
    for rid, seconds in [(2, 1e-3), (3, 2e-3)]:
        strategy.tell(_record(rid, seconds))
    assert pipe._start_expanding() is None  # still held back; said once
    assert len([e for e in events if e.kind is EventKind.ASKED]) == 1
    # Once no child is left waiting, a round is expanded after all: the cores would idle.
    pipe.current.queue.clear()
    assert pipe._start_expanding() is not None and len(ex.expand_calls) == 1


@pytest.mark.parametrize("case", ["time left", "no budget", "nothing queued", "nothing came in yet"])
def test_a_round_that_comes_in_with_time_to_measure_is_expanded(case: str) -> None:
    pipe, _, ex, events = _pipeline(
        10.0 if case == "time left" else 45.0,
        max_seconds=None if case == "no budget" else 60.0,
        queued=0 if case == "nothing queued" else 10,
        expansions=Pace() if case == "nothing came in yet" else None,
    )
    assert pipe._start_expanding() is not None
    assert len(ex.expand_calls) == 1
    assert not [e for e in events if "held back" in e.message]


def test_a_round_refused_for_room_is_asked_for_again_once_the_queue_fits() -> None:
    # 10 s in, 10 children queued, 2 measured: at 5 s a candidate they would outlast the 50 s left.
    pipe, strategy, ex, _ = _pipeline(10.0, expansions=Pace(first=[1.0]))
    pipe.ledger.counters = dataclasses.replace(pipe.ledger.counters, evaluated=2)
    assert pipe._start_expanding() is None and pipe.asker.refused
    pipe._ask_again()
    assert pipe.next is None and ex.expand_calls == []
    # Measured faster than that pace said: 20 in 10 s, and the queue now fits.
    pipe.ledger.counters = dataclasses.replace(pipe.ledger.counters, evaluated=20)
    pipe._ask_again()
    assert pipe.next is not None and len(ex.expand_calls) == 1 and not pipe.asker.refused
    pipe._ask_again()  # asked once
    assert len(ex.expand_calls) == 1


def test_the_wait_for_the_baseline_does_not_count_against_the_room_for_a_round() -> None:
    # A large naive nest: its baseline took 9 of the search's first 10 s; 4 measured since,
    # 30 queued: at 2.5 s each (10 s / 4) they would outlast the 59 s left, at 0.25 s not.
    pipe, _, ex, _ = _pipeline(10.0, queued=30, expansions=Pace(first=[1.0]))
    pipe.ledger.unbilled = 9.0
    pipe.ledger.counters = dataclasses.replace(pipe.ledger.counters, evaluated=4)
    assert pipe._start_expanding() is not None and len(ex.expand_calls) == 1
