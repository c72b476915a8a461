"""``regress``'s verdict on one schedule timed side by side with the unscheduled proc."""

from __future__ import annotations

from schedsearch.cli.regress import verdict
from schedsearch.core import Timing


def _t(median: float, spread: float = 0.02) -> Timing:
    return Timing(median=median, min=median * (1 - 2 * spread), q1=median * (1 - spread), q3=median * (1 + spread))


BASE = _t(1.0)


def test_at_least_the_recorded_speedup_less_the_tolerance_passes():
    assert verdict(4.0, BASE, _t(0.25), recorded=4.5, tolerance=0.2, lenient=False) == (True, "", "")


def test_falling_below_the_recorded_speedup_fails_here_and_warns_for_a_foreign_recording():
    passed, why, _ = verdict(2.0, BASE, _t(0.5), recorded=4.0, tolerance=0.2, lenient=False)
    assert not passed and "below 3.2x" in why and "recorded 4x" in why
    passed, why, warning = verdict(2.0, BASE, _t(0.5), recorded=4.0, tolerance=0.2, lenient=True)
    assert passed and not why and "another machine" in warning


def test_slower_than_the_unscheduled_proc_fails_wherever_it_was_recorded():
    # 0.93x with non-overlapping quartiles: slower beyond the noise
    for lenient in (False, True):
        passed, why, warning = verdict(0.93, BASE, _t(1 / 0.93, 0.01), recorded=0.95, tolerance=0.2, lenient=lenient)
        assert not passed and why.startswith("slower than the unscheduled proc") and not warning


def test_a_near_tie_with_the_unscheduled_proc_is_not_a_slowdown():
    # 0.99x but the quartiles overlap: noise, and within the recorded 1.0x less 20%
    assert verdict(0.99, BASE, _t(1.01), recorded=1.0, tolerance=0.2, lenient=False) == (True, "", "")


def test_the_unscheduled_proc_itself_is_never_slower_than_itself():
    # A search whose best was the root: the same C timed twice, quartiles apart by chance.
    apart = _t(1 / 0.95, 0.005)
    assert not verdict(0.95, BASE, apart, recorded=1.0, tolerance=0.2, lenient=False)[0]
    assert verdict(0.95, BASE, apart, recorded=1.0, tolerance=0.2, lenient=False, same_code=True) == (True, "", "")
    passed, why, _ = verdict(0.7, BASE, _t(1 / 0.7), recorded=1.0, tolerance=0.2, lenient=False, same_code=True)
    assert not passed and "below 0.8x" in why  # the recorded floor still holds
