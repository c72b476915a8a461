"""The search's own timing noise: repeats of confirmed new bests, and best-first's ties (no exo, cc or ray)."""

from __future__ import annotations

import math

import pytest

from schedsearch.core import CandidateRecord, CostModelMode, SearchConfig, Status, Timing
from schedsearch.search import BestFirst, make_strategy, run_search
from schedsearch.search.repeats import CEILING, FLOOR, MIN_REPEATS, RepeatNoise
from schedsearch.store import InMemoryStore
from schedsearch.testing.fake_executor import LuckyFirstTime
from schedsearch.testing.fake_model import FakeCostModel, oracle
from schedsearch.testing.fake_tree import FakeTree, fake_root, fake_workload


def test_the_share_is_the_floor_until_enough_repeats_are_in() -> None:
    noise = RepeatNoise()
    for _ in range(MIN_REPEATS - 1):
        noise.add(1.0, 1.06)
    assert noise.share() == FLOOR
    noise.add(1.0, 1.06)
    assert noise.share() == pytest.approx(0.06)


def test_the_share_is_the_median_gap_either_way_within_floor_and_ceiling() -> None:
    noise = RepeatNoise()
    for first, second in ((1.0, 1.05), (1.0, 1 / 1.04), (1.0, 1.9)):  # slower, faster, a disturbance
        noise.add(first, second)
    assert noise.share() == pytest.approx(0.05)  # the 90% one does not move the median
    quiet = RepeatNoise()
    for _ in range(5):
        quiet.add(1.0, 1.001)
    assert quiet.share() == FLOOR
    loud = RepeatNoise()
    for _ in range(5):
        loud.add(1.0, 1.5)
    assert loud.share() == CEILING


def test_only_the_latest_repeats_count_and_nonsense_is_ignored() -> None:
    noise = RepeatNoise(window=3)
    for _ in range(3):
        noise.add(1.0, 1.09)
    for _ in range(3):
        noise.add(1.0, 1.03)  # the host grew quieter
    assert noise.share() == pytest.approx(0.03)
    noise.add(0.0, 1.0)
    noise.add(1.0, math.inf)
    assert len(noise) == 3
    with pytest.raises(ValueError):
        RepeatNoise(floor=0.2, ceiling=0.1)


def _record(rid: int, seconds: float, predicted: float) -> CandidateRecord:
    return CandidateRecord(
        id=rid, search_id=1, parent_id=None, depth=1, schedule=fake_root().schedule, fingerprint=str(rid),
        status=Status.OK, timing=Timing(seconds, seconds, seconds, seconds), predicted=predicted,
    )


def _first_pick(noise: float | None) -> int:
    s = BestFirst(12, explore_every=0, predictions=True)
    for r in (_record(1, 0.699, math.log(0.9)), _record(2, 0.715, math.log(0.5))):  # 2.3% apart
        s.tell(r)
    if noise is not None:
        s.heed_noise(noise)
    return s.ask(1)[0].id


def test_best_first_counts_times_within_the_heeded_noise_as_tied() -> None:
    # The i8 matmul (Zen 3): the stage of C predicted fastest was 2.2% behind the best.
    assert _first_pick(None) == 1  # 2% by default: apart, the measurement decides
    assert _first_pick(0.06) == 2  # the search's repeats differ by 6%: tied, the prediction decides
    assert _first_pick(0.01) == 1  # never under the floor


class Spy:
    """A strategy that passes everything on and keeps what it was told of the noise."""

    def __init__(self, inner) -> None:
        self.inner, self.heard = inner, []
        self.whole_rounds = inner.whole_rounds

    def tell(self, record):
        self.inner.tell(record)

    def ask(self, n):
        return self.inner.ask(n)

    def exhausted(self):
        return self.inner.exhausted()

    def heed_noise(self, share):
        self.heard.append(share)
        self.inner.heed_noise(share)


@pytest.mark.parametrize(("lucky", "share"), [(1 / 1.06, 0.06), (0.8, CEILING)])
def test_a_search_tells_its_strategy_how_far_apart_its_confirmations_came(lucky: float, share: float) -> None:
    tree = FakeTree(moves=6, branching=3, failure_rate=0.0, features=True)
    cfg = SearchConfig(max_seconds=None, max_candidates=40, yardstick=False, confirm_best=True,
                       cost_model=CostModelMode.RANK)
    spy = Spy(make_strategy(cfg))
    run_search(fake_workload(), fake_root(), spy, LuckyFirstTime(tree, lucky), InMemoryStore(), cfg,
               cost_model=FakeCostModel(oracle(tree)))
    assert len(spy.heard) >= MIN_REPEATS  # one per confirmed new best
    assert spy.heard[:MIN_REPEATS - 1] == [FLOOR] * (MIN_REPEATS - 1)
    assert spy.heard[MIN_REPEATS - 1:] == pytest.approx([share] * (len(spy.heard) - MIN_REPEATS + 1))


def test_without_confirmation_the_strategy_hears_nothing() -> None:
    tree = FakeTree(moves=6, branching=3, failure_rate=0.0)
    cfg = SearchConfig(max_seconds=None, max_candidates=40, yardstick=False, confirm_best=False)
    spy = Spy(make_strategy(cfg))
    run_search(fake_workload(), fake_root(), spy, LuckyFirstTime(tree, 0.8), InMemoryStore(), cfg)
    assert spy.heard == []
