"""The expansion shards waiting for one expander actor, and which of them goes next.

Standard library only: the Ray executor keeps one ``ShardQueue`` per actor - a parent's
expansion waits for the actor that made it, whose cache holds its proc - and takes from it
whenever the actor is free; a free actor whose own queue holds nothing as urgent takes the
most urgent shard waiting for another (``queue_to_take``). An expansion job carries a ``priority`` (lower goes first:
its parent's time, handicapped by depth, ``ranking.expansion_priority``); among equal
priorities the latest submitted goes first - the next round, grown from the first likely
winners of a streamed one, ahead of that one's remaining shards - and each job's own
shards keep their order (the first shard holds the heavy rewrite dealt first).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator, Mapping
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

    def head_priority(self) -> float | None:
        """The priority of the shard ``pop`` would give next (None when none waits)."""
        return self._heap[0][0] if self._heap else None

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


def queue_to_take(index: int, queues: Mapping[int, ShardQueue[T]]) -> int | None:
    """Which actor's queue the free actor ``index`` takes its next shard from: its own,
    unless another's next shard has a strictly lower priority (or its own is empty) - then
    the lowest such, the first among equals. None when nothing waits anywhere. Why: each
    parent's expansion waits for its home actor, and with both busy when it is asked, the
    next round's expansions could all wait on one actor while the other ran the root's
    remaining shards (priority inf) for 10-15 s each (SGEMM 512 and conv1d_mc on a 2-core
    Zen 3); replaying the parent's schedule on the free actor costs less than that."""
    own = queues.get(index)
    best, best_priority = (index, own.head_priority()) if own else (None, None)
    for other, queue in queues.items():
        priority = queue.head_priority()
        if other == index or priority is None:
            continue
        if best_priority is None or priority < best_priority:
            best, best_priority = other, priority
    return best
