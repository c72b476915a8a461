"""One set of numbers: a search's best, which kind of number it is, how it ended, and noise.

A search times each candidate as it comes (its *search-time* median, with the interquartile
range kept as its spread) and ranks candidates by those. When it ends, the finalists are
timed again side by side in one process with the unscheduled proc, and the winner of that
re-measurement is the search's declared best (``SearchRecord.best_*``). Every view — the
CLI's tables and ``--json``, the notebook's ``SearchTree`` — names the best through
``declared_best`` so that all of them show the same candidate with the same time and
speedup, and say which kind of number it is.

Whether the finalists were re-measured is read from what the search stored, so it holds for
databases of every schema version: the search loop stores the re-measured numbers, or — when
the re-measurement could not run or did not finish — the winner's own search-time numbers,
unchanged. A stored best that differs from its candidate's search-time numbers therefore
came from the side-by-side re-measurement. (A fresh timing equal to the search-time median
to the last bit does not happen with real clocks.)

Standard library and ``core`` only: every package may use it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from schedsearch.core import FINALIST_RESERVE_SHARE, CandidateRecord, SearchRecord, SearchStatus, Status, Store, Timing
from schedsearch.stopping import stopped_improving


class NumberKind(StrEnum):
    """Where a reported time and speedup come from."""

    REMEASURED = "remeasured"  # the finalists timed again side by side with the unscheduled proc
    SEARCH_TIME = "search_time"  # the candidate's own median, measured during the search

    @property
    def text(self) -> str:
        """How the CLI and the notebook say it."""
        return "re-measured side by side" if self is NumberKind.REMEASURED else "search-time median"


class Ending(StrEnum):
    """How a search (its last run) ended, in the words a person expects."""

    BUDGET = "budget_reached"
    CANDIDATE_LIMIT = "candidate_limit_reached"
    # ``SearchConfig.early_stop`` candidates in a row brought no new best, or the stretch
    # without one was long against the search before it (``schedsearch.stopping``)
    STOPPED_IMPROVING = "stopped_improving"
    EXHAUSTED = "nothing_left_to_expand"
    INTERRUPTED = "interrupted"
    FAILED = "failed"
    RUNNING = "running"

    @property
    def text(self) -> str:
        """``budget reached``, ``interrupted``, ..."""
        return self.value.replace("_", " ")


@dataclass(frozen=True, slots=True)
class DeclaredBest:
    """The best a search declares, with the numbers every view shows for it."""

    record: CandidateRecord
    seconds: float | None
    speedup: float | None
    gflops: float | None
    kind: NumberKind
    spread: float | None  # relative IQR of the timing behind ``seconds``; None: not recorded

    @property
    def is_unscheduled(self) -> bool:
        """True when nothing beat the unscheduled proc (the best is the root)."""
        return self.record.parent_id is None

    @property
    def search_time_seconds(self) -> float | None:
        """The candidate's own search-time median (equal to ``seconds`` unless re-measured)."""
        return self.record.seconds

    @property
    def search_time_spread(self) -> float | None:
        """The spread of the search-time median."""
        return self.record.timing.spread if self.record.timing is not None else None


def declared_best(
    search: SearchRecord, declared: CandidateRecord | None, fastest: CandidateRecord | None
) -> DeclaredBest | None:
    """The best of ``search``: its declared candidate (``declared``, the record of
    ``search.best_candidate_id``) with the stored numbers, or — while no best is declared
    (a running search, one killed before it finished) — the ``fastest`` ``ok`` candidate by
    its search-time median. None when nothing was measured ok.
    """
    if declared is not None and declared.id == search.best_candidate_id and search.best_seconds is not None:
        remeasured = search.best_seconds != declared.seconds or (
            search.best_speedup is not None and search.best_speedup != declared.speedup
        )
        if remeasured:
            flops = search.workload.flops
            return DeclaredBest(
                record=declared,
                seconds=search.best_seconds,
                speedup=search.best_speedup,
                gflops=flops / search.best_seconds / 1e9 if flops and search.best_seconds > 0 else None,
                kind=NumberKind.REMEASURED,
                spread=None,  # the re-measurement's spread is not stored, only its median
            )
        return _search_time(declared)
    if declared is not None and declared.id == search.best_candidate_id and declared.status is Status.OK:
        return _search_time(declared)
    if fastest is not None and fastest.status is Status.OK and fastest.seconds is not None:
        return _search_time(fastest)
    return None


def _search_time(record: CandidateRecord) -> DeclaredBest:
    return DeclaredBest(
        record=record,
        seconds=record.seconds,
        speedup=record.speedup,
        gflops=record.gflops,
        kind=NumberKind.SEARCH_TIME,
        spread=record.timing.spread if record.timing is not None else None,
    )


def load_declared_best(store: Store, search: SearchRecord) -> DeclaredBest | None:
    """``declared_best`` read from ``store``."""
    declared = store.get_candidate(search.best_candidate_id) if search.best_candidate_id is not None else None
    top = store.top_candidates(search.id, 1) if declared is None else []
    return declared_best(search, declared, top[0] if top else None)


def best_among(search: SearchRecord, records: Iterable[CandidateRecord]) -> DeclaredBest | None:
    """``declared_best`` from a search's candidate records (all of them, e.g. a notebook's tree)."""
    records = list(records)
    declared = next((r for r in records if r.id == search.best_candidate_id), None)
    timed = [r for r in records if r.status is Status.OK and r.seconds is not None]
    fastest = min(timed, key=lambda r: (r.seconds, r.id)) if timed else None
    return declared_best(search, declared, fastest)


def ending(search: SearchRecord) -> Ending:
    """How the search's last run ended: a completed search reached its time budget, its
    candidate limit, stopped improving (``early_stop``), or had nothing left to expand
    (within ``max_depth``)."""
    if search.status is SearchStatus.INTERRUPTED:
        return Ending.INTERRUPTED
    if search.status is SearchStatus.FAILED:
        return Ending.FAILED
    if search.status is SearchStatus.RUNNING:
        return Ending.RUNNING
    config = search.config
    if config.max_candidates is not None and search.counters.evaluated >= config.max_candidates:
        return Ending.CANDIDATE_LIMIT
    counters = search.counters
    if config.early_stop is not None and counters.since_best >= config.early_stop:
        return Ending.STOPPED_IMPROVING
    if (
        config.early_stop is None
        and config.auto_stop
        and stopped_improving(counters, search.elapsed_seconds - counters.spent.baseline_wait)
        and counters.untried_ahead == 0
    ):
        return Ending.STOPPED_IMPROVING
    # The loop stops searching early enough to re-measure the finalists inside the budget,
    # which counts the search's own clock (the seconds each run took to start are not, nor
    # the wait for the baseline).
    used = search.elapsed_seconds - counters.spent.baseline_wait
    if config.max_seconds is not None and used >= (1 - FINALIST_RESERVE_SHARE) * config.max_seconds:
        return Ending.BUDGET
    return Ending.EXHAUSTED


# --------------------------------------------------------------------------- noise


def within_noise(before: Timing | None, after: Timing | None) -> bool | None:
    """True when two times cannot be told apart: their ranges — each median ± half its
    interquartile range, as shown next to every time — overlap, so the change between them
    is smaller than the two measurements' combined spread. None when either is missing."""
    if before is None or after is None:
        return None
    lo_b, hi_b = before.median - before.iqr / 2, before.median + before.iqr / 2
    lo_a, hi_a = after.median - after.iqr / 2, after.median + after.iqr / 2
    return lo_a <= hi_b and lo_b <= hi_a


@dataclass(frozen=True, slots=True)
class Step:
    """What one rewrite did: the candidate it made, measured against the one it came from."""

    record: CandidateRecord
    parent: CandidateRecord | None
    gain: float | None  # parent's median / this median (above 1: faster); None if either is untimed
    within_noise: bool | None  # None when either is untimed


def step(record: CandidateRecord, parent: CandidateRecord | None) -> Step:
    """The gain of ``record`` over ``parent`` (both search-time medians) and whether it is noise."""
    if parent is None or record.status is not Status.OK or parent.status is not Status.OK:
        return Step(record, parent, None, None)
    gain = (
        parent.seconds / record.seconds
        if parent.seconds is not None and record.seconds is not None and record.seconds > 0
        else None
    )
    return Step(record, parent, gain, within_noise(parent.timing, record.timing) if gain is not None else None)


def steps_of(lineage: Sequence[CandidateRecord]) -> list[Step]:
    """Each rewrite on a path (root first, as ``Store.lineage`` gives it), one Step per
    candidate after the root."""
    return [step(child, parent) for parent, child in itertools.pairwise(lineage)]
