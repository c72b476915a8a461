"""The expansion shards waiting for the expander actors, and which of them goes next.

Standard library only: the Ray executor keeps one ``ShardQueue`` per actor and takes from
it whenever the actor is free. An expansion job carries a ``priority`` (lower goes first:
its parent's time, ``ranking.expansion_priority``); among equal
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
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Generic, TypeVar

T = TypeVar("T")

#: Shards per expander actor of an expansion the search waits for (``Job.stream``): the
#: first are back after a sixth of the time, and an actor is soon free for an expansion
#: asked for meanwhile; a worker proposes the parent's rewrites once for all its shards
#: (``Expander._proposal``).
STREAM_SHARDS_PER_ACTOR = 6
#: Shards per expander actor, ahead of those, that hold one heavy rewrite each (a register
#: tile: ``expand.dealt``) when a stream job asks for every heavy rewrite first
#: (``Job.all_heavy_first``: the model leads): every register tile of the root is then made
#: before its cheap rewrites. The rules propose their best guess first, but it is not always
#: the best: conv1d_mc's fastest tile on Zen 3 (5 rows, 331 us) was the fourth proposed,
#: dealt into the sixth of ten shards, and came back 12-23 s in. Not for every stream job:
#: with the model off or not leading, the cheap children measured as they come keep the
#: builders busy, and all tiles first cut SGEMM 256's 60-s throughput from 3.31 to 2.76 a second.
STREAM_LEADS_PER_ACTOR = 4

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


#: Children whose expander actor is remembered: a few rounds' worth (each actor caches 256 procs).
HOMES_KEPT = 4096


class Homes:
    """The expander actor that made each recent child: its replay cache holds the child's
    proc, so expanding the child there replays nothing; elsewhere a register-tiled parent
    takes seconds of Exo to rebuild (about a third of all expansion time)."""

    def __init__(self, kept: int = HOMES_KEPT) -> None:
        self._home: OrderedDict[str, int] = OrderedDict()
        self._kept = kept
        self._next = 0

    def remember(self, children: Iterable[str], actor: int) -> None:
        """``actor`` made the children of these fingerprints (the oldest are forgotten)."""
        for fingerprint in children:
            self._home[fingerprint] = actor
            self._home.move_to_end(fingerprint)
        while len(self._home) > self._kept:
            self._home.popitem(last=False)

    def actors_for(self, parent: str, actors: int, busy: set[int], shards: int, spread: int | None = None) -> list[int]:
        """The actors (indices below ``actors``) that expand the ``shards`` shards of the
        parent of fingerprint ``parent``, in turn over ``spread`` of them (all shards' count
        by default): first the one that made the parent (it replays nothing) unless it is
        ``busy`` while another is idle, an idle actor's replay costing less than leaving its
        core to wait; then the next ones."""
        home = self._home.get(parent)
        if home is None or home >= actors or (home in busy and len(busy) < actors):
            idle = [i for i in range(actors) if i not in busy] or list(range(actors))
            home = idle[self._next % len(idle)]
            self._next += 1
        spread = max(1, min(actors, spread if spread is not None else shards))
        return [(home + k % spread) % actors for k in range(shards)]
