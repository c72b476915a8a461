"""run_search over the simulated executor and the in-memory store: no exo, cc, ray or sql."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from schedsearch.core import EventKind, Phase, SearchConfig, SearchEvent, SearchStatus, Status, StrategyKind
from schedsearch.errors import SearchError
from schedsearch.search import loop, make_strategy, rounds, run_search
from schedsearch.store import InMemoryStore
from schedsearch.testing.fake_executor import FakeClock, FakeExecutor
from schedsearch.testing.fake_tree import FakeTree, fake_inherited, fake_root, fake_workload, fingerprint_of, label_of


def config(**kw) -> SearchConfig:
    kw.setdefault("max_seconds", None)
    return SearchConfig(**kw)


def search(cfg: SearchConfig, executor: FakeExecutor, store: InMemoryStore | None = None, **kw):
    store = store if store is not None else InMemoryStore()
    events: list[SearchEvent] = []
    if kw.get("search_id") is not None and "inherited" not in kw:  # a resume rebuilds the stored rows it builds
        kw["inherited"] = fake_inherited(store, kw["search_id"], cfg)
    outcome = run_search(fake_workload(), fake_root(), make_strategy(cfg), executor, store, cfg, events.append, **kw)
    return outcome, store, events


def measured(store: InMemoryStore, sid: int):
    return [r for r in store.candidates(sid) if r.status is not Status.PENDING]


def test_search_records_everything_and_counts_consistently() -> None:
    ex = FakeExecutor(FakeTree(failure_rate=0.2), shuffle_seed=3)
    outcome, store, events = search(config(max_candidates=30), ex)
    assert outcome.status is SearchStatus.COMPLETED
    c = outcome.counters
    assert c.evaluated == 30 == len(ex.evaluated)
    assert c.ok + c.failed == c.evaluated
    assert len(set(ex.evaluated)) == len(ex.evaluated)  # nothing measured twice
    rows = measured(store, outcome.search_id)
    assert len(rows) == 30
    assert sum(r.status is Status.OK for r in rows) == c.ok
    assert c.illegal == len(ex.expanded)  # the tree reports one illegal rewrite per expansion
    assert c.duplicates >= len(ex.expanded)  # and one identity duplicate per expansion
    # every rewrite tried is a duplicate, illegal, or a new recorded candidate (the root aside)
    assert c.generated - c.duplicates - c.illegal == len(store.candidates(outcome.search_id)) - 1
    # The root's round is asked for while the baseline is measured: an ``asked`` per round.
    asked = [e for e in events if e.kind is EventKind.ASKED]
    assert len(asked) == len(ex.expand_calls) >= 2
    root = next(r for r in store.candidates(outcome.search_id) if r.depth == 0)
    assert asked[0].message == f"round 1: expanding #{root.id}"
    kinds = [e.kind for e in events if e.kind is not EventKind.ASKED]
    assert kinds[:2] == [EventKind.STARTED, EventKind.BASELINE]
    assert kinds[-2:] == [EventKind.FINALISTS, EventKind.FINISHED]
    assert kinds.count(EventKind.EVALUATED) == 29  # the root is announced as BASELINE
    search_row = store.get_search(outcome.search_id)
    assert search_row.status is SearchStatus.COMPLETED
    assert search_row.counters == c
    assert search_row.best_candidate_id == outcome.best.id
    assert search_row.baseline_seconds == pytest.approx(1e-3)
    ok_rows = [r for r in rows if r.status is Status.OK]
    assert all(r.speedup == pytest.approx(1e-3 / r.seconds) for r in ok_rows)
    assert all(r.gflops == pytest.approx(fake_workload().flops / r.seconds / 1e9) for r in ok_rows)


def test_new_best_events_track_improvements_only() -> None:
    _, _, events = search(config(max_candidates=25), FakeExecutor())
    best_times = [e.record.seconds for e in events if e.kind is EventKind.NEW_BEST]
    assert best_times == sorted(best_times, reverse=True) and len(set(best_times)) == len(best_times)
    evaluated = [e.record.seconds for e in events if e.kind is EventKind.EVALUATED and e.record.seconds]
    assert best_times[-1] == min(evaluated)


def test_best_first_expands_the_fastest_unexpanded_node_each_round() -> None:
    tree = FakeTree(failure_rate=0.0)
    ex = FakeExecutor(tree)
    cfg = config(max_candidates=40, expand_batch=1)
    strategy = make_strategy(cfg)
    strategy._explore_every = 0  # pure greedy for this check
    store = InMemoryStore()
    run_search(fake_workload(), fake_root(), strategy, ex, store, cfg)
    sid = store.list_searches()[0].id
    rows = {r.fingerprint: r for r in store.candidates(sid)}
    # The root is expanded while the baseline is measured, before the strategy is asked.
    assert ex.expand_calls[0] == [fake_root().fingerprint] and ex.asked_after[0] == 0
    assert sum(call.count(fake_root().fingerprint) for call in ex.expand_calls) == 1  # and only then
    asked: list[str] = [fake_root().fingerprint]
    # Replay: when each parent was picked, it was the fastest ok, not yet picked node among
    # those measured by then (the pipeline asks while the previous round is measured).
    for (fp,), known in zip(ex.expand_calls[1:], ex.asked_after[1:], strict=True):
        pool = [rows[f] for f in ex.evaluated[:known]
                if rows[f].status is Status.OK and f not in asked and rows[f].depth < cfg.max_depth]
        assert rows[fp].seconds == min(r.seconds for r in pool)
        asked.append(fp)
    assert len(asked) >= 10


def rows_by_id(rows):
    return {r.id: r for r in rows.values()}


def test_same_seed_same_search_whatever_the_completion_order() -> None:
    a, store_a, _ = search(config(max_candidates=35, seed=5), ex_a := FakeExecutor(shuffle_seed=1))
    b, store_b, _ = search(config(max_candidates=35, seed=5), ex_b := FakeExecutor(shuffle_seed=2))
    assert ex_a.expand_calls == ex_b.expand_calls  # the same asks, round by round
    assert ex_a.expanded != ex_b.expanded and ex_a.evaluated != ex_b.evaluated  # completion order really differed
    # What was measured is the same; what was left pending at the end (expansions of the
    # next round that happened to finish before the budget did) may differ.
    ids_a = [(r.id, r.fingerprint) for r in measured(store_a, a.search_id)]
    ids_b = [(r.id, r.fingerprint) for r in measured(store_b, b.search_id)]
    assert ids_a == ids_b
    assert a.best.fingerprint == b.best.fingerprint


def test_a_streamed_round_starts_measuring_with_its_first_shard() -> None:
    """The root's expansion (nothing else to measure) comes back in shards: its first
    children are measured before the last shard is in, and the round ends up with what an
    unstreamed expansion gives: the same children, announced once, the root expanded."""
    def run(shards: int):
        clock = FakeClock(100.0)
        ex = FakeExecutor(FakeTree(failure_rate=0.0), clock=clock, eval_seconds=0.1, expand_seconds=3.0,
                          stream_shards=shards)
        outcome, store, events = search(config(max_candidates=25), ex, clock=clock)
        return outcome, store, events, ex

    outcome, store, events, ex = run(3)
    plain_outcome, plain_store, plain_events, plain_ex = run(1)
    root_fp = fake_root().fingerprint
    root_job = next(job for job, _ in ex.shards_sent)
    assert [final for job, final in ex.shards_sent if job == root_job] == [False, False, True]
    expanded = [e for e in events if e.kind is EventKind.EXPANDED and e.record.fingerprint == root_fp]
    plain_expanded = [e for e in plain_events if e.kind is EventKind.EXPANDED and e.record.fingerprint == root_fp]
    assert len(expanded) == 1 and expanded[0].message == plain_expanded[0].message
    first = min(r.measured_at for r in measured(store, outcome.search_id) if r.depth == 1)
    plain_first = min(r.measured_at for r in measured(plain_store, plain_outcome.search_id) if r.depth == 1)
    assert first < expanded[0].elapsed  # measuring began before the last shard came in
    assert first < plain_first - 0.9  # a shard sooner (the fake runs one job at a time)
    children = {r.fingerprint for r in store.candidates(outcome.search_id) if r.depth == 1}
    plain_children = {r.fingerprint for r in plain_store.candidates(plain_outcome.search_id) if r.depth == 1}
    assert children == plain_children
    root = next(r for r in store.candidates(outcome.search_id) if r.depth == 0)
    assert root.expanded
    c = outcome.counters
    assert c.generated - c.duplicates - c.illegal == len(store.candidates(outcome.search_id)) - 1


def test_while_shards_come_in_only_the_likely_winners_are_measured() -> None:
    """A streamed round with ordering keys releases children within STREAM_GATE of its best
    key so far; the rest wait until its last shard is in. Without keys, all go in order."""
    from collections import deque

    a, b, c = (dataclasses.replace(fake_root(), fingerprint=f) for f in "abc")
    gate = rounds.STREAM_GATE
    rnd = rounds.Round(1, [], expanding={7: None}, queue=deque([a, b, c]),
                       keys={"a": 0.0, "b": gate + 0.5, "c": gate - 0.1})
    assert rounds.next_child(rnd) is a
    assert rounds.next_child(rnd) is c
    assert rounds.next_child(rnd) is None and list(rnd.queue) == [b]
    rnd.expanding.clear()  # the last shard is in
    assert rounds.next_child(rnd) is b
    plain = rounds.Round(1, [], expanding={7: None}, queue=deque([b, a]))
    assert [rounds.next_child(plain), rounds.next_child(plain)] == [b, a]


def test_max_depth_is_never_expanded_past() -> None:
    ex = FakeExecutor(FakeTree(failure_rate=0.0))
    outcome, store, _ = search(config(max_depth=2, max_candidates=200), ex)
    rows = store.candidates(outcome.search_id)
    assert max(r.depth for r in rows) == 2
    depth_of = {r.fingerprint: r.depth for r in rows}
    assert all(depth_of[fp] < 2 for fp in ex.expanded)
    assert outcome.status is SearchStatus.COMPLETED
    # Exhaustion: every ok node above max depth was expanded and marked so.
    assert all(r.expanded for r in rows if r.depth < 2 and r.status is Status.OK)
    assert outcome.counters.evaluated < 200


def test_wall_time_budget_with_a_fake_clock() -> None:
    clock = FakeClock()
    ex = FakeExecutor(clock=clock, eval_seconds=1.0, expand_seconds=0.25)
    outcome, store, events = search(config(max_seconds=10.0), ex, clock=clock)
    assert outcome.status is SearchStatus.COMPLETED
    # The wait for the baseline (1 s here) is not counted; it stops a little early to leave
    # time for the finalists (whose fake re-measurement is instant).
    baseline = next(e for e in events if e.kind is EventKind.BASELINE).elapsed
    assert baseline == pytest.approx(1.0)
    assert 8.0 + baseline <= outcome.elapsed <= 10.0 + baseline + loop.POLL_SECONDS
    assert outcome.counters.evaluated <= 10
    assert store.get_search(outcome.search_id).elapsed_seconds == pytest.approx(outcome.elapsed)


def test_the_wait_for_a_slow_baseline_is_not_counted_in_the_time_budget() -> None:
    """An unscheduled kernel that takes 200 s to verify and time (a naive SGEMM 2048) leaves
    the search its whole budget after it, and the baseline's event says so."""
    clock = FakeClock()
    ex = FakeExecutor(clock=clock, eval_seconds=1.0, expand_seconds=0.25, root_seconds=200.0)
    outcome, _, events = search(config(max_seconds=30.0), ex, clock=clock)
    base = next(e for e in events if e.kind is EventKind.BASELINE)
    assert base.elapsed == pytest.approx(200.0) and "the budget does not count" in base.message
    assert base.budget_used == pytest.approx(0.0, abs=1e-6)
    assert outcome.counters.evaluated >= 20  # ~28 s of children after it
    assert 200.0 + 28.0 <= outcome.elapsed <= 230.0 + loop.POLL_SECONDS


def test_the_time_budget_counts_from_the_workers_start_and_keeps_the_seconds_before() -> None:
    """``started``: the command began 4 s before the search's clock (loading, the workers'
    start). The budget counts the search's own clock (elapsed, events, measured_at), which
    starts at zero with the workers ready, so the search gets all of it; the 4 s are kept."""
    clock = FakeClock()
    ex = FakeExecutor(clock=clock, eval_seconds=1.0, expand_seconds=0.25)
    outcome, store, events = search(config(max_seconds=10.0), ex, clock=clock, started=clock() - 4.0)
    assert outcome.status is SearchStatus.COMPLETED
    baseline = next(e for e in events if e.kind is EventKind.BASELINE).elapsed  # 1 s, not counted
    assert 8.0 + baseline <= outcome.elapsed <= 10.0 + baseline + loop.POLL_SECONDS
    assert outcome.counters.spent.starting == pytest.approx(4.0)
    assert events[0].kind is EventKind.STARTED and events[0].elapsed == pytest.approx(0.0, abs=1e-9)
    assert "after 4.0 s starting" in events[0].message
    assert all(e.budget_used == pytest.approx(e.elapsed - (baseline if e.elapsed >= baseline else 0.0))
               for e in events)
    stored = store.get_search(outcome.search_id)
    assert stored.counters.spent.starting == pytest.approx(4.0)
    assert max(r.measured_at for r in store.candidates(outcome.search_id) if r.measured_at is not None) <= 11.0 + 1e-9


def test_a_resume_keeps_its_own_start_outside_the_budget_it_adds() -> None:
    store = InMemoryStore()
    clock = FakeClock()
    one, _, _ = search(config(max_seconds=10.0), FakeExecutor(clock=clock, eval_seconds=1.0), store, clock=clock,
                       started=clock() - 1.0)
    extended = dataclasses.replace(config(), max_seconds=one.elapsed + 10.0)
    two, _, _ = search(extended, FakeExecutor(clock=clock, eval_seconds=1.0), store, clock=clock,
                       search_id=one.search_id, started=clock() - 3.0)
    assert two.counters.spent.starting == pytest.approx(4.0)  # both runs' starts, summed
    assert 8.0 <= two.elapsed - one.elapsed <= 10.0 + loop.POLL_SECONDS  # 10 s more of searching


@pytest.mark.parametrize("remeasure_seconds", [1.5, 60.0])
def test_the_time_budget_includes_the_finalists(remeasure_seconds: float) -> None:
    """The search leaves room for the side-by-side re-measurement; one that outlasts the
    budget anyway is abandoned for the search's own times, a few seconds after the budget."""
    clock = FakeClock()
    ex = FakeExecutor(clock=clock, eval_seconds=0.5, expand_seconds=0.25, remeasure_seconds=remeasure_seconds)
    outcome, _, events = search(config(max_seconds=20.0), ex, clock=clock)
    finalists = [e for e in events if e.kind is EventKind.FINALISTS]
    assert any(e.phase is Phase.REMEASURING for e in events)
    baseline = next(e for e in events if e.kind is EventKind.BASELINE).elapsed  # not counted
    assert outcome.elapsed <= baseline + 20.0 + loop.FINALIST_GRACE_SECONDS + loop.POLL_SECONDS
    if remeasure_seconds < 10:
        assert ex.remeasured and "side by side" in finalists[-1].message
    else:
        assert not ex.remeasured and ex.cancelled >= 1  # abandoned while it ran
        assert "outlasted the time budget" in finalists[-1].message
        assert outcome.best is not None and outcome.best_seconds == outcome.best.seconds


def test_stop_event_interrupts_and_keeps_results() -> None:
    stop = threading.Event()
    ex = FakeExecutor()
    ex.on_evaluate = lambda c: stop.set() if len(ex.evaluated) >= 7 else None
    outcome, store, events = search(config(max_candidates=100), ex, stop=stop)
    assert outcome.status is SearchStatus.INTERRUPTED
    assert outcome.counters.evaluated == 7 == len(measured(store, outcome.search_id))
    assert store.get_search(outcome.search_id).status is SearchStatus.INTERRUPTED
    assert not ex.remeasured, "an interrupted search stops at once: no re-measurement"
    assert outcome.best is not None and outcome.best.status is Status.OK
    assert events[-1].kind is EventKind.FINISHED
    assert any(e.kind is EventKind.STOPPING for e in events)  # the stop is acknowledged
    assert "not re-measured" in [e for e in events if e.kind is EventKind.FINALISTS][-1].message


def test_an_observer_that_raises_stops_the_search_and_gets_its_exception_back() -> None:
    """The observer's exception is the caller's own: it comes back unchanged, the search is
    interrupted (resumable) rather than failed, and what was measured is kept."""
    store = InMemoryStore()
    heard: list[SearchEvent] = []

    def observer(event: SearchEvent) -> None:
        heard.append(event)
        if sum(e.kind is EventKind.EVALUATED for e in heard) == 6:
            raise ValueError("the notebook's plot broke")

    with pytest.raises(ValueError, match="the notebook's plot broke"):
        run_search(fake_workload(), fake_root(), make_strategy(config(max_candidates=50)), FakeExecutor(), store,
                   config(max_candidates=50), observer)
    (row,) = store.list_searches()
    assert row.status is SearchStatus.INTERRUPTED
    assert "progress observer" in row.failure and "ValueError" in row.failure
    assert "internal error" not in row.failure
    assert len(measured(store, row.id)) >= 7  # the root and the six announced, all kept
    resumed, _, _ = search(config(max_candidates=50), FakeExecutor(), store, search_id=row.id)
    assert resumed.status is SearchStatus.COMPLETED


def test_root_failure_raises_and_marks_the_search_failed() -> None:
    ex = FakeExecutor(FakeTree(statuses={"": Status.BUILD_ERROR}))
    store = InMemoryStore()
    with pytest.raises(SearchError, match="build_error"):
        search(config(max_candidates=10), ex, store)
    (row,) = store.list_searches()
    assert row.status is SearchStatus.FAILED
    assert ex.expanded == []


def test_wrong_result_never_becomes_best_even_when_fastest() -> None:
    fp_wrong = fingerprint_of("m1")
    tree = FakeTree(moves=4, branching=3, failure_rate=0.0, times={"m1": 1e-7},
                    statuses={"m1": Status.WRONG_RESULT})
    ex = FakeExecutor(tree)
    outcome, store, events = search(config(max_depth=1, finalists=5), ex)
    assert fp_wrong in ex.evaluated
    assert outcome.best.fingerprint != fp_wrong and outcome.best.status is Status.OK
    assert all(fp_wrong not in call for call in ex.remeasured)
    assert all(e.best is None or e.best.fingerprint != fp_wrong for e in events)
    assert store.get_candidate(store.get_search(outcome.search_id).best_candidate_id).status is Status.OK


def test_finalists_are_remeasured_and_the_winner_comes_from_that() -> None:
    tree = FakeTree(moves=4, branching=3, failure_rate=0.0,
                    times={"": 1e-3, "m1": 0.5e-3, "m2": 0.6e-3, "m3": 0.9e-3},
                    remeasure_times={"": 1.1e-3, "m1": 0.8e-3, "m2": 0.55e-3, "m3": 0.9e-3})
    ex = FakeExecutor(tree)
    outcome, store, events = search(config(max_depth=1, finalists=2), ex)
    assert ex.remeasured == [[fingerprint_of(x) for x in ("", "m1", "m2")]]
    assert outcome.best.fingerprint == fingerprint_of("m2")
    assert outcome.best_seconds == pytest.approx(0.55e-3)
    assert outcome.best_speedup == pytest.approx(2.0)
    assert outcome.baseline_seconds == pytest.approx(1.1e-3)
    row = store.get_search(outcome.search_id)
    assert row.best_candidate_id == outcome.best.id
    assert (row.best_seconds, row.best_speedup) == (pytest.approx(0.55e-3), pytest.approx(2.0))
    (fin,) = [e for e in events if e.kind is EventKind.FINALISTS]
    assert [r.fingerprint for r in fin.top] == [fingerprint_of(x) for x in ("m2", "m1", "")]
    assert fin.best.fingerprint == fingerprint_of("m2")
    assert events[-1].best.seconds == pytest.approx(0.55e-3)  # FINISHED shows the side-by-side time
    assert events[-1].best.speedup == pytest.approx(2.0)
    # The side-by-side numbers overturned the search's own order, and the event says so: m1
    # was 0.83x m2 by the search's times and is 1.45x side by side (75% moved).
    ids = {r.fingerprint: r.id for r in store.candidates(outcome.search_id)}
    m1, m2 = ids[fingerprint_of("m1")], ids[fingerprint_of("m2")]
    assert f"#{m2} is the fastest side by side, #{m1} was by the search's own times" in fin.message
    assert "moved by up to 75%" in fin.message


class FinalistsTimeOut(FakeExecutor):
    """Side by side, the contenders named in ``timeouts`` (fingerprints) are not timed."""

    def __init__(self, tree: FakeTree, timeouts: set[str]) -> None:
        super().__init__(tree)
        self.timeouts = timeouts

    def _remeasure(self, candidates):
        measured = super()._remeasure(candidates)
        return [dataclasses.replace(m, status=Status.TIMEOUT, timing=None, error="timed out after 20 s\nmore")
                if m.fingerprint in self.timeouts else m for m in measured]


def test_the_root_never_wins_because_the_finalists_were_not_timed() -> None:
    tree = FakeTree(moves=4, branching=3, failure_rate=0.0,
                    times={"": 1e-3, "m1": 0.5e-3, "m2": 0.6e-3, "m3": 0.9e-3},
                    remeasure_times={"": 1.1e-3, "m1": 0.8e-3, "m2": 0.55e-3, "m3": 0.9e-3})
    outcome, store, events = search(config(max_depth=1, finalists=2),
                                    FinalistsTimeOut(tree, {fingerprint_of("m1"), fingerprint_of("m2")}))
    ids = {r.fingerprint: r.id for r in store.candidates(outcome.search_id)}
    assert outcome.best.fingerprint == fingerprint_of("m1")  # the search's own best stands
    assert outcome.best_seconds == pytest.approx(0.5e-3)
    (fin,) = [e for e in events if e.kind is EventKind.FINALISTS]
    m1, m2 = ids[fingerprint_of("m1")], ids[fingerprint_of("m2")]
    assert fin.message == (f"no finalist re-measured ok; not re-measured ok: #{m1} timeout (timed out after 20 s), "
                           f"#{m2} timeout (timed out after 20 s); keeping the search's best")
    # One of them timed: it wins side by side, and the event names the other.
    outcome, store, events = search(config(max_depth=1, finalists=2),
                                    FinalistsTimeOut(tree, {fingerprint_of("m1")}))
    assert outcome.best.fingerprint == fingerprint_of("m2")
    (fin,) = [e for e in events if e.kind is EventKind.FINALISTS]
    m1 = {r.fingerprint: r.id for r in store.candidates(outcome.search_id)}[fingerprint_of("m1")]
    assert fin.message.endswith(f"; not re-measured ok: #{m1} timeout (timed out after 20 s)")


def test_finalists_that_agree_with_the_search_get_no_drift_note() -> None:
    tree = FakeTree(moves=4, branching=3, failure_rate=0.0,
                    times={"": 1e-3, "m1": 0.5e-3, "m2": 0.6e-3, "m3": 0.9e-3},
                    remeasure_times={"": 1.02e-3, "m1": 0.51e-3, "m2": 0.62e-3, "m3": 0.9e-3})
    _, _, events = search(config(max_depth=1, finalists=2), FakeExecutor(tree))
    (fin,) = [e for e in events if e.kind is EventKind.FINALISTS]
    assert fin.message == "re-measured 3 side by side"


def _deep_best(remeasure_times: dict[str, float]):
    """A search whose fastest candidate, m1+m2+m2 (3 steps), descends from m1 and m1+m2, both
    measured within 1.2x of it, and whose side-by-side times are ``remeasure_times``."""
    times = {"": 1e-3, "m1": 0.52e-3, "m2": 0.9e-3, "m1+m1": 0.95e-3, "m1+m2": 0.55e-3, "m2+m2": 0.95e-3,
             "m1+m2+m2": 0.48e-3, "m1+m1+m2": 0.9e-3, "m1+m1+m1": 0.9e-3, "m2+m2+m2": 0.9e-3}
    tree = FakeTree(moves=3, branching=2, failure_rate=0.0, times=times, remeasure_times=remeasure_times)
    ex = FakeExecutor(tree)
    outcome, store, events = search(config(max_depth=3, finalists=1), ex)
    labels = {r.id: label_of(r.schedule) for r in store.candidates(outcome.search_id)}
    (fin,) = [e for e in events if e.kind is EventKind.FINALISTS]
    return outcome, ex, fin, labels


def test_the_shorter_schedule_wins_a_tie_side_by_side() -> None:
    # Side by side the deep best is 0.5% faster than its 1-step ancestor: a tie.
    outcome, ex, fin, labels = _deep_best({"": 1e-3, "m1": 0.5025e-3, "m1+m2": 0.51e-3, "m1+m2+m2": 0.5e-3})
    # Its near ancestors were re-measured with it (m1+m2's slower siblings were not).
    assert ex.remeasured == [[fingerprint_of(x) for x in ("", "m1+m2+m2", "m1", "m1+m2")]]
    assert labels[outcome.best.id] == "m1"
    assert outcome.best_seconds == pytest.approx(0.5025e-3)
    assert fin.best.id == outcome.best.id and fin.top[0].id == outcome.best.id
    ids = {v: k for k, v in labels.items()}
    assert (f"#{ids['m1']} (1 step) ties the fastest, #{ids['m1+m2+m2']} (3 steps), within noise side by side "
            f"(+0.5%): the shorter schedule wins") in fin.message


def test_a_deeper_schedule_wins_when_it_is_faster_beyond_noise() -> None:
    outcome, _, fin, labels = _deep_best({"": 1e-3, "m1": 0.53e-3, "m1+m2": 0.5e-3, "m1+m2+m2": 0.49e-3})
    # m1+m2 is 2% slower than the fastest and their ranges (+-1%) only touch: no tie.
    assert labels[outcome.best.id] == "m1+m2+m2"
    assert "shorter schedule" not in fin.message


def test_every_candidate_is_measured_once_and_a_new_best_counts_as_measured() -> None:
    tree = FakeTree(moves=6, branching=3, failure_rate=0.0)
    ex = FakeExecutor(tree)
    outcome, store, events = search(config(max_candidates=40), ex)
    assert len(ex.evaluated) == len(set(ex.evaluated)) >= 20
    bests = [e.record for e in events if e.kind is EventKind.NEW_BEST]
    assert len(bests) >= 2
    for b in bests:  # no second measurement stands in for the first
        assert b.seconds == pytest.approx(tree.seconds(label_of(b.schedule)))


def test_the_root_wins_when_nothing_beats_it_side_by_side() -> None:
    tree = FakeTree(moves=3, branching=2, failure_rate=0.0, times={"": 1e-3, "m1": 0.9e-3, "m2": 2e-3},
                    remeasure_times={"": 1e-3, "m1": 1.2e-3})
    outcome, _, _ = search(config(max_depth=1), FakeExecutor(tree))
    assert outcome.best.fingerprint == fingerprint_of("")
    assert outcome.best_speedup == pytest.approx(1.0)


def test_failed_remeasure_falls_back_to_the_search_measurements() -> None:
    tree = FakeTree(moves=3, branching=2, failure_rate=0.0, times={"": 1e-3, "m1": 0.5e-3, "m2": 2e-3})
    outcome, _, events = search(config(max_depth=1), FakeExecutor(tree, fail_remeasure=True))
    assert outcome.status is SearchStatus.COMPLETED
    assert outcome.best.fingerprint == fingerprint_of("m1")
    assert outcome.best_speedup == pytest.approx(2.0)
    assert any(e.kind is EventKind.FINALISTS and "failed" in e.message for e in events)


def test_resume_measures_nothing_twice_and_continues_the_budgets() -> None:
    store = InMemoryStore()
    stop = threading.Event()
    first = FakeExecutor(shuffle_seed=4)
    first.on_evaluate = lambda c: stop.set() if len(first.evaluated) >= 12 else None
    clock = FakeClock()
    one, _, _ = search(config(max_candidates=30), first, store, stop=stop, clock=clock)
    assert one.status is SearchStatus.INTERRUPTED
    pending_before = {r.fingerprint for r in store.candidates(one.search_id) if r.status is Status.PENDING}
    assert pending_before, "an interrupted round leaves pending candidates behind"

    second = FakeExecutor(shuffle_seed=4)
    two, _, _ = search(config(max_candidates=30), second, store, search_id=one.search_id)
    assert two.search_id == one.search_id and two.status is SearchStatus.COMPLETED
    assert not set(first.evaluated) & set(second.evaluated)
    assert pending_before <= set(second.evaluated)
    assert two.counters.evaluated == 30 == len(first.evaluated) + len(second.evaluated)
    rows = store.candidates(one.search_id)
    assert len({r.fingerprint for r in rows}) == len(rows)


def test_resume_after_a_crash_mid_round_reexpands_unfinished_parents() -> None:
    store = InMemoryStore()
    first = FakeExecutor()

    def crash(_c) -> None:
        if len(first.evaluated) == 9:
            raise KeyboardInterrupt

    first.on_evaluate = crash
    with pytest.raises(KeyboardInterrupt):
        search(config(max_candidates=40, expand_batch=2), first, store)
    sid = store.list_searches()[0].id
    assert store.get_search(sid).status is SearchStatus.INTERRUPTED
    unfinished = [r for r in store.candidates(sid) if r.status is Status.OK and not r.expanded]
    assert unfinished
    second = FakeExecutor()
    outcome, _, _ = search(config(max_candidates=40, expand_batch=2), second, store, search_id=sid)
    assert not set(first.evaluated[:8]) & set(second.evaluated)
    assert outcome.counters.evaluated == 40
    assert len(store.candidates(sid)) == len({r.fingerprint for r in store.candidates(sid)})


def test_resume_rejects_a_different_root() -> None:
    store = InMemoryStore()
    one, _, _ = search(config(max_candidates=5), FakeExecutor(), store)
    other_root = FakeTree().expand(fake_root()).children[0]
    cfg = config(max_candidates=10)
    with pytest.raises(SearchError, match="different code"):
        run_search(fake_workload(), other_root, make_strategy(cfg), FakeExecutor(), store, cfg, search_id=one.search_id)


@pytest.mark.parametrize("kind", list(StrategyKind))
def test_every_strategy_runs_to_exhaustion_on_a_small_tree(kind: StrategyKind) -> None:
    ex = FakeExecutor(FakeTree(moves=4, branching=2))
    outcome, store, _ = search(config(strategy=kind, max_depth=3, beam_width=2), ex)
    assert outcome.status is SearchStatus.COMPLETED
    depth_of = {r.fingerprint: r.depth for r in store.candidates(outcome.search_id)}
    depths = [depth_of[fp] for fp in ex.expanded]
    assert max(depths) == 2
    if kind is StrategyKind.BEAM:
        assert depths == sorted(depths)  # level by level
        assert all(depths.count(d) <= 2 for d in set(depths))


def test_children_of_expansions_finished_when_the_budget_ends_are_kept_for_resume() -> None:
    # Expansion is slow here: the budget runs out while the second round expands, one of its
    # two parents done. The work done is not thrown away: its children are recorded as
    # pending and a resume measures them; the unfinished expansion is abandoned at once.
    clock = FakeClock()
    store = InMemoryStore()
    first = FakeExecutor(clock=clock, eval_seconds=0.1, expand_seconds=1.0)
    one, _, _ = search(config(max_seconds=3.0, expand_batch=2), first, store, clock=clock)
    assert one.status is SearchStatus.COMPLETED
    assert [len(call) for call in first.expand_calls] == [1, 2] and len(first.expanded) == 2
    assert first.cancelled == 1 and one.elapsed <= 3.0 + loop.POLL_SECONDS
    pending = {r.fingerprint for r in store.candidates(one.search_id) if r.status is Status.PENDING}
    assert pending and not set(first.evaluated) & pending
    second = FakeExecutor()
    search(config(max_candidates=one.counters.evaluated + len(pending)), second, store, search_id=one.search_id)
    assert pending <= set(second.evaluated)


def test_the_next_expansion_overlaps_the_current_measurements() -> None:
    ex = FakeExecutor(FakeTree(failure_rate=0.0), eval_seconds=0.2, expand_seconds=0.5, clock=FakeClock())
    search(config(max_candidates=60), ex, clock=ex.clock)
    assert len(ex.expand_calls) >= 4
    # After the first rounds, every expansion is submitted while measurements are running.
    assert ex.overlapped >= len(ex.expand_calls) - 2


def test_observers_hear_at_least_once_a_second_during_a_long_expansion() -> None:
    clock = FakeClock()
    ex = FakeExecutor(clock=clock, eval_seconds=0.1, expand_seconds=30.0)
    _, _, events = search(config(max_seconds=20.0), ex, clock=clock)
    during = [e for e in events if e.phase is Phase.EXPANDING]
    assert during and all(e.kind is EventKind.TICK for e in during)
    assert "expanding #1" in during[0].activity
    times = [e.elapsed for e in events]
    assert max(b - a for a, b in zip(times, times[1:])) <= loop.TICK_SECONDS + loop.POLL_SECONDS
    assert events[-1].elapsed <= 20.0 + loop.POLL_SECONDS  # the expansion was abandoned at the budget


def test_a_stop_during_an_expansion_is_acknowledged_at_once() -> None:
    clock = FakeClock()
    stop = threading.Event()
    seen: list[SearchEvent] = []

    def observe(event: SearchEvent) -> None:
        seen.append(event)
        if event.phase is Phase.EXPANDING and event.elapsed > 3.0:
            stop.set()

    ex = FakeExecutor(clock=clock, eval_seconds=0.1, expand_seconds=600.0)
    outcome = run_search(fake_workload(), fake_root(), make_strategy(config()), ex, InMemoryStore(), config(),
                         observe, stop=stop, clock=clock)
    assert outcome.status is SearchStatus.INTERRUPTED
    stopping = next(e for e in seen if e.kind is EventKind.STOPPING)
    asked = next(e for e in seen if stop.is_set() and e.elapsed > 3.0)
    assert stopping.elapsed - asked.elapsed <= loop.POLL_SECONDS
    assert ex.cancelled == 1 and outcome.elapsed < 5.0


@pytest.mark.parametrize("base_seconds", [1.0, 1e-4])
def test_evaluations_carry_a_cutoff_of_four_times_the_best_so_far_but_never_under_the_floor(
        base_seconds: float) -> None:
    ex = FakeExecutor(FakeTree(base_seconds=base_seconds, failure_rate=0.0))
    outcome, store, _ = search(config(max_candidates=25), ex)
    root = fake_root().fingerprint
    assert ex.cutoffs[root] is None  # nothing is known before the root
    cutoffs = [ex.cutoffs[fp] for fp in ex.evaluated if fp != root]
    assert cutoffs and all(c is not None for c in cutoffs)
    # in submission order the best only improves, so the cutoff only falls, down to the floor
    assert cutoffs == sorted(cutoffs, reverse=True)
    best = min(r.seconds for r in measured(store, outcome.search_id) if r.seconds is not None)
    assert min(cutoffs) >= max(loop.CUTOFF_FACTOR * best, loop.CUTOFF_FLOOR_SECONDS)
    assert cutoffs[0] == pytest.approx(max(loop.CUTOFF_FACTOR * base_seconds, loop.CUTOFF_FLOOR_SECONDS))
    if base_seconds * loop.CUTOFF_FACTOR < loop.CUTOFF_FLOOR_SECONDS:
        assert set(cutoffs) == {loop.CUTOFF_FLOOR_SECONDS}
    else:
        assert min(cutoffs) < cutoffs[0]  # improvements lowered it


@pytest.mark.parametrize("budget", ["candidates", "seconds"])
def test_no_round_is_expanded_that_the_budget_could_not_measure(budget: str) -> None:
    # Near the end, the children already queued use up what is left of the budget: a round
    # expanded then would only take the CPU from them and be left pending.
    clock = FakeClock()
    ex = FakeExecutor(FakeTree(failure_rate=0.0), clock=clock, eval_seconds=1.0, expand_seconds=0.5)
    limit = {"max_candidates": 30} if budget == "candidates" else {"max_seconds": 30.0}
    outcome, store, _ = search(config(expand_batch=2, **limit), ex, clock=clock)
    rows = store.candidates(outcome.search_id)
    fp_of = {r.id: r.fingerprint for r in rows}
    parents_measured = {fp_of[r.parent_id] for r in rows if r.parent_id is not None and r.status is not Status.PENDING}
    assert len(ex.expand_calls) >= 5
    assert all(set(parents) & parents_measured for parents in ex.expand_calls)  # every round got measured
