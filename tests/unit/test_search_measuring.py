"""``search.measuring``: which child is measured next, how many at once, and with which cutoff."""

from __future__ import annotations

import dataclasses
import itertools
from collections import deque

import pytest

from schedsearch.core import CandidateRecord, Job, SearchConfig, Status
from schedsearch.search import make_strategy
from schedsearch.search.budget import Budget
from schedsearch.search.ledger import Ledger
from schedsearch.search.measuring import CUTOFF_FACTOR, CUTOFF_FLOOR_SECONDS, Measuring
from schedsearch.search.rounds import STREAM_GATE, Round
from schedsearch.store import InMemoryStore
from schedsearch.testing.builders import make_schedule, make_timing
from schedsearch.testing.fake_executor import FakeClock
from schedsearch.testing.fake_tree import fake_candidate, fake_root, fake_workload


class Submitted:
    """An executor stand-in that keeps the jobs it is given."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.jobs: list[Job] = []

    def submit(self, workload, reference, jobs) -> None:  # noqa: ANN001 - the Executor protocol's
        self.jobs.extend(jobs)


def _measuring(workers: int = 1, best: float | None = None, **kw: object) -> tuple[Measuring, Submitted, Ledger]:
    kw.setdefault("max_seconds", None)
    cfg = SearchConfig(**kw)  # type: ignore[arg-type]
    strategy = make_strategy(cfg)
    ledger = Ledger(fake_workload(), fake_root(), strategy, InMemoryStore(), lambda e: None, FakeClock(), None,
                    activity=lambda: "")
    if best is not None:
        ledger.top = [CandidateRecord(id=2, search_id=1, parent_id=None, depth=1, schedule=make_schedule("b", 1),
                                      fingerprint="b", status=Status.OK, timing=make_timing(best))]
    ex = Submitted(workers)
    measuring = Measuring(fake_workload(), fake_root(), strategy, ex, cfg, ledger, Budget(cfg, ledger), None,  # type: ignore[arg-type]
                          itertools.count(1))
    return measuring, ex, ledger


def test_on_a_cluster_two_evaluations_per_cpu_are_in_flight() -> None:
    # Two expanders on a cluster of five CPUs: every CPU gets builds, not the expanders' count.
    measuring, ex, _ = _measuring(workers=2)
    ex.slots = 5  # type: ignore[attr-defined]
    again = Measuring(measuring.workload, measuring.root, measuring.strategy, ex, measuring.config,  # type: ignore[arg-type]
                      measuring.ledger, measuring.budget, None, itertools.count(1))
    assert (again.workers, again.in_flight_cap) == (2, 10)
    ex.slots = 1  # type: ignore[attr-defined]  # fewer CPUs than expanders: two per expander still
    assert Measuring(measuring.workload, measuring.root, measuring.strategy, ex, measuring.config,  # type: ignore[arg-type]
                     measuring.ledger, measuring.budget, None, itertools.count(1)).in_flight_cap == 4


def _round(n: int, keys: list[float] | None = None, **kw: object) -> Round:
    children = [fake_candidate(f"m{i}") for i in range(n)]
    rnd = Round(1, [], queue=deque(children), total=n, **kw)  # type: ignore[arg-type]
    if keys is not None:
        rnd.keys = {c.fingerprint: k for c, k in zip(children, keys, strict=True)}
        rnd.ranked = True
    return rnd


def test_at_most_two_evaluations_per_worker_are_in_flight_in_queue_order() -> None:
    measuring, ex, _ = _measuring(workers=3)
    rnd = _round(10)
    queued = list(rnd.queue)
    measuring.fill(rnd, None)
    assert measuring.in_flight_cap == 6 and len(ex.jobs) == 6 and len(rnd.measuring) == 6
    assert [job.candidates[0] for job in ex.jobs] == queued[:6]
    assert [rnd.place[c.fingerprint] for c in queued[:6]] == list(range(6))
    measuring.fill(rnd, None)  # full: nothing more
    assert len(ex.jobs) == 6
    rnd.measuring.pop(ex.jobs[0].id)
    measuring.fill(rnd, None)
    assert len(ex.jobs) == 7 and ex.jobs[-1].candidates[0] is queued[6]


def test_nothing_is_submitted_beyond_the_candidate_budget_counting_those_in_flight() -> None:
    measuring, ex, ledger = _measuring(workers=4, max_candidates=5)
    ledger.counters = dataclasses.replace(ledger.counters, evaluated=2)
    rnd = _round(10)
    measuring.fill(rnd, None)
    assert len(ex.jobs) == 3 and len(rnd.queue) == 7


def test_no_cutoff_before_a_best_and_then_a_multiple_of_it() -> None:
    measuring, _, _ = _measuring()
    assert measuring.cutoff() is None
    measuring, ex, _ = _measuring(best=1.0)
    assert measuring.cutoff() == pytest.approx(CUTOFF_FACTOR * 1.0)
    fast, _, _ = _measuring(best=1e-6)
    assert fast.cutoff() == CUTOFF_FLOOR_SECONDS  # a cold first call may look that slow
    rnd = _round(1)
    measuring.fill(rnd, None)
    job = ex.jobs[0]
    assert job.cutoff == measuring.cutoff()


def test_a_gated_round_lets_only_its_likely_winners_go_and_none_once_shut() -> None:
    measuring, ex, _ = _measuring(workers=4)
    rnd = _round(4, keys=[0.0, STREAM_GATE + 1.0, 0.1, STREAM_GATE + 2.0], ask_after=1)
    nxt = _round(0, expanding={99: None})
    assert measuring.merging(rnd) and measuring.gated(rnd, nxt)
    measuring.fill(rnd, nxt)
    assert [job.candidates[0].fingerprint for job in ex.jobs] == [c.fingerprint for c in (
        fake_candidate("m0"), fake_candidate("m2"))]
    assert len(rnd.queue) == 2  # the also-rans wait for the merge
    shut = _round(3, keys=[0.0, 0.0, 0.0], ask_after=1, shut=True)
    measuring.fill(shut, nxt)
    assert len(shut.queue) == 3


def test_a_round_is_not_gated_without_predictions_or_before_its_early_asks_children() -> None:
    measuring, _, _ = _measuring()
    nxt = _round(0, expanding={99: None})
    assert not measuring.gated(_round(3), nxt)  # proposal order: not merging
    assert not measuring.gated(_round(3, keys=[0.0, 1.0, 2.0], open_until=2), nxt)  # nothing placed yet
    assert not measuring.gated(_round(3, keys=[0.0, 1.0, 2.0]), None)  # no ask pending, nothing expanded


def test_a_leading_model_measures_a_built_also_ran_while_the_runner_would_idle() -> None:
    measuring, ex, _ = _measuring(model_leads=True)
    rnd = _round(3, keys=[0.0, STREAM_GATE + 1.0, STREAM_GATE + 2.0], shut=True)
    rnd.queue[2] = dataclasses.replace(rnd.queue[2], built=True)
    built = rnd.queue[2]
    nxt = _round(0, expanding={99: None})
    assert measuring.runner_idle(rnd, nxt)
    measuring.fill(rnd, nxt)
    assert [job.candidates[0] for job in ex.jobs] == [built]  # one at a time: the runner is busy now
    assert not measuring.runner_idle(rnd, nxt)
    nxt.expanding.clear()  # the next round is in: the merge comes, not the also-rans
    rnd.measuring.clear()
    assert not measuring.runner_idle(rnd, nxt)


def test_without_a_model_the_order_is_the_queue_then_the_new_children() -> None:
    measuring, _, _ = _measuring()
    queued, fresh = [fake_candidate("q")], [fake_candidate("f1"), fake_candidate("f2")]
    seen = {c.fingerprint for c in queued + fresh}
    assert measuring.order(fresh, queued, seen) == ([*queued, *fresh], {})
    assert len(seen) == 3
