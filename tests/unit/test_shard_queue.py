"""Which waiting expansion shard an expander actor runs next (``evaluate.shard_queue``), and
the priority the search gives each expansion (``ranking.expansion_priority``)."""

from __future__ import annotations

import math

import pytest

from schedsearch.core import CandidateRecord, JobKind, Schedule, SearchConfig, Status
from schedsearch.evaluate.shard_queue import ShardQueue, source
from schedsearch.search import make_strategy, run_search
from schedsearch.search.ranking import expansion_priority
from schedsearch.store import InMemoryStore
from schedsearch.testing.builders import make_timing
from schedsearch.testing.fake_executor import FakeExecutor
from schedsearch.testing.fake_tree import FakeTree, fake_root, fake_workload


def _drain(queue: ShardQueue[str]) -> list[str]:
    out = []
    while queue:
        out.append(queue.pop())
    return out


def test_lower_priority_goes_first_and_each_jobs_shards_keep_their_order() -> None:
    q: ShardQueue[str] = ShardQueue()
    q.push_job(5.0, ["root/0", "root/1", "root/2"])
    q.push_job(1.0, ["tile/0", "tile/1"])
    q.push_job(3.0, ["other/0"])
    assert len(q) == 6
    assert _drain(q) == ["tile/0", "tile/1", "other/0", "root/0", "root/1", "root/2"]
    with pytest.raises(IndexError):
        q.pop()


def test_among_equal_priorities_the_latest_submitted_goes_first() -> None:
    q: ShardQueue[str] = ShardQueue()
    q.push_job(2.0, ["a/0", "a/1"])
    q.push_job(2.0, ["b/0", "b/1"])
    assert q.pop() == "b/0"
    q.push_job(2.0, ["c/0"])
    assert _drain(q) == ["c/0", "b/1", "a/0", "a/1"]
    q.push_job(1.0, ["d/0"])
    q.clear()
    assert not q and list(q) == []


def _queues(*jobs: tuple[int, float, list[str], int]) -> dict[int, ShardQueue[str]]:
    """One queue per actor; ``jobs``: (actor, priority, shards, the job's submission number)."""
    queues: dict[int, ShardQueue[str]] = {}
    for actor, priority, shards, number in jobs:
        queues.setdefault(actor, ShardQueue()).push_job(priority, shards, number)
    return queues


def test_a_free_actor_takes_a_busy_actors_more_urgent_shard_before_its_own_less_urgent_ones() -> None:
    # Actor 0 holds the root's remaining shards (slow parent); actor 1 is busy with a costly
    # part and a cheap first part of a fast parent waits behind it.
    queues = _queues((0, 9.0, ["root/3", "root/4"], 0), (1, 1.0, ["deferred/0"], 1), (1, 1.5, ["first/0"], 2))
    queues[1].pop()  # actor 1 runs the deferred part
    assert source(0, queues, running={1}) == 1
    assert queues[1].pop() == "first/0"
    assert source(0, queues, running={1}) == 0  # nothing more urgent elsewhere: its own


def test_an_actor_keeps_its_own_shards_on_a_tie_and_leaves_an_idle_actors_queue_to_it() -> None:
    queues = _queues((0, 2.0, ["a/0"], 0), (1, 2.0, ["a/1"], 0))
    # The same job's shards on both actors: equal place in line, each runs its own.
    assert source(0, queues, running={1}) == 0
    queues = _queues((1, 1.0, ["b/0", "b/1"], 1))
    assert source(0, queues, running=set()) is None  # actor 1 is idle: it takes b/0 itself
    assert source(0, queues, running={1}) == 1  # once it runs, actor 0 helps with b/1
    assert source(0, {}, running={1}) is None


def test_a_newer_job_of_equal_priority_is_taken_from_a_busy_actor() -> None:
    queues = _queues((0, 3.0, ["old/0"], 0), (1, 3.0, ["new/0"], 1))
    assert source(0, queues, running={1}) == 1


def _record(seconds: float | None, depth: int) -> CandidateRecord:
    timing = make_timing(seconds) if seconds is not None else None
    return CandidateRecord(id=1, search_id=1, parent_id=None if depth == 0 else 0, depth=depth, schedule=Schedule(),
                           fingerprint="fp", status=Status.OK, timing=timing)


def test_the_faster_parent_goes_first_whatever_its_depth_and_an_untimed_one_last() -> None:
    tile = _record(3.590e-3, depth=1)
    packed_child = _record(2.890e-3, depth=2)
    root = _record(0.305, depth=0)
    assert expansion_priority(packed_child) < expansion_priority(tile) < expansion_priority(root)
    assert math.isclose(expansion_priority(tile), math.log(3.590e-3))
    assert expansion_priority(_record(None, depth=1)) == math.inf


class _Recording(FakeExecutor):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.jobs = []

    def submit(self, workload, reference, jobs) -> None:
        self.jobs += [j for j in jobs if j.kind is JobKind.EXPAND]
        super().submit(workload, reference, jobs)


def test_the_search_gives_each_expansion_its_parents_priority() -> None:
    tree = FakeTree(moves=6, branching=4, failure_rate=0.0, seed=3)
    ex = _Recording(tree)
    store = InMemoryStore()
    cfg = SearchConfig(max_seconds=None, max_candidates=40, seed=1)
    outcome = run_search(fake_workload(), fake_root(tree.moves), make_strategy(cfg), ex, store, cfg)
    by_fp = {r.fingerprint: r for r in store.candidates(outcome.search_id)}
    assert len(ex.jobs) >= 3
    for job in ex.jobs:
        parent = by_fp[job.candidates[0].fingerprint]
        if parent.depth == 0 and job.priority == math.inf:
            continue  # the root's first expansion is asked while the root is still being measured
        assert job.priority == expansion_priority(parent)
    assert len({job.priority for job in ex.jobs if job.priority != math.inf}) > 1
