"""The expansion shards waiting for one expander actor, and which of them goes next.

Standard library only: the Ray executor keeps one ``ShardQueue`` per actor and takes from
it whenever the actor is free. An expansion job carries a ``priority`` (lower goes first:
its parent's time, handicapped by depth, ``ranking.expansion_priority``); among equal
priorities the latest submitted goes first - the next round, grown from the first likely
winners of a streamed one, ahead of that one's remaining shards - and each job's own
shards keep their order (the first shard holds the heavy rewrite dealt first).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class ShardQueue(Generic[T]):
    """Waiting shards, each an opaque item, taken lowest priority first."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, T]] = []
        self._submissions = itertools.count()

    def push_job(self, priority: float, shards: list[T]) -> None:
        """Queue one job's shards (in the order they are to run) at ``priority``."""
        submission = -next(self._submissions)  # later submissions sort first among equals
        for position, shard in enumerate(shards):
            heapq.heappush(self._heap, (priority, submission, position, shard))

    def pop(self) -> T:
        """The shard to run next (``IndexError`` when none waits)."""
        return heapq.heappop(self._heap)[3]

    def clear(self) -> None:
        """Forget every waiting shard."""
        self._heap.clear()

    def __len__(self) -> int:
        return len(self._heap)

    def __iter__(self) -> Iterator[T]:
        """The waiting shards, in no particular order."""
        return (entry[3] for entry in self._heap)
