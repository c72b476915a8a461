"""The expansion shards waiting for the expander actors, and which of them goes next.

Standard library only: the Ray executor keeps one ``ShardQueue`` per actor and takes from
it whenever the actor is free. An expansion job carries a ``priority`` (lower goes first:
its parent's time, handicapped by depth, ``ranking.expansion_priority``); among equal
priorities the latest submitted goes first - the next round, grown from the first likely
winners of a streamed one, ahead of that one's remaining shards - and each job's own
shards keep their order (the first shard holds the heavy rewrite dealt first).

A shard is queued at the actor that made its parent (whose replay cache holds the parent's
proc), but a free actor does not wait for its own queue alone: it takes the most urgent
shard waiting for any busy actor when that one goes ahead of everything in its own queue
(``source``). On SGEMM 256 (Zen 4) a round's cheap first part waited 10-15 s behind a
costly second part on one actor while the other ran the root's least promising shards,
and nothing was measured meanwhile; rebuilding a parent elsewhere costs a second or two.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

T = TypeVar("T")

#: A waiting shard's place in line: (priority, minus its submission number, position in its job).
Key = tuple[float, int, int]


class ShardQueue(Generic[T]):
    """Waiting shards, each an opaque item, taken lowest priority first."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, T]] = []
        self._submissions = itertools.count()

    def push_job(self, priority: float, shards: list[T], submission: int | None = None) -> None:
        """Queue one job's shards (in the order they are to run) at ``priority``.
        ``submission``: the job's number on a scale several queues share (one job's shards
        in two queues then share it, and ``source`` compares queues); by default this
        queue's own count."""
        number = next(self._submissions) if submission is None else submission
        submission = -number  # later submissions sort first among equals
        for position, shard in enumerate(shards):
            heapq.heappush(self._heap, (priority, submission, position, shard))

    def pop(self) -> T:
        """The shard to run next (``IndexError`` when none waits)."""
        return heapq.heappop(self._heap)[3]

    def head(self) -> Key | None:
        """The place in line of the shard ``pop`` would give, or None when none waits."""
        if not self._heap:
            return None
        priority, submission, position, _ = self._heap[0]
        return priority, submission, position

    def clear(self) -> None:
        """Forget every waiting shard."""
        self._heap.clear()

    def __len__(self) -> int:
        return len(self._heap)

    def __iter__(self) -> Iterator[T]:
        """The waiting shards, in no particular order."""
        return (entry[3] for entry in self._heap)


def source(free: int, queues: Mapping[int, ShardQueue[T]], running: set[int]) -> int | None:
    """The queue the free actor ``free`` takes its next shard from, or None when nothing
    waits that it should run: its own queue, unless a busy actor's queue (one in
    ``running``) holds a shard that goes ahead of everything in it - then the most urgent
    such queue. An idle actor's queue is left to that actor: it runs its own next."""
    own = queues.get(free)
    best, best_key = (free, own.head()) if own else (None, None)
    for index, queue in queues.items():
        if index == free or index not in running:
            continue
        key = queue.head()
        if key is not None and (best_key is None or key[:2] < best_key[:2]):
            best, best_key = index, key
    return best
