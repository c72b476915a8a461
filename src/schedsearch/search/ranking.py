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
#: Children predicted within this log ratio of a group's fastest form one group when the
#: model leads (``measuring_order``'s ``apart``): about the timing noise, where the model's
#: predictions say nothing about which is faster.
ALIKE = math.log(1.02)
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
    predictions: Sequence[float],
    rng: random.Random,
    explore: float = EXPLORE_SHARE,
    apart: float = 0.0,
    kinds: Sequence[str] | None = None,
) -> list[int]:
    """Indices of the children, predicted-fastest first, with each slot taken by a random
    remaining child with probability ``explore`` (drawn from ``rng``: seeded, reproducible;
    ties keep proposal order).

    With ``apart`` > 0, children predicted alike - within ``apart`` of the fastest of their
    group (``alike_groups``) - are measured one of each group first, groups fastest first,
    then the second of each, and so on. Why: a node's children are often a dozen loop
    splits and tiles predicted within a percent of their parent, and one measurement of
    them says what the others will; a rewrite of another kind predicted just behind such a
    group would otherwise wait behind all of it.

    With ``kinds`` too (each child's rewrite kind), groups are formed within each kind, and
    within a turn every child counts as ``apart`` slower per child of its own kind
    predicted faster than it (``kind_handicaps``): the likely winners are then of every
    kind, not a run of one."""
    remaining = sorted(range(len(predictions)), key=lambda i: (predictions[i], i))
    if apart > 0.0:
        of_kind = kinds if kinds is not None else [""] * len(predictions)
        handicap = kind_handicaps(predictions, kinds, apart) if kinds is not None else [0.0] * len(predictions)
        place: dict[int, int] = {}
        for kind in dict.fromkeys(of_kind):
            members = [i for i in remaining if of_kind[i] == kind]
            turns = alike_groups([predictions[i] for i in members], apart)
            place.update(zip(members, turns, strict=True))
        remaining.sort(key=lambda i: (place[i], predictions[i] + handicap[i], i))
    order: list[int] = []
    while remaining:
        pick = rng.randrange(len(remaining)) if rng.random() < explore else 0
        order.append(remaining.pop(pick))
    return order


def kind_handicaps(predictions: Sequence[float], kinds: Sequence[str], step: float) -> list[float]:
    """Each child's handicap: ``step`` times the number of children of its kind predicted
    faster (ties: proposed earlier). Why: a queue of several nodes' children is often a run
    of loop splits predicted within a few percent of each other, and the model cannot rank
    within it: a step of another kind predicted among them waited behind dozens of them."""
    seen: dict[str, int] = {}
    handicaps = [0.0] * len(predictions)
    for i in sorted(range(len(predictions)), key=lambda i: (predictions[i], i)):
        n = seen.get(kinds[i], 0)
        handicaps[i] = step * n
        seen[kinds[i]] = n + 1
    return handicaps


def alike_groups(ordered: Sequence[float], apart: float) -> list[int]:
    """For predictions in ascending order: each one's turn within its group (0 for the
    group's fastest). A group holds the predictions within ``apart`` of its fastest; the
    next one beyond starts a new group."""
    turns: list[int] = []
    first: float | None = None
    for p in ordered:
        if first is None or p - first > apart:
            first = p
            turns.append(0)
        else:
            turns.append(turns[-1] + 1)
    return turns


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
