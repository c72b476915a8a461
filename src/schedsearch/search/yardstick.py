"""The yardstick: one fast kernel every candidate is timed beside, so that times compare.

A shared host's speed drifts: on a cloud machine whose neighbours compete for its caches
and memory, the same kernel measured a minute apart can differ by half. Two kernels timed
in one process, in interleaved rounds, see the same state of the machine, so the ratio of
their times drifts far less than either time. The search therefore times each candidate
beside a *yardstick* (``Job.yardstick``; ``core.Paired`` holds what came back) and puts its
time on one scale: its measured times multiplied by ``scale / yardstick's measured time``,
where ``scale`` is the yardstick's own time on that scale.

The yardstick is the fastest kernel found, once it is ``STEP`` times faster than the last
one (the first: than the unscheduled proc, which is never one: it is too slow to time beside
every candidate). Its scale is its time when it became the yardstick, itself measured
beside the previous yardstick, so every yardstick's scale is linked to the first. A
yardstick is always fast, so timing it costs at most about as much as the candidate.
"""

from __future__ import annotations

import dataclasses

from schedsearch.core import Candidate, CandidateRecord, Measurement, Paired, Status

#: A new best becomes the yardstick when it is this many times faster than the current one.
#: Each change of yardstick carries that one pairing's error into every later time, so the
#: yardstick changes only when timing it beside every candidate would cost noticeably more
#: than timing the best.
STEP = 1.5


class Yardsticks:
    """The search's yardstick and the scale of every yardstick it has had."""

    def __init__(self, root_fingerprint: str) -> None:
        self.root_fingerprint = root_fingerprint
        self.current: Candidate | None = None
        self.seconds: float | None = None  # the current yardstick's time on the scale
        self.scales: dict[str, float] = {}  # yardstick fingerprint -> its time on the scale
        self.latest: dict[str, Paired] = {}  # yardstick fingerprint -> its latest pairing, placed

    def place(self, m: Measurement) -> Measurement:
        """``m`` on the search's scale: its timing rescaled by the yardstick timed beside it.
        Measurements taken alone, or beside a kernel that was never this search's yardstick
        (an earlier search's measurement), or already placed, are returned as they are.

        An also-ran whose yardstick was spared (``Paired.spared``) is rescaled by the factor
        of the latest pairing with that yardstick: its time only has to rank it among the
        slower kernels, and the machine's drift since that pairing is what the factor still
        corrects. Before any pairing with it, it stays as measured (timed alone)."""
        p = m.paired
        if m.timing is None or p is None or p.seconds is not None:
            return m
        scale = self.scales.get(p.fingerprint)
        if p.timing is None:  # spared
            latest = self.latest.get(p.fingerprint) if scale is not None else None
            if latest is None:
                return dataclasses.replace(m, paired=None)
            paired = dataclasses.replace(latest, borrowed=True)
            return dataclasses.replace(m, timing=m.timing.scaled(paired.factor), paired=paired)
        if scale is None or p.timing.median <= 0:
            return m
        paired = dataclasses.replace(p, seconds=scale)
        self.latest[p.fingerprint] = paired
        return dataclasses.replace(m, timing=m.timing.scaled(paired.factor), paired=paired)

    def consider(self, record: CandidateRecord, candidate: Candidate, baseline: float | None) -> bool:
        """Make ``record`` (the new best; ``candidate`` its C) the yardstick if it is
        ``STEP`` times faster than the current one (or than ``baseline``, the unscheduled
        proc's time, when there is none yet). True when it became the yardstick."""
        seconds = record.seconds
        if record.status is not Status.OK or seconds is None or seconds <= 0:
            return False
        if record.fingerprint == self.root_fingerprint or record.fingerprint in self.scales:
            return False
        bar = self.seconds if self.seconds is not None else baseline
        if bar is None or seconds * STEP > bar:
            return False
        self.current, self.seconds = candidate, seconds
        self.scales[record.fingerprint] = seconds
        return True
