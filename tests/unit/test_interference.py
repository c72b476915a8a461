"""Auto timing's evidence and verdict (evaluate.interference) on made-up timings."""

from __future__ import annotations

import pytest

from schedsearch.evaluate.interference import (
    MIN_EVIDENCE,
    NOISE_FACTOR,
    PROBE_EVERY,
    WINDOW,
    Evidence,
    Interference,
    evidence_of,
)


def test_noise_is_the_spread_of_the_samples() -> None:
    e = evidence_of([1.0, 1.5, 2.0, 1.2, 1.8], quiet=False)
    assert e is not None and not e.quiet and e.noise == pytest.approx((1.8 - 1.2) / 1.5)
    steady = evidence_of([2.0] * 5)
    assert steady is not None and steady.quiet and steady.noise == 0.0


def test_too_few_rounds_say_nothing() -> None:
    assert evidence_of([1.0, 1.1]) is None
    assert evidence_of([1.0, 0.0, 1.0]) is None


def feed(node: Interference, quiet_noise: float, shared_noise: float, n: int = MIN_EVIDENCE) -> None:
    for _ in range(n):
        node.record(Evidence(True, quiet_noise))
        node.record(Evidence(False, shared_noise))


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
