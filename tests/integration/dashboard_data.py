"""Results databases for the dashboard's tests, written through the store's own API.

- ``searched_db``: two real (simulated-hardware) searches run by ``search.run_search`` on
  the fake executor, a search left running, and a search whose stored text is hostile
  markup (``HOSTILE``), as a tampered or unlucky database could hold, and whose candidates
  were timed on two cluster nodes (``NODES``).
- ``big_db``: one search of ``n`` candidates with kilobytes of C each, for timing pages.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from pathlib import Path

from schedsearch.core import (
    Candidate,
    Counters,
    Measurement,
    Rewrite,
    RewriteKind,
    Schedule,
    SearchConfig,
    SearchStatus,
    Status,
    Timing,
    sha256_text,
)
from schedsearch.search import make_strategy, run_search
from schedsearch.store import open_store
from schedsearch.testing.builders import make_config, make_machine, make_workload
from schedsearch.testing.fake_executor import FakeExecutor
from schedsearch.testing.fake_tree import FakeTree, fake_root, fake_workload

#: Markup a page must show as text, never as markup.
HOSTILE = {
    "path": "/tmp/<script>alert(1)</script>/kernel.py",
    "step": "<script>alert(2)</script> #0",
    "c": "/* </pre><script>alert(3)</script> */\nvoid kernel(void) {}\n",
    "proc": "def evil():\n    s = '<script>alert(4)</script>'\n",
    "error": "build_error: <img src=x onerror=alert(5)>\nline 2",
    "host": "<script>alert(6)</script>",  # the host name of the second node that timed its candidates
}
#: The Ray nodes (56 hex digits) that timed the hostile search's candidates: two, so its pages show nodes.
NODES = ("a1" * 28, "b2" * 28)
#: What no page may contain raw.
RAW_MARKUP = ("<script>alert", "<img src=x")


@dataclass(frozen=True)
class SearchedDb:
    path: Path
    searches: tuple[int, int]  # the two completed searches
    running: int
    hostile: int
    hostile_child: int  # a hostile candidate with a parent (diff, step)
    hostile_failed: int


def _timing(seconds: float) -> Timing:
    return Timing(median=seconds, min=seconds * 0.97, q1=seconds * 0.99, q3=seconds * 1.02, samples=(seconds,) * 5)


def _candidate(schedule: Schedule, c: str, proc: str, parent: Candidate | None) -> Candidate:
    return Candidate(schedule, c, sha256_text(c), proc, parent=None if parent is None else parent.fingerprint,
                     depth=len(schedule.steps))


def searched_db(path: Path) -> SearchedDb:
    """The database described in the module's docstring, at ``path``."""
    store = open_store(str(path))
    try:
        ids = []
        for seed, count in ((0, 60), (1, 40)):
            cfg = SearchConfig(max_seconds=None, max_candidates=count, seed=seed)
            executor = FakeExecutor(FakeTree(failure_rate=0.15, seed=seed))
            ids.append(run_search(fake_workload(), fake_root(), make_strategy(cfg), executor, store, cfg).search_id)

        running = store.create_search(fake_workload("live_gemm"), make_config(), make_machine())
        root = fake_root()
        store.add_candidate(running, root)
        store.record_measurement(running, Measurement(root.fingerprint, Status.OK, _timing(2e-3), measured_at=0.5),
                                 1.0, 1.0)
        store.update_search(running, baseline_seconds=2e-3, counters=Counters(evaluated=1, ok=1))

        evil = store.create_search(make_workload("evil", path=HOSTILE["path"]), make_config(), make_machine())
        root = _candidate(Schedule(), "/* evil root */\n", "def evil():\n    pass\n", None)
        child = _candidate(Schedule((Rewrite.make(RewriteKind.SPLIT, HOSTILE["step"], factor=4),)), HOSTILE["c"],
                           HOSTILE["proc"], root)
        failed = _candidate(Schedule((Rewrite.make(RewriteKind.UNROLL, HOSTILE["step"]),)), "/* failed */\n",
                            HOSTILE["proc"] + "# failed\n", root)
        records = [store.add_candidate(evil, c) for c in (root, child, failed)]
        for c, seconds, at, node, host in ((root, 1e-3, 0.1, NODES[0], "vm-head"),
                                           (child, 4e-4, 0.2, NODES[1], HOSTILE["host"])):
            machine = dataclasses.replace(make_machine(), hostname=host, cpu_model=f"cpu of {host}")
            store.record_measurement(evil, Measurement(c.fingerprint, Status.OK, _timing(seconds), measured_at=at,
                                                       machine=machine, node=node, built_node=node),
                                     2.0, 1e-3 / seconds)
        store.record_measurement(evil, Measurement(failed.fingerprint, Status.BUILD_ERROR, error=HOSTILE["error"],
                                                   measured_at=0.3, built_node=NODES[1]), None, None)
        store.update_search(evil, status=SearchStatus.COMPLETED, baseline_seconds=1e-3, elapsed_seconds=0.4,
                            counters=Counters(evaluated=3, ok=2, failed=1), best_candidate_id=records[1].id,
                            best_seconds=4e-4, best_speedup=2.5)
    finally:
        store.close()
    return SearchedDb(path, (ids[0], ids[1]), running, evil, records[1].id, records[2].id)


def big_db(path: Path, n: int = 5000, c_bytes: int = 8000, seed: int = 0) -> int:
    """One completed search of ``n`` candidates (a random tree, 12 levels at most, one in
    ten failing) at ``path``; returns its id."""
    rng = random.Random(seed)
    filler = "    for (int i = 0; i < 64; i++) { C[i] += A[i] * B[i]; }\n" * (c_bytes // 56)
    store = open_store(str(path))
    try:
        sid = store.create_search(make_workload("big"), make_config(), make_machine())
        nodes: list[Candidate] = []
        best = (None, float("inf"))
        for i in range(n):
            parent = None if i == 0 else rng.choice(nodes[-400:] if rng.random() < 0.7 else nodes)
            if parent is not None and parent.depth >= 12:
                parent = nodes[0]
            steps = () if parent is None else (
                *parent.schedule.steps, Rewrite.make(RewriteKind.SPLIT, f"i{i} #0", factor=2 + i % 7))
            c = f"/* candidate {i} */\nvoid kernel(float *A, float *B, float *C) {{\n{filler}}}\n"
            cand = _candidate(Schedule(steps), c, f"def big():\n    # {i}\n" + "    pass\n" * 20, parent)
            record = store.add_candidate(sid, cand)
            nodes.append(cand)
            if i and rng.random() < 0.1:
                m = Measurement(cand.fingerprint, Status.RUN_ERROR, error=f"crash {i}", measured_at=i * 0.05)
                store.record_measurement(sid, m, None, None)
                continue
            seconds = 1e-3 * (0.2 + rng.random()) if i else 1e-3
            m = Measurement(cand.fingerprint, Status.OK, _timing(seconds), measured_at=i * 0.05)
            store.record_measurement(sid, m, 1.0, 1e-3 / seconds)
            if seconds < best[1]:
                best = (record.id, seconds)
        store.update_search(sid, status=SearchStatus.COMPLETED, baseline_seconds=1e-3, elapsed_seconds=n * 0.05,
                            counters=Counters(evaluated=n, ok=n - n // 10, failed=n // 10),
                            best_candidate_id=best[0], best_seconds=best[1], best_speedup=1e-3 / best[1])
    finally:
        store.close()
    return sid
