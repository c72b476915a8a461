"""Auto timing's evidence and verdict (evaluate.interference) on made-up timings."""

from __future__ import annotations

import pytest

from schedsearch.evaluate.interference import (
    MIN_EVIDENCE,
    NOISE_FACTOR,
    PROBE_EVERY,
    SLOWDOWN_LIMIT,
    WINDOW,
    Evidence,
    Interference,
    evidence_of,
)


def test_paired_noise_is_the_spread_of_the_ratio_not_of_the_times() -> None:
    # The machine slows both kernels alike from round to round: the ratio does not move.
    yard = [1.0, 1.5, 2.0, 1.2, 1.8]
    cand = [2 * y for y in yard]
    e = evidence_of(cand, yard, "y", quiet=False)
    assert e is not None and e.noise == pytest.approx(0.0) and e.yardstick == "y" and not e.quiet
    assert e.yardstick_seconds == pytest.approx(1.5)
    alone = evidence_of(cand)
    assert alone is not None and alone.noise > 0.3 and alone.yardstick == "" and alone.yardstick_seconds is None


def test_too_few_rounds_say_nothing() -> None:
    assert evidence_of([1.0, 1.1]) is None
    assert evidence_of([1.0, 1.1], [1.0, 1.0]) is None
    # rounds that do not pair up are judged as the candidate's own samples
    e = evidence_of([1.0, 1.0, 1.0], [1.0, 1.0])
    assert e is not None and e.yardstick_seconds is None


def feed(node: Interference, quiet_noise: float, shared_noise: float, n: int = MIN_EVIDENCE,
         quiet_yard: float | None = None, shared_yard: float | None = None) -> None:
    for _ in range(n):
        node.record(Evidence(True, quiet_noise, "y" if quiet_yard else "", quiet_yard))
        node.record(Evidence(False, shared_noise, "y" if shared_yard else "", shared_yard))


def test_it_starts_quiet_and_alternates_until_it_can_judge() -> None:
    node = Interference()
    kinds = []
    for i in range(2 * MIN_EVIDENCE):
        q = node.quiet_next()
        kinds.append(q)
        node.record(Evidence(q, 0.02))
        if i < 2 * MIN_EVIDENCE - 1:
            assert node.verdict().disturbs is None
    assert kinds == [True, False] * MIN_EVIDENCE
    assert node.verdict().disturbs is False
    node.record(None)  # a timing that showed nothing changes nothing
    assert node.verdict().disturbs is False


def test_a_node_that_shows_no_disturbance_times_shared_with_a_quiet_probe() -> None:
    node = Interference()
    feed(node, 0.02, 0.02 * NOISE_FACTOR * 0.8)
    kinds = [node.quiet_next() for _ in range(3 * PROBE_EVERY)]
    assert kinds.count(True) == 3 and node.verdict().disturbs is False
    assert node.verdict().noise_factor == pytest.approx(NOISE_FACTOR * 0.8)


def test_noisier_timings_beside_other_work_make_it_quiet_with_a_shared_probe() -> None:
    node = Interference()
    feed(node, 0.02, 0.02 * NOISE_FACTOR * 1.5)
    kinds = [node.quiet_next() for _ in range(3 * PROBE_EVERY)]
    assert kinds.count(False) == 3 and node.verdict().disturbs is True


def test_a_slowed_yardstick_makes_it_quiet_even_when_the_spread_holds() -> None:
    node = Interference()
    feed(node, 0.02, 0.02, quiet_yard=1e-3, shared_yard=1e-3 * SLOWDOWN_LIMIT * 1.1)
    v = node.verdict()
    assert v.disturbs is True and v.slowdown == pytest.approx(SLOWDOWN_LIMIT * 1.1)
    calm = Interference()
    feed(calm, 0.02, 0.02, quiet_yard=1e-3, shared_yard=1e-3 * 1.02)
    assert calm.verdict().disturbs is False and calm.verdict().slowdown == pytest.approx(1.02)


def test_the_verdict_follows_the_host_when_its_neighbours_change() -> None:
    node = Interference()
    feed(node, 0.02, 0.02)
    assert node.verdict().disturbs is False
    feed(node, 0.02, 0.2, n=WINDOW)  # a noisy neighbour arrives: the window fills with it
    assert node.verdict().disturbs is True
    feed(node, 0.02, 0.021, n=WINDOW)
    assert node.verdict().disturbs is False


def test_nearly_noiseless_timings_of_both_kinds_are_alike() -> None:
    node = Interference()
    feed(node, 0.0, 0.0005)  # the ratio of two spreads under the floor means nothing
    assert node.verdict().disturbs is False and node.verdict().noise_factor == pytest.approx(1.0)
