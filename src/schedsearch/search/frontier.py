"""The frontier: measured, expandable candidates ordered by their median time.

Shared by every strategy. Ordering is ``(median seconds, id)`` so ties go to the earlier
candidate and the same sequence of ``tell`` calls always gives the same order. A strategy
may pass another key.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Callable, Iterator

from schedsearch.core import CandidateRecord, Status


def expandable(record: CandidateRecord, max_depth: int) -> bool:
    """True when ``record`` may be expanded: measured ``ok``, not yet expanded, not at max depth."""
    return (
        record.status is Status.OK and record.seconds is not None and not record.expanded and record.depth < max_depth
    )


def rank_key(record: CandidateRecord) -> tuple[float, int]:
    """Sort key of a measured record: faster first, then older first."""
    seconds = record.seconds
    return (seconds if seconds is not None else float("inf"), record.id)


RankKey = Callable[[CandidateRecord], tuple[float, int]]


class Frontier:
    """Expandable records kept sorted by ``key`` (default ``rank_key``); each id is held at most once."""

    __slots__ = ("_key", "_keys", "_records")

    def __init__(self, key: RankKey = rank_key) -> None:
        self._key = key
        self._keys: list[tuple[float, int]] = []
        self._records: dict[int, CandidateRecord] = {}

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, candidate_id: object) -> bool:
        return candidate_id in self._records

    def __iter__(self) -> Iterator[CandidateRecord]:
        """Records best first."""
        return (self._records[k[1]] for k in self._keys)

    def push(self, record: CandidateRecord) -> None:
        """Add (or replace) a record."""
        if record.id in self._records:
            self.remove(record.id)
        key = self._key(record)
        bisect.insort(self._keys, key)
        self._records[record.id] = record

    def remove(self, candidate_id: int) -> CandidateRecord | None:
        """Take a record out by id; None when it is not here."""
        record = self._records.pop(candidate_id, None)
        if record is not None:
            key = self._key(record)
            del self._keys[bisect.bisect_left(self._keys, key)]
        return record

    def pop_best(self) -> CandidateRecord:
        """Remove and return the fastest record (IndexError when empty)."""
        _, cid = self._keys.pop(0)
        return self._records.pop(cid)

    def pop_random(self, rng: random.Random, *, skip_best: bool = False) -> CandidateRecord:
        """Remove and return a uniformly chosen record (optionally never the fastest one)."""
        lo = 1 if skip_best and len(self._keys) > 1 else 0
        _, cid = self._keys.pop(rng.randrange(lo, len(self._keys)))
        return self._records.pop(cid)

    def peek(self, k: int) -> list[CandidateRecord]:
        """The ``k`` fastest records, best first, left in place."""
        return [self._records[cid] for _, cid in self._keys[:k]]


class FrontierStrategy:
    """Shared part of the strategies that keep one frontier of expandable records.

    Subclasses decide which records ``ask`` takes; learning and exhaustion are the same.
    Any frontier gains from an early ask: its best node may be a child measured a moment ago.
    """

    whole_rounds = False

    def __init__(self, max_depth: int, seed: int = 0, key: RankKey = rank_key) -> None:
        self._max_depth = max_depth
        self._rng = random.Random(seed)
        self._frontier = Frontier(key)

    def tell(self, record: CandidateRecord) -> None:
        """Learn a measured candidate; ``ok`` ones below max depth join the frontier."""
        if expandable(record, self._max_depth):
            self._frontier.push(record)
        else:
            self._frontier.remove(record.id)

    def exhausted(self) -> bool:
        """True when no expandable record is left."""
        return not self._frontier
