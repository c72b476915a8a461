"""Using the cost model's predictions: the order children are measured in, which of them a
short budget skips, and how well the predictions ranked what was then measured.

Standard library and the shared records only (``core``, and ``numbers`` for what counts as
within noise).
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence

from schedsearch.core import CandidateRecord, Timing
from schedsearch.numbers import within_noise

#: Share of the measuring order given to uniformly random children instead of the
#: predicted best, so a wrong model cannot hide a good region for ever.
EXPLORE_SHARE = 0.1
#: With ``--cost-model prune`` and a short budget: the predicted-slower share left out.
PRUNE_SHARE = 0.5
#: Measurements the recorded rank correlation looks back over.
ACCURACY_WINDOW = 50
#: Measurements of the workload after which every further prediction is also scored
#: (``ModelAccuracy.settled_*``): by then the model has learned from the search itself.
SETTLED_AFTER = 200
#: Draws of ``repeatability``: its median then moves by a few hundredths from one seed to
#: another.
REPEAT_DRAWS = 32
#: Times ``repeatability`` looks at, at most (evenly spaced over the rest): about 50 ms a
#: call, which a search makes once a round, however long it runs.
REPEAT_SAMPLE = 400
#: A normal distribution's interquartile range in standard deviations.
IQR_PER_SIGMA = 1.349


def measuring_order(
    predictions: Sequence[float], rng: random.Random, explore: float = EXPLORE_SHARE
) -> tuple[list[int], frozenset[int]]:
    """Indices of the children, predicted-fastest first, with each slot taken by a random
    remaining child with probability ``explore`` (drawn from ``rng``: seeded, reproducible;
    ties keep proposal order), and the indices those draws placed (put in a slot the
    predictions would have given to another child)."""
    remaining = sorted(range(len(predictions)), key=lambda i: (predictions[i], i))
    order: list[int] = []
    drawn: set[int] = set()
    while remaining:
        pick = rng.randrange(len(remaining)) if rng.random() < explore else 0
        if pick:
            drawn.add(remaining[pick])
        order.append(remaining.pop(pick))
    return order, frozenset(drawn)


def expansion_priority(parent: CandidateRecord) -> float:
    """Where ``parent``'s expansion goes among those an executor holds back (lower first):
    the log of its measured time, the fastest parent first; an untimed parent goes last."""
    seconds = parent.seconds
    if seconds is None or seconds <= 0:
        return math.inf
    return math.log(seconds)


def budget_is_short(
    children: int, *, seconds_left: float | None, seconds_per_candidate: float | None, candidates_left: int | None
) -> bool:
    """True when measuring all ``children`` would not fit in what is left of the budget:
    more children than candidates left, or more than the seconds left at the search's pace
    so far (elapsed seconds per evaluated candidate)."""
    if candidates_left is not None and children > candidates_left:
        return True
    if seconds_left is not None and seconds_per_candidate is not None:
        return children * seconds_per_candidate > seconds_left
    return False


def kept_after_pruning(children: int, share: float = PRUNE_SHARE) -> int:
    """How many of the ordered children a short budget still measures (at least one)."""
    return max(1, math.ceil(children * (1.0 - share)))


def _ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):  # ties share their average rank
            ranks[order[k]] = (i + j) / 2
        i = j + 1
    return ranks


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Spearman's rank correlation; None for fewer than 3 pairs or a constant side."""
    if len(xs) != len(ys) or len(xs) < 3:
        return None
    try:
        return statistics.correlation(_ranks(xs), _ranks(ys))
    except statistics.StatisticsError:
        return None


def repeatability(timings: Sequence[Timing], seed: int = 0) -> float | None:
    """The rank correlation two measurements of these kernels would have with each other:
    each time drawn again around its median from a log-normal as wide as its own samples
    (their interquartile range), and the median over ``REPEAT_DRAWS`` pairs of such draws.
    No prediction ranks the measured times better than they rank themselves, so this is the
    most a rank correlation with them can be expected to reach. An optimistic bound: a host
    that drifts between two measurements moves them further apart than the samples of one
    spread. Seeded, so the same timings give the same answer; None for fewer than 3."""
    if len(timings) < 3:
        return None
    if len(timings) > REPEAT_SAMPLE:
        step = len(timings) / REPEAT_SAMPLE
        timings = [timings[int(i * step)] for i in range(REPEAT_SAMPLE)]
    rng = random.Random(f"repeatability {seed}")
    centres = [math.log(t.median) if t.median > 0 else 0.0 for t in timings]
    sigmas = [math.log(t.q3 / t.q1) / IQR_PER_SIGMA if 0 < t.q1 <= t.q3 else 0.0 for t in timings]

    def draw() -> list[float]:
        return [c + rng.gauss(0.0, s) for c, s in zip(centres, sigmas, strict=True)]

    rhos = [r for _ in range(REPEAT_DRAWS) if (r := spearman(draw(), draw())) is not None]
    return statistics.median(rhos) if rhos else None


def measured_log_ratio(record: CandidateRecord) -> float | None:
    """log(time / root time) of a measured ``ok`` record (from its speedup)."""
    if record.speedup is None or record.speedup <= 0:
        return None
    return -math.log(record.speedup)


def span(values: Sequence[float]) -> float | None:
    """How far apart positive ``values`` are: the 90th over the 10th percentile (nearest
    rank); None for fewer than 3 values."""
    if len(values) < 3:
        return None
    ordered = sorted(values)
    low, high = ordered[round(0.1 * (len(ordered) - 1))], ordered[round(0.9 * (len(ordered) - 1))]
    return high / low if low > 0 else None


def concordance(predicted: Sequence[float], timings: Sequence[Timing]) -> tuple[float | None, int]:
    """(share, pairs): over the pairs of measurements that can be told apart (``within_noise``
    is False: their ranges do not overlap), the share whose predictions order them the same
    way (a tied prediction counts half). Rank correlation over near-equal kernels mostly
    scores the measurements' noise; this scores the model where the measurements say
    something. ``(None, 0)`` when no pair can be told apart."""
    agree = 0.0
    pairs = 0
    for i in range(len(timings)):
        for j in range(i + 1, len(timings)):
            if within_noise(timings[i], timings[j]) is not False:
                continue
            pairs += 1
            faster = timings[i].median < timings[j].median
            if predicted[i] == predicted[j]:
                agree += 0.5
            elif (predicted[i] < predicted[j]) == faster:
                agree += 1.0
    return (agree / pairs if pairs else None, pairs)
