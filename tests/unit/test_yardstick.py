"""The yardstick: candidates timed beside a fast kernel and put on one scale (no exo, cc or ray)."""

from __future__ import annotations

import statistics

import pytest

from schedsearch.core import CandidateRecord, Measurement, Paired, Schedule, SearchConfig, Status, Timing
from schedsearch.search import make_strategy, run_search
from schedsearch.search.yardstick import BORROW_WINDOW, STEP, Yardsticks
from schedsearch.store import InMemoryStore
from schedsearch.testing.fake_executor import FakeExecutor
from schedsearch.testing.fake_tree import FakeTree, fake_candidate, fake_inherited, fake_root, fake_workload, label_of


def timing(t: float) -> Timing:
    return Timing(median=t, min=t * 0.9, q1=t * 0.95, q3=t * 1.05, samples=(t * 0.9, t, t * 1.05))


def sampled(xs: tuple[float, ...]) -> Timing:
    return Timing(median=statistics.median(xs), min=min(xs), q1=min(xs), q3=max(xs), samples=xs)


def record(fp: str, seconds: float | None, status: Status = Status.OK) -> CandidateRecord:
    return CandidateRecord(id=1, search_id=1, parent_id=None, depth=1, schedule=Schedule(), fingerprint=fp,
                           status=status, timing=timing(seconds) if seconds is not None else None)


def test_a_measurement_beside_a_yardstick_is_put_on_its_scale() -> None:
    ys = Yardsticks("root")
    fast = fake_candidate("m1")
    assert ys.consider(record(fast.fingerprint, 2e-3), fast, baseline=10e-3)
    # The machine ran at half speed: the yardstick took 4 ms instead of its 2 ms.
    m = Measurement("x", Status.OK, timing(6e-3), paired=Paired(fast.fingerprint, timing(4e-3)))
    placed = ys.place(m)
    assert placed.seconds == pytest.approx(3e-3)
    assert placed.timing.samples == pytest.approx((2.7e-3, 3e-3, 3.15e-3))
    assert placed.paired.seconds == 2e-3 and placed.paired.factor == pytest.approx(0.5)
    # What was measured can be recovered: measured = placed / factor.
    assert placed.seconds / placed.paired.factor == pytest.approx(6e-3)
    assert ys.place(placed) == placed  # placed once only


def test_measurements_alone_or_beside_an_unknown_kernel_stay_as_measured() -> None:
    ys = Yardsticks("root")
    alone = Measurement("x", Status.OK, timing(6e-3))
    assert ys.place(alone) == alone
    stranger = Measurement("x", Status.OK, timing(6e-3), paired=Paired("elsewhere", timing(4e-3)))
    assert ys.place(stranger) == stranger


def test_a_disturbance_in_some_rounds_does_not_move_the_time_on_the_scale() -> None:
    # A run seen in a search: the yardstick (2.45 ms) and the candidate were slowed in
    # different rounds. The ratio of the medians said 0.70 (a 1.70 ms false best); round by
    # round the two took the same time.
    ys = Yardsticks("root")
    fast = fake_candidate("m1")
    assert ys.consider(record(fast.fingerprint, 2.45e-3), fast, baseline=0.3)
    cand = (2.53e-3, 2.73e-3, 2.56e-3, 5.02e-3, 4.21e-3, 5.53e-3, 2.93e-3)
    yard = (2.53e-3, 2.45e-3, 4.20e-3, 7.14e-3, 8.71e-3, 5.49e-3, 2.58e-3)
    m = Measurement("x", Status.OK, sampled(cand), paired=Paired(fast.fingerprint, sampled(yard)))
    placed = ys.place(m)
    assert placed.seconds == pytest.approx(2.45e-3 * statistics.median(c / y for c, y in zip(cand, yard)))
    assert placed.seconds == pytest.approx(2.45e-3, rel=0.02)
    assert placed.seconds / placed.paired.factor == pytest.approx(m.seconds)  # what was measured
    # Not timed round for round (another count of samples): the ratio of the medians.
    odd = Measurement("y", Status.OK, sampled(cand[:3]), paired=Paired(fast.fingerprint, sampled(yard)))
    assert ys.place(odd).seconds == pytest.approx(2.45e-3 * statistics.median(cand[:3]) / statistics.median(yard))


def test_an_also_ran_whose_yardstick_was_spared_borrows_the_median_of_the_latest_factors() -> None:
    """A spared pairing (the yardstick not run) comes only from an older database; one not yet
    placed is still put on the scale."""
    ys = Yardsticks("root")
    fast = fake_candidate("m1")
    assert ys.consider(record(fast.fingerprint, 2e-3), fast, baseline=10e-3)
    spared = Measurement("slow", Status.OK, timing(12e-3), paired=Paired(fast.fingerprint, None))
    # Before any pairing with this yardstick there is no factor to borrow: timed alone.
    assert ys.place(spared) == Measurement("slow", Status.OK, timing(12e-3))
    # Pairings with factors 0.5, 0.8, 0.5 and - the machine 25% slower for one run - 0.4.
    for i, yard in enumerate((4e-3, 2.5e-3, 4e-3, 5e-3)):
        ys.place(Measurement(f"x{i}", Status.OK, timing(6e-3), paired=Paired(fast.fingerprint, timing(yard))))
    placed = ys.place(spared)
    assert placed.paired == Paired(fast.fingerprint, None, 2e-3, scaled_by=pytest.approx(0.5)) and placed.paired.spared
    assert placed.seconds == pytest.approx(6e-3)  # the median factor, not the last one (4.8 ms)
    assert placed.seconds / placed.paired.factor == pytest.approx(12e-3)  # what was measured
    assert ys.place(placed) == placed
    # The window follows a drifting host: after BORROW_WINDOW pairings at 0.25, that is the factor.
    for i in range(BORROW_WINDOW):
        ys.place(Measurement(f"z{i}", Status.OK, timing(6e-3), paired=Paired(fast.fingerprint, timing(8e-3))))
    assert ys.place(spared).seconds == pytest.approx(3e-3)
    # Spared beside a kernel that was never this search's yardstick: nothing to borrow.
    stranger = Measurement("s", Status.OK, timing(7e-3), paired=Paired("elsewhere", None))
    assert ys.place(stranger).paired is None and ys.place(stranger).seconds == 7e-3


def test_the_yardstick_changes_only_for_a_kernel_step_times_faster_and_never_to_the_root() -> None:
    ys = Yardsticks("root")
    root, a, b, c = fake_root(), fake_candidate("m1"), fake_candidate("m2"), fake_candidate("m3")
    assert not ys.consider(record("root", 1e-3), root, baseline=1e-3)  # too slow to time beside everything
    assert not ys.consider(record(a.fingerprint, 1e-3 / STEP * 1.01), a, baseline=1e-3)
    assert not ys.consider(record(a.fingerprint, None, Status.WRONG_RESULT), a, baseline=1e-3)
    assert not ys.consider(record(a.fingerprint, 0.5e-3), a, baseline=None)  # no baseline: no bar yet
    assert ys.consider(record(a.fingerprint, 0.5e-3), a, baseline=1e-3)
    assert ys.current == a and ys.seconds == 0.5e-3
    assert not ys.consider(record(b.fingerprint, 0.4e-3), b, baseline=1e-3)  # not STEP times faster
    assert ys.consider(record(c.fingerprint, 0.3e-3), c, baseline=1e-3)
    assert ys.current == c and set(ys.scales) == {a.fingerprint, c.fingerprint}


def _search(drift, yardstick: bool):
    tree = FakeTree(failure_rate=0.0, moves=8, branching=4)
    ex = FakeExecutor(tree, drift=drift)
    cfg = SearchConfig(confirm_best=False, max_seconds=None, max_candidates=60, yardstick=yardstick)
    store = InMemoryStore()
    outcome = run_search(fake_workload(), fake_root(), make_strategy(cfg), ex, store, cfg)
    rows = [r for r in store.candidates(outcome.search_id) if r.status is Status.OK]
    return tree, ex, rows


def _slow_then_fast(n: int) -> float:
    """A host whose speed swings by 1.6x every few measurements."""
    return 1.6 if (n // 3) % 2 else 1.0


def test_on_a_drifting_host_times_beside_the_yardstick_keep_the_true_order() -> None:
    tree, ex, rows = _search(_slow_then_fast, yardstick=True)
    paired = [r for r in rows if r.paired is not None]
    assert len(paired) >= 20 and all(ex.yardsticks[r.fingerprint] == r.paired.fingerprint for r in paired)
    # Every paired time is the true time times one constant: the drift cancelled out.
    ratios = [r.seconds / tree.seconds(label_of(r.schedule)) for r in paired]
    assert max(ratios) / min(ratios) == pytest.approx(1.0)
    # Measured alone, the same search's times carry the drift.
    tree, ex, rows = _search(_slow_then_fast, yardstick=False)
    assert all(r.paired is None for r in rows) and set(ex.yardsticks.values()) == {None}
    ratios = [r.seconds / tree.seconds(label_of(r.schedule)) for r in rows]
    assert max(ratios) / min(ratios) == pytest.approx(1.6)


def test_the_yardstick_follows_the_best_and_is_never_the_root() -> None:
    _, ex, rows = _search(lambda n: 1.0, yardstick=True)
    named = [fp for fp in ex.yardsticks.values() if fp is not None]
    assert named and fake_root().fingerprint not in named
    best = min(rows, key=lambda r: r.seconds)
    yard_times = {r.fingerprint: r.seconds for r in rows if r.fingerprint in set(named)}
    # Each yardstick was the best when it was chosen: the last is within STEP of the best found.
    assert min(yard_times.values()) <= best.seconds * STEP


def test_a_first_best_shorter_than_a_sample_is_the_yardstick_without_the_step() -> None:
    ys = Yardsticks("root", short=5e-3)
    a, b, c = fake_candidate("m1"), fake_candidate("m2"), fake_candidate("m3")
    assert ys.consider(record(a.fingerprint, 0.9e-3), a, baseline=1e-3)  # 1.1x faster, but short
    assert ys.current == a and ys.seconds == 0.9e-3
    assert not ys.consider(record(b.fingerprint, 0.7e-3), b, baseline=1e-3)  # the next one: STEP again
    slow = Yardsticks("root", short=5e-3)
    assert not slow.consider(record(c.fingerprint, 9e-3), c, baseline=10e-3)  # longer than a sample
    assert not slow.consider(record(c.fingerprint, 0.9e-3), c, baseline=None)  # no baseline: no bar yet
    assert not Yardsticks("root").consider(record(a.fingerprint, 0.9e-3), a, baseline=1e-3)  # short off


@pytest.mark.parametrize("base", [1e-3, 20e-3])
def test_a_search_of_kernels_shorter_than_a_sample_times_beside_its_first_best(base: float) -> None:
    """Every first-round kernel is at least 0.7x the root (``FakeTree``), never STEP times
    faster: one is a yardstick only when a call of it is shorter than a sample (5 ms)."""
    tree = FakeTree(failure_rate=0.0, moves=8, branching=4, base_seconds=base)
    ex = FakeExecutor(tree, drift=lambda n: 1.0)
    cfg = SearchConfig(confirm_best=False, max_seconds=None, max_candidates=60)
    store = InMemoryStore()
    outcome = run_search(fake_workload(), fake_root(), make_strategy(cfg), ex, store, cfg)
    times = {r.fingerprint: r.seconds for r in store.candidates(outcome.search_id) if r.status is Status.OK}
    named = {fp for fp in ex.yardsticks.values() if fp is not None}
    assert named
    first_round = {fp for fp in named if times[fp] > base / STEP}
    if base < cfg.bench.min_sample_seconds:
        assert first_round and all(times[fp] >= 0.7 * base for fp in first_round)
    else:
        assert not first_round


def test_a_resumed_search_keeps_timing_on_the_same_scale() -> None:
    tree = FakeTree(failure_rate=0.0, moves=8, branching=4)
    store = InMemoryStore()
    cfg = SearchConfig(confirm_best=False, max_seconds=None, max_candidates=30)
    first = FakeExecutor(tree, drift=lambda n: 1.0)
    one = run_search(fake_workload(), fake_root(), make_strategy(cfg), first, store, cfg)
    # The second run's machine is 1.6x slower throughout: the yardstick sees it too.
    second = FakeExecutor(tree, drift=lambda n: 1.6)
    more = SearchConfig(confirm_best=False, max_seconds=None, max_candidates=60)
    run_search(fake_workload(), fake_root(), make_strategy(more), second, store, more, search_id=one.search_id,
               inherited=fake_inherited(store, one.search_id, more))
    later = [r for r in store.candidates(one.search_id) if r.fingerprint in second.yardsticks]
    assert len(later) >= 20 and all(second.yardsticks[r.fingerprint] is not None for r in later)
    ratios = [r.seconds / tree.seconds(label_of(r.schedule)) for r in store.candidates(one.search_id)
              if r.paired is not None]
    assert max(ratios) / min(ratios) == pytest.approx(1.0)
