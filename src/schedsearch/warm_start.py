"""Warm starts: a new search first evaluates the best schedules earlier searches found for
the same proc, at any sizes.

The store gives the fastest ``ok`` schedules of the latest searches of the same proc source
(same source sha256 and proc name) and target (``Store.past_schedules``: a few per search,
newest search first). Each distinct one is replayed on the new workload, most speedup
first, within a few seconds: replaying runs Exo here, in the driver. A schedule whose step
no longer applies at the new sizes (a split whose factor does not divide the new extent
with a perfect tail, a register tile written for another trip count) is counted and
skipped with Exo's reason; one whose C is the root's or an earlier seed's is dropped as a
duplicate. The rest become ``run_search``'s ``seeds``: children of the root, evaluated
right after the baseline — where the same C was measured the same way before, its
measurement is reused instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from schedsearch.core import Candidate, ExpandOptions, PastSchedule, Schedule, Store, Workload

#: Schedules taken from each earlier search (its fastest), and how many searches are asked.
PER_SEARCH = 3
SEARCHES = 8
#: At most this many schedules are replayed, within this many seconds.
MAX_SEEDS = 8
REPLAY_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class Skipped:
    """A past schedule that does not apply to the new workload, and Exo's reason."""

    past: PastSchedule
    reason: str


@dataclass(frozen=True, slots=True)
class WarmStart:
    """What a warm start found: the seeds and where each came from, and what it left out."""

    seeds: tuple[Candidate, ...] = ()
    sources: tuple[PastSchedule, ...] = ()  # the schedule each seed was replayed from, same order
    skipped: tuple[Skipped, ...] = ()  # replay failed: no longer applies here
    duplicates: int = 0  # replayed to the root's C or an earlier seed's
    left_out: int = 0  # not replayed: the time for replaying was up

    @property
    def considered(self) -> int:
        """Distinct past schedules looked at."""
        return len(self.seeds) + len(self.skipped) + self.duplicates + self.left_out

    def summary(self) -> list[str]:
        """Lines for a person: what was replayed from where, and why some were skipped."""
        if not self.considered:
            return []
        searches = sorted({p.search_id for p in (*self.sources, *(s.past for s in self.skipped))})
        origin = f" from search{'es' if len(searches) > 1 else ''} {', '.join(map(str, searches))}" if searches else ""
        parts = [f"{len(self.seeds)} replay here"]
        if self.skipped:
            parts.append(f"{len(self.skipped)} no longer appl{'ies' if len(self.skipped) == 1 else 'y'}")
        if self.duplicates:
            parts.append(f"{self.duplicates} duplicate")
        if self.left_out:
            parts.append(f"{self.left_out} not replayed (out of time)")
        lines = [f"warm start: {self.considered} schedules{origin}: {', '.join(parts)}"]
        lines += [
            f"  skipped candidate {s.past.candidate_id} of search {s.past.search_id} ({_sizes(s.past)}): {s.reason}"
            for s in self.skipped[:3]
        ]
        if len(self.skipped) > 3:
            lines.append(f"  ... and {len(self.skipped) - 3} more")
        return lines

    def to_json(self) -> dict[str, Any]:
        """Plain data for ``--json``."""
        return {
            "seeds": [
                {"search_id": p.search_id, "candidate_id": p.candidate_id, "sizes": dict(p.sizes)} for p in self.sources
            ],
            "skipped": [
                {
                    "search_id": s.past.search_id,
                    "candidate_id": s.past.candidate_id,
                    "sizes": dict(s.past.sizes),
                    "reason": s.reason,
                }
                for s in self.skipped
            ],
            "duplicates": self.duplicates,
            "left_out": self.left_out,
        }


def _sizes(past: PastSchedule) -> str:
    return ",".join(f"{k}={v}" for k, v in past.sizes) or "no sizes"


def candidates_to_replay(past: list[PastSchedule], options: ExpandOptions) -> tuple[list[PastSchedule], list[Skipped]]:
    """Distinct schedules, most speedup first (newest first among equals), and the ones this
    search may not use (OpenMP loops without ``--threads N``)."""
    seen: set[Schedule] = set()
    distinct: list[PastSchedule] = []
    for p in past:
        if p.schedule.steps and p.schedule not in seen:
            seen.add(p.schedule)
            distinct.append(p)
    distinct.sort(key=lambda p: -(p.speedup or 0.0))  # stable: the store's newest-first order breaks ties
    usable = [p for p in distinct if options.allow_parallel or not p.schedule.uses_openmp]
    refused = [Skipped(p, "uses OpenMP loops; search with --threads N to try it") for p in distinct if p not in usable]
    return usable, refused


def warm_start(
    store: Store,
    workload: Workload,
    root: Candidate,
    options: ExpandOptions,
    *,
    replay: Callable[[Schedule], Candidate] | None = None,
    max_seeds: int = MAX_SEEDS,
    seconds: float = REPLAY_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    say: Callable[[str], None] | None = None,
) -> WarmStart:
    """The seeds for a new search of ``workload`` from earlier searches in ``store``.

    ``replay`` turns a schedule into this workload's candidate or raises (by default Exo
    replays it: ``transforms.Expander.candidate``); any exception skips that schedule
    with its message as the reason. Replaying stops after ``max_seeds`` schedules or
    ``seconds``, whichever comes first. ``say`` is told when there is something to replay,
    before it is replayed.
    """
    past = store.past_schedules(
        workload.source_sha256, workload.proc, target=options.target, per_search=PER_SEARCH, searches=SEARCHES
    )
    usable, skipped = candidates_to_replay(past, options)
    if not usable:
        return WarmStart(skipped=tuple(skipped))
    if say is not None:
        count = min(len(usable), max_seeds)
        say(f"warm start: replaying {count} best schedule{'s' if count != 1 else ''} of earlier searches")
    if replay is None:
        from schedsearch.transforms import Expander

        expander = Expander(workload, options)
        replay = expander.adapt
    started = clock()
    seeds: list[Candidate] = []
    sources: list[PastSchedule] = []
    seen = {root.fingerprint}
    duplicates = left_out = 0
    for index, p in enumerate(usable[:max_seeds]):
        if clock() - started >= seconds:
            left_out = len(usable[:max_seeds]) - index
            break
        try:
            candidate = replay(p.schedule)
        except Exception as exc:  # noqa: BLE001 - a schedule that does not replay here is skipped, with why
            skipped.append(Skipped(p, " ".join(str(exc).split()) or type(exc).__name__))
            continue
        if candidate.fingerprint in seen:
            duplicates += 1
            continue
        seen.add(candidate.fingerprint)
        seeds.append(candidate)
        sources.append(p)
    return WarmStart(tuple(seeds), tuple(sources), tuple(skipped), duplicates, left_out)
