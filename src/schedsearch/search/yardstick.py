"""The yardstick: one fast kernel every candidate is timed beside, so that times compare.

A shared host's speed drifts: on a cloud machine whose neighbours compete for its caches
and memory, the same kernel measured a minute apart can differ by half. Two kernels timed
in one process, in interleaved rounds, see the same state of the machine, so the ratio of
their times drifts far less than either time. The search therefore times each candidate
beside a *yardstick* (``Job.yardstick``; ``core.Paired`` holds what came back) and puts its
time on one scale: ``scale`` - the yardstick's own time on that scale - times the median of
the candidate's time over the yardstick's, round by round (``Yardsticks.place``).

The yardstick is the fastest kernel found, once it is ``STEP`` times faster than the last
one (the first: than the unscheduled proc, which is never one: it is too slow to time beside
every candidate) - or, for the first, as soon as one call of it is shorter than a sample
(``short``, ``BenchConfig.min_sample_seconds``): a sample of it then lasts what a sample of
any candidate lasts. Its scale is its time when it became the yardstick, itself measured
beside the previous yardstick, so every yardstick's scale is linked to the first. A
yardstick is always fast, so timing it costs at most about as much as the candidate.

Why the short first one: a kernel whose steps each gain less than ``STEP`` had no yardstick
for most of its search. In a search of the i8 matmul (784 ns unscheduled; Zen 3, 2 vCPUs)
none of 511 candidates was timed beside one, and timed alone beside the search's builds,
the stage of all of C with k split by 2 and sunk, the way to the fastest kernels, measured
824 ns, where five other searches measured it at 484-544 ns; the search left it. Timed
beside a 600 ns kernel of the first round in 16 processes while compilers ran beside them,
the same kernel's time spread 1.75x and its ratio to the yardstick 1.20x.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections import deque
from collections.abc import Sequence

from schedsearch.core import Candidate, CandidateRecord, Measurement, Status

#: A new best becomes the yardstick when it is this many times faster than the current one.
#: Each change of yardstick carries that one pairing's error into every later time, so the
#: yardstick changes only when timing it beside every candidate would cost noticeably more
#: than timing the best.
STEP = 1.5
#: A candidate whose yardstick was spared (``Paired.spared``, older databases only) is scaled
#: by the median factor of this many of the latest pairings with it: enough to outvote a
#: pairing taken during a passing disturbance, few enough (seconds of a search) to follow a
#: drifting host.
BORROW_WINDOW = 9


def paired_ratio(candidate: Sequence[float], yardstick: Sequence[float]) -> float | None:
    """The median over the rounds of the candidate's time over the yardstick's in the same
    round, or None when the two were not timed round for round (counts differ, or none)."""
    if not candidate or len(candidate) != len(yardstick) or any(y <= 0 for y in yardstick):
        return None
    return statistics.median(c / y for c, y in zip(candidate, yardstick, strict=True))


class Yardsticks:
    """The search's yardstick and the scale of every yardstick it has had."""

    def __init__(self, root_fingerprint: str, short: float = 0.0) -> None:
        self.root_fingerprint = root_fingerprint
        self.short = short  # a first yardstick this fast is taken without the STEP (module doc)
        self.current: Candidate | None = None
        self.seconds: float | None = None  # the current yardstick's time on the scale
        self.scales: dict[str, float] = {}  # yardstick fingerprint -> its time on the scale
        # yardstick fingerprint -> the factors of its latest pairings (what a spared one borrows)
        self.recent: dict[str, deque[float]] = {}

    def place(self, m: Measurement) -> Measurement:
        """``m`` on the search's scale: its timing rescaled by the yardstick timed beside it.
        Measurements taken alone, or beside a kernel that was never this search's yardstick
        (an earlier search's measurement), or already placed, are returned as they are.

        The candidate's time on the scale is the yardstick's scale times the median, over
        the rounds, of the candidate's time over the yardstick's in the same round - not the
        ratio of the two medians: a disturbance that slows the yardstick's calls and not the
        candidate's (or the other way round) in a few rounds moves the medians apart, and
        one such run made a 2.45 ms SGEMM 512 look 1.70 ms. Runs whose rounds do not pair
        one to one fall back to the ratio of the medians.

        A spared pairing (``Paired.spared``: the yardstick was not run) comes only from a
        database written while the driver still spared the yardstick beside an also-ran;
        such rows were stored placed, so they are returned as they are. One not yet placed
        is rescaled by the median factor of the latest ``BORROW_WINDOW`` pairings with that
        yardstick: its time only has to rank it among the slower kernels, and a single
        pairing's factor would carry that run's passing disturbance (one taken while the
        machine was 20% slower made a spared candidate the false best). Before any pairing
        with it, it stays as measured (timed alone)."""
        p = m.paired
        if m.timing is None or p is None or p.seconds is not None:
            return m
        scale = self.scales.get(p.fingerprint)
        if p.timing is None:  # spared: older databases only (``Paired``)
            recent = self.recent.get(p.fingerprint) if scale is not None else None
            if not recent:
                return dataclasses.replace(m, paired=None)
            paired = dataclasses.replace(p, seconds=scale, scaled_by=statistics.median(recent))
            return dataclasses.replace(m, timing=m.timing.scaled(paired.factor), paired=paired)
        if scale is None or p.timing.median <= 0 or m.timing.median <= 0:
            return m
        ratio = paired_ratio(m.timing.samples, p.timing.samples)
        factor = scale * ratio / m.timing.median if ratio is not None else scale / p.timing.median
        paired = dataclasses.replace(p, seconds=scale, scaled_by=factor)
        self.recent.setdefault(p.fingerprint, deque(maxlen=BORROW_WINDOW)).append(factor)
        return dataclasses.replace(m, timing=m.timing.scaled(paired.factor), paired=paired)

    def consider(self, record: CandidateRecord, candidate: Candidate, baseline: float | None) -> bool:
        """Make ``record`` (the new best; ``candidate`` its C) the yardstick if it is
        ``STEP`` times faster than the current one (or, when there is none yet, than
        ``baseline``, the unscheduled proc's time, or if its time is ``short``). True when it
        became the yardstick."""
        seconds = record.seconds
        if record.status is not Status.OK or seconds is None or seconds <= 0:
            return False
        if record.fingerprint == self.root_fingerprint or record.fingerprint in self.scales:
            return False
        bar = self.seconds if self.seconds is not None else baseline
        if bar is None:
            return False
        first_and_short = self.seconds is None and seconds <= self.short and seconds < bar
        if seconds * STEP > bar and not first_and_short:
            return False
        self.current, self.seconds = candidate, seconds
        self.scales[record.fingerprint] = seconds
        return True
