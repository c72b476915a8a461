"""Strategies on hand-made records: ordering, levels, seeds, expandability."""

from __future__ import annotations

import pytest

from schedsearch.core import CandidateRecord, Schedule, SearchConfig, Status, StrategyKind, Timing
from schedsearch.search import Beam, BestFirst, Frontier, RandomFrontier, make_strategy


def rec(cid: int, seconds: float | None, *, depth: int = 1, status: Status = Status.OK,
        expanded: bool = False) -> CandidateRecord:
    timing = Timing(seconds, seconds, seconds, seconds) if seconds is not None else None
    return CandidateRecord(id=cid, search_id=1, parent_id=None if depth == 0 else 0, depth=depth,
                           schedule=Schedule(), fingerprint=f"fp{cid}", status=status, timing=timing,
                           expanded=expanded)


def drain(strategy, n: int = 1) -> list[int]:
    out = []
    while not strategy.exhausted():
        got = strategy.ask(n)
        assert got, "a strategy that is not exhausted must give work"
        out.extend(r.id for r in got)
    return out


def test_frontier_orders_by_seconds_then_id_and_replaces() -> None:
    f = Frontier()
    for r in [rec(3, 2.0), rec(1, 1.0), rec(2, 2.0), rec(4, 0.5)]:
        f.push(r)
    f.push(rec(4, 3.0))  # re-measured slower: replaces, not duplicates
    assert [r.id for r in f] == [1, 2, 3, 4]
    assert len(f) == 4 and 4 in f
    assert f.remove(2) is not None and f.remove(2) is None
    assert [r.id for r in f.peek(2)] == [1, 3]


def test_best_first_pure_greedy_takes_fastest_first() -> None:
    s = BestFirst(max_depth=5, seed=0, explore_every=0)
    times = {1: 3.0, 2: 1.0, 3: 2.0, 4: 1.0, 5: 0.1}
    for cid, t in times.items():
        s.tell(rec(cid, t))
    assert [r.id for r in s.ask(2)] == [5, 2]  # ties (2 and 4) go to the older id
    s.tell(rec(6, 1.5))
    assert drain(s) == [4, 6, 3, 1]
    assert s.ask(3) == []


def rec_predicted(cid: int, timing: Timing, predicted: float | None, depth: int = 1) -> CandidateRecord:
    return CandidateRecord(id=cid, search_id=1, parent_id=0, depth=depth, schedule=Schedule(), fingerprint=f"fp{cid}",
                           status=Status.OK, timing=timing, predicted=predicted)


def _flat(seconds: float) -> Timing:
    return Timing(median=seconds, min=seconds, q1=seconds, q3=seconds)


def test_best_first_without_predictions_is_greedy_even_among_ties() -> None:
    s = BestFirst(max_depth=12, seed=0, explore_every=0)
    s.tell(rec_predicted(1, _flat(100e-9), 0.0))
    s.tell(rec_predicted(2, _flat(101e-9), -2.0))  # tied, and predicted far faster: not asked
    assert [r.id for r in s.ask(2)] == [1, 2]


def test_best_first_counts_overlapping_spreads_as_tied() -> None:
    s = BestFirst(max_depth=12, seed=0, explore_every=0, predictions=True)
    wide = Timing(median=1.0e-6, min=0.85e-6, q1=0.9e-6, q3=1.1e-6)  # IQR 0.2 us
    s.tell(rec_predicted(1, wide, 0.0))
    s.tell(rec_predicted(2, _flat(1.05e-6), -1.0))  # 5% slower, inside the best's spread
    s.tell(rec_predicted(3, _flat(1.20e-6), -3.0))  # outside it: the prediction does not count
    assert [r.id for r in s.ask(3)] == [2, 1, 3]


def test_best_first_never_offers_failed_expanded_or_too_deep_nodes() -> None:
    s = BestFirst(max_depth=3, explore_every=0)
    s.tell(rec(1, 0.1, status=Status.WRONG_RESULT))
    s.tell(rec(2, 0.2, depth=3))
    s.tell(rec(3, 0.3, expanded=True))
    s.tell(rec(4, None, status=Status.BUILD_ERROR))
    s.tell(rec(5, 0.9, depth=2))
    assert drain(s, 4) == [5]


def test_best_first_explores_one_in_n_reproducibly() -> None:
    def picks(seed: int) -> list[int]:
        s = BestFirst(max_depth=5, seed=seed, explore_every=4)
        for cid in range(1, 41):
            s.tell(rec(cid, float(cid)))
        return drain(s)

    order = picks(7)
    assert order == picks(7)
    assert sorted(order) == list(range(1, 41))
    # Picks 1-3 are greedy, pick 4 is exploratory (never the best left, i.e. never 4).
    assert order[:3] == [1, 2, 3] and order[3] != 4
    greedy_steps = sum(1 for i, cid in enumerate(order) if cid == min(order[i:]))
    assert greedy_steps >= 30  # greedy stays dominant


def test_random_is_reproducible_with_a_seed_and_changes_with_it() -> None:
    def picks(seed: int) -> list[int]:
        s = RandomFrontier(max_depth=5, seed=seed)
        for cid in range(1, 21):
            s.tell(rec(cid, 1.0 + cid))
        return drain(s, 3)

    assert picks(1) == picks(1)
    assert sorted(picks(1)) == list(range(1, 21))
    assert len({tuple(picks(seed)) for seed in range(5)}) > 1
    assert picks(1) != list(range(1, 21))


def test_beam_expands_best_width_per_level_one_level_at_a_time() -> None:
    s = Beam(width=2, max_depth=4)
    s.tell(rec(0, 1.0, depth=0))
    assert [r.id for r in s.ask(5)] == [0]
    assert s.exhausted()  # nothing at depth 1 yet
    for cid, t in [(1, 0.9), (2, 0.5), (3, 0.7), (4, 0.6)]:
        s.tell(rec(cid, t, depth=1))
    s.tell(rec(5, 0.1, depth=1, status=Status.WRONG_RESULT))
    assert not s.exhausted()
    assert [r.id for r in s.ask(1)] == [2]
    s.tell(rec(6, 0.2, depth=2))  # a child arriving mid-level does not switch levels
    assert [r.id for r in s.ask(5)] == [4]
    assert s.level == 1
    s.tell(rec(7, 0.3, depth=2))
    s.tell(rec(8, 0.1, depth=2))
    s.tell(rec(9, 0.4, depth=2))
    assert [r.id for r in s.ask(5)] == [8, 6]
    assert s.level == 2
    assert s.exhausted()


def test_beam_respects_max_depth_and_resumed_expanded_members() -> None:
    s = Beam(width=2, max_depth=2)
    s.tell(rec(0, 1.0, depth=0, expanded=True))
    s.tell(rec(1, 0.5, depth=1, expanded=True))  # expanded in an earlier run: keeps its beam slot
    s.tell(rec(2, 0.6, depth=1))
    s.tell(rec(3, 0.7, depth=1))  # third at its level: outside the beam
    s.tell(rec(4, 0.1, depth=2))  # at max depth: never expanded
    assert drain(s, 4) == [2]


@pytest.mark.parametrize(
    ("kind", "cls"), [(StrategyKind.BEST_FIRST, BestFirst), (StrategyKind.BEAM, Beam),
                      (StrategyKind.RANDOM, RandomFrontier)])
def test_make_strategy_builds_the_named_strategy(kind: StrategyKind, cls: type) -> None:
    assert isinstance(make_strategy(SearchConfig(strategy=kind)), cls)


def test_make_strategy_passes_the_seed() -> None:
    def picks(seed: int) -> list[int]:
        s = make_strategy(SearchConfig(strategy=StrategyKind.RANDOM, seed=seed))
        for cid in range(1, 16):
            s.tell(rec(cid, float(cid)))
        return drain(s)

    assert picks(3) == picks(3)
    assert len({tuple(picks(seed)) for seed in range(4)}) > 1
