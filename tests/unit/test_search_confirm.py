"""``search.confirm``: a new best is measured a second time, and the slower time counts."""

from __future__ import annotations

from schedsearch.core import CandidateRecord, Measurement, SearchConfig, Status, Timing
from schedsearch.search import make_strategy
from schedsearch.search.confirm import Confirmations, confirmed
from schedsearch.search.ledger import Ledger
from schedsearch.search.repeats import FLOOR, MIN_REPEATS
from schedsearch.store import InMemoryStore
from schedsearch.testing.builders import make_schedule, make_timing
from schedsearch.testing.fake_executor import FakeClock
from schedsearch.testing.fake_tree import fake_root, fake_workload


class Heard:
    """A strategy stand-in that keeps the timing noise it is told."""

    whole_rounds = False

    def __init__(self) -> None:
        self.noise: list[float] = []

    def heed_noise(self, share: float) -> None:
        self.noise.append(share)


def _ledger(best: float | None) -> Ledger:
    cfg = SearchConfig(max_seconds=None)
    ledger = Ledger(fake_workload(), fake_root(), make_strategy(cfg), InMemoryStore(), lambda e: None, FakeClock(),
                    None, activity=lambda: "")
    if best is not None:
        ledger.top = [CandidateRecord(id=2, search_id=1, parent_id=None, depth=1, schedule=make_schedule("a", 1),
                                      fingerprint="a", status=Status.OK, timing=make_timing(best))]
    return ledger


def _m(seconds: float | None, status: Status = Status.OK, fp: str = "x") -> Measurement:
    timing = Timing(median=seconds, min=seconds, q1=seconds, q3=seconds, samples=(seconds,)) if seconds else None
    return Measurement(fp, status, timing)


def test_only_an_ok_measurement_faster_than_the_best_so_far_is_confirmed() -> None:
    confirms = Confirmations(True, _ledger(best=1.0), Heard())  # type: ignore[arg-type]
    assert confirms.wanted(_m(0.9))
    assert not confirms.wanted(_m(1.0))  # a tie is no new best
    assert not confirms.wanted(_m(1.5))
    assert not confirms.wanted(_m(None, Status.WRONG_RESULT))


def test_nothing_is_confirmed_before_a_best_nor_when_confirmation_is_off() -> None:
    assert not Confirmations(True, _ledger(best=None), Heard()).wanted(_m(0.5))  # type: ignore[arg-type]
    assert not Confirmations(False, _ledger(best=1.0), Heard()).wanted(_m(0.5))  # type: ignore[arg-type]


def test_a_confirmation_in_flight_is_pending_until_taken_or_cleared() -> None:
    confirms = Confirmations(True, _ledger(best=1.0), Heard())  # type: ignore[arg-type]
    assert not confirms.pending() and confirms.take(7) is None
    first = _m(0.9)
    confirms.started(7, first)
    confirms.started(8, _m(0.8))
    assert confirms.pending()
    assert confirms.take(7) is first and confirms.take(7) is None
    confirms.clear()
    assert not confirms.pending() and confirms.take(8) is None


def test_the_slower_of_two_ok_times_counts_and_the_strategy_hears_the_noise() -> None:
    heard = Heard()
    confirms = Confirmations(True, _ledger(best=1.0), heard)  # type: ignore[arg-type]
    m, note = confirms.settle(_m(0.80), _m(0.88))
    assert m.seconds == 0.88 and "+10.0%" in note and "the slower counts" in note
    assert heard.noise == [FLOOR] and len(confirms.repeats) == 1  # too few repeats yet to heed
    for _ in range(MIN_REPEATS):
        confirms.settle(_m(0.80), _m(0.88))
    assert heard.noise[-1] > FLOOR


def test_a_second_measurement_that_fails_is_what_counts_and_teaches_no_noise() -> None:
    heard = Heard()
    confirms = Confirmations(True, _ledger(best=1.0), heard)  # type: ignore[arg-type]
    failed = _m(None, Status.RUN_ERROR)
    m, note = confirms.settle(_m(0.8), failed)
    assert m is failed and note == "measured twice: ok, then run_error"
    assert heard.noise == [] and len(confirms.repeats) == 0


def test_confirmed_keeps_the_slower_whichever_came_first() -> None:
    fast, slow = _m(0.8), _m(0.9)
    assert confirmed(fast, slow)[0] is slow
    assert confirmed(slow, fast)[0] is slow
