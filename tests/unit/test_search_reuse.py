"""Measurement reuse across searches and warm-start seeds, over the simulated executor and
the in-memory store: no exo, cc, ray or sql."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from schedsearch.core import (
    BenchConfig,
    EventKind,
    ExpandOptions,
    MachineInfo,
    SearchConfig,
    SearchEvent,
    SearchStatus,
    Status,
)
from schedsearch.search import make_strategy, run_search
from schedsearch.store import InMemoryStore
from schedsearch.testing.fake_executor import FakeExecutor
from schedsearch.testing.fake_tree import (
    FakeTree,
    fake_candidate,
    fake_inherited,
    fake_root,
    fake_workload,
    fingerprint_of,
)

def _root_children_statuses() -> dict[str, Status]:
    """Every failure kind, given to the root's first children (the rest of the tree is ok)."""
    children = FakeTree(moves=7, branching=5).expand(fake_root()).children
    failures = (Status.TIMEOUT, Status.WRONG_RESULT, Status.RUN_ERROR, Status.BUILD_ERROR)
    return {c.schedule.steps[0].target: status for c, status in zip(children, failures, strict=False)}


#: Statuses the tree gives some labels (every label not named here is ok).
STATUSES = _root_children_statuses()


def config(**kw) -> SearchConfig:
    kw.setdefault("max_seconds", None)
    kw.setdefault("max_candidates", 20)
    return SearchConfig(**kw)


def tree(**kw) -> FakeTree:
    kw.setdefault("failure_rate", 0.0)
    kw.setdefault("statuses", STATUSES)
    kw.setdefault("moves", 7)
    kw.setdefault("branching", 5)
    return FakeTree(**kw)


def search(cfg: SearchConfig, executor: FakeExecutor, store: InMemoryStore, **kw):
    events: list[SearchEvent] = []
    if kw.get("search_id") is not None and "inherited" not in kw:  # a resume rebuilds the stored rows it builds
        kw["inherited"] = fake_inherited(store, kw["search_id"], cfg)
    outcome = run_search(fake_workload(), fake_root(), make_strategy(cfg), executor, store, cfg, events.append, **kw)
    return outcome, events


def measured(store: InMemoryStore, sid: int):
    return {r.fingerprint: r for r in store.candidates(sid) if r.status is not Status.PENDING}


def test_a_second_search_reuses_what_the_first_measured() -> None:
    store = InMemoryStore()
    first, _ = search(config(), FakeExecutor(tree()), store)
    before = measured(store, first.search_id)
    # Same machine and settings; this tree's unscheduled proc runs twice as long.
    second_ex = FakeExecutor(tree(times={"": 2e-3}))
    second, events = search(config(), second_ex, store)
    rows = measured(store, second.search_id)
    reused = {fp: r for fp, r in rows.items() if r.reused_candidate_id is not None}
    root_fp = fake_root().fingerprint
    assert reused and second.counters.reused == len(reused)
    assert second_ex.evaluated[0] == root_fp and root_fp not in reused  # the baseline is always measured
    for fp, r in reused.items():
        source = before[fp]
        assert (r.reused_search_id, r.reused_candidate_id) == (first.search_id, source.id)
        assert r.status is source.status and source.status.reusable
        assert r.timing == source.timing and r.error == source.error
        assert (r.build_seconds, r.run_seconds) == (0.0, 0.0)
        if r.status is Status.OK:
            assert r.speedup == pytest.approx(2e-3 / r.seconds)  # against this search's baseline
    # Nothing reusable was measured again; timeouts and run errors were.
    again = set(second_ex.evaluated) & set(before)
    assert all(not before[fp].status.reusable or fp == root_fp for fp in again)
    remeasured_failures = {before[fp].status for fp in again if fp != root_fp}
    assert remeasured_failures <= {Status.TIMEOUT, Status.RUN_ERROR}
    assert {Status.WRONG_RESULT, Status.BUILD_ERROR} <= {r.status for r in reused.values()}
    assert {Status.TIMEOUT, Status.RUN_ERROR} == remeasured_failures
    c = second.counters
    assert c.measured == c.evaluated - c.reused == len(second_ex.evaluated) == 20  # the budget counts measurements
    assert c.ok + c.failed == c.evaluated
    assert store.get_search(second.search_id).counters == c
    # Events say what was reused, and where from.
    summaries = [e.message for e in events if e.kind is EventKind.REUSED]
    assert summaries and all(f"from search {first.search_id}" in m for m in summaries)
    origins = [e for e in events if e.kind is EventKind.EVALUATED and e.record.reused_candidate_id is not None]
    assert len(origins) == len(reused)
    assert all(e.message == f"reused from search {first.search_id}, candidate {e.record.reused_candidate_id}"
               for e in origins)


def test_finalists_are_remeasured_even_when_reused() -> None:
    store = InMemoryStore()
    search(config(), FakeExecutor(tree()), store)
    ex = FakeExecutor(tree())
    outcome, _ = search(config(max_candidates=2), ex, store)  # the root and one child measured
    reused = {r.fingerprint for r in store.candidates(outcome.search_id) if r.reused_candidate_id is not None}
    assert outcome.counters.reused == len(reused) > 0
    assert reused & set(ex.remeasured[-1])


def test_only_original_measurements_are_reused() -> None:
    """A third search takes the original measurement, never the second search's copy."""
    store = InMemoryStore()
    first, _ = search(config(), FakeExecutor(tree()), store)
    search(config(), FakeExecutor(tree()), store)
    third, _ = search(config(), FakeExecutor(tree()), store)
    sources = {r.reused_search_id for r in measured(store, third.search_id).values() if r.reused_search_id}
    assert first.search_id in sources
    assert all(store.get_candidate(r.reused_candidate_id).reused_candidate_id is None
               for r in measured(store, third.search_id).values() if r.reused_candidate_id)


def _other_machine() -> FakeExecutor:
    ex = FakeExecutor(tree())
    ex._machine = MachineInfo(cpu_model="another cpu", cores=64, compiler="fakecc")
    return ex


@pytest.mark.parametrize(
    ("second_config", "executor"),
    [
        (config(remeasure=True), FakeExecutor(tree())),
        (config(), _other_machine()),
        (config(bench=BenchConfig(cflags=("-O2",))), FakeExecutor(tree())),
        (config(bench=BenchConfig(cc="clang")), FakeExecutor(tree())),
        (config(expand=ExpandOptions(target="avx2")), FakeExecutor(tree())),
    ],
    ids=["remeasure", "machine", "flags", "compiler", "target"],
)
def test_nothing_is_reused_when_measured_another_way(second_config: SearchConfig, executor: FakeExecutor) -> None:
    store = InMemoryStore()
    first, _ = search(config(), FakeExecutor(tree()), store)
    second, events = search(second_config, executor, store)
    assert second.counters.reused == 0
    assert all(r.reused_candidate_id is None for r in store.candidates(second.search_id))
    assert not [e for e in events if e.kind is EventKind.REUSED]
    # the same tree, the same search: what the first search measured is measured again
    assert set(executor.evaluated) == set(measured(store, first.search_id))


def test_a_resumed_search_reuses_too() -> None:
    store = InMemoryStore()
    search(config(max_candidates=30), FakeExecutor(tree()), store)
    stop = threading.Event()
    ex = FakeExecutor(tree(statuses={}))
    ex.on_evaluate = lambda c: stop.set()  # stops right after the baseline
    cut, _ = search(config(max_candidates=30, remeasure=True), ex, store, stop=stop)
    assert cut.status is SearchStatus.INTERRUPTED and cut.counters.evaluated == 1
    resumed_ex = FakeExecutor(tree(statuses={}))
    cfg = config(max_candidates=30)
    resumed = run_search(fake_workload(), fake_root(), make_strategy(cfg), resumed_ex, store, cfg,
                         search_id=cut.search_id, inherited=fake_inherited(store, cut.search_id, cfg))
    assert resumed.counters.reused > 0
    assert resumed.counters.measured == len(resumed_ex.evaluated) + 1 == 30


# --------------------------------------------------------------------------- warm-start seeds


def test_seeds_are_children_of_the_root_evaluated_right_after_the_baseline() -> None:
    store = InMemoryStore()
    ex = FakeExecutor(tree(statuses={}))
    seeds = [fake_candidate("m5", "m6"), fake_candidate("m6", "m5"),  # the same C: one is dropped
             fake_candidate("m0"),  # the root's C
             fake_candidate("m2", "m5", "m6")]
    outcome, events = search(config(max_candidates=30), ex, store, seeds=seeds)
    records = store.candidates(outcome.search_id)
    root = records[0]
    kept = records[1:3]
    assert [r.fingerprint for r in kept] == [fingerprint_of("m5+m6"), fingerprint_of("m2+m5+m6")]
    assert [(r.parent_id, r.depth) for r in kept] == [(root.id, 2), (root.id, 3)]
    assert [r.schedule for r in kept] == [seeds[0].schedule, seeds[3].schedule]
    assert ex.evaluated[:3] == [root.fingerprint, *(r.fingerprint for r in kept)]
    assert ex.expand_calls and outcome.counters.warm_started == 2
    kinds = [e.kind for e in events]
    assert kinds.index(EventKind.WARM_START) == kinds.index(EventKind.BASELINE) + 1
    assert "2 schedules from earlier searches" in events[kinds.index(EventKind.WARM_START)].message
    # counts still add up: every candidate is the root, a seed, or a new child of a rewrite
    c = outcome.counters
    assert c.generated - c.duplicates - c.illegal == len(records) - 1 - c.warm_started


def test_seeds_measured_before_are_reused_and_expanded_from() -> None:
    store = InMemoryStore()
    first, _ = search(config(max_candidates=30), FakeExecutor(tree(statuses={})), store)
    best = store.get_candidate(first.best.id)
    seed = dataclasses.replace(fake_candidate(*(s.target for s in best.schedule.steps)), parent=None, depth=0)
    ex = FakeExecutor(tree(statuses={}))
    second, _ = search(config(max_candidates=5), ex, store, seeds=[seed])
    record = store.candidate_by_fingerprint(second.search_id, seed.fingerprint)
    assert record.reused_search_id == first.search_id and seed.fingerprint not in ex.evaluated
    assert record.depth == len(best.schedule)
    assert seed.fingerprint in ex.expanded  # the best of before is where this search goes on from


def test_no_seeds_on_resume() -> None:
    store = InMemoryStore()
    stop = threading.Event()
    ex = FakeExecutor(tree(statuses={}))
    ex.on_evaluate = lambda c: stop.set()
    cut, _ = search(config(), ex, store, stop=stop)
    cfg = config()
    events: list[SearchEvent] = []
    resumed = run_search(fake_workload(), fake_root(), make_strategy(cfg), FakeExecutor(tree(statuses={})), store, cfg,
                         events.append, search_id=cut.search_id, seeds=[fake_candidate("m5", "m6")],
                         inherited=fake_inherited(store, cut.search_id, cfg))
    assert resumed.counters.warm_started == 0
    assert EventKind.WARM_START not in [e.kind for e in events]
