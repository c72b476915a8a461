"""A search that spans a real two-node Ray cluster on this machine (``ray start``, one raylet
per node; ``schedsearch.testing.local_cluster``), and what happens when a node dies.

The second node runs in network, PID and mount namespaces of its own, joined to the head
over a veth pair, where the machine allows it (root with ``ip netns``: the test id says
``netns``); else on loopback with its own ports (``loopback``). Each node has its own
schedsearch cache, so a kernel built on one node exists only there. The head gets one CPU
for builds and the second node one, so builds land on both. A node may run on cores of its
own (``LocalCluster``'s ``cores``), checked on a cluster of its own.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import EXAMPLES, REPO

from schedsearch.core import MachineInfo
from schedsearch.testing.local_cluster import Isolation, LocalCluster, netns_available

pytestmark = [pytest.mark.slow, pytest.mark.ray]

#: Decided once, by trying (``SCHEDSEARCH_TEST_ISOLATION=loopback`` forces the fallback): the test id names it.
ISOLATION = Isolation(
    os.environ.get("SCHEDSEARCH_TEST_ISOLATION") or (Isolation.NETNS if netns_available() else Isolation.LOOPBACK)
)
#: The second node's own core.
SECOND_CORES = frozenset({max(os.sched_getaffinity(0))})


@pytest.fixture(scope="module", params=[ISOLATION], ids=str)
def cluster(request: pytest.FixtureRequest) -> Iterator[tuple[LocalCluster, dict[str, str]]]:
    """A head (1 CPU) and a node ``second`` (1 CPU); their Ray node ids by name. Every
    process, namespace, link and directory is removed after the module, pass or fail."""
    env_path = os.environ.get("PYTHONPATH", "")
    # The nodes' workers import schedsearch from the same tree as this test run.
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "src"), env_path) if p)
    made = LocalCluster.start(head_cpus=1, isolation=request.param)
    try:
        made.add_node("second", cpus=1)
        ids = made.wait_for_nodes(2)
        yield made, ids
    finally:
        made.close()
        os.environ["PYTHONPATH"] = env_path
        if not env_path:
            del os.environ["PYTHONPATH"]


def _affinity(pid: int) -> frozenset[int] | None:
    """The CPUs process ``pid`` may run on (None: it is gone)."""
    try:
        return frozenset(os.sched_getaffinity(pid))
    except ProcessLookupError:
        return None


def _descendants(pid: int) -> list[int]:
    """Every live process below ``pid``, from ``/proc``."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def test_a_node_given_cores_of_its_own_runs_on_them_alone() -> None:
    # A cluster of its own: the search tests' second node shares the cores (a node pinned to
    # one core of a machine busy with other tests times its kernels too slowly to be fair).
    env_path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "src"), env_path) if p)
    made = LocalCluster.start(head_cpus=1, isolation=ISOLATION)
    try:
        second = made.add_node("second", cpus=1, cores=SECOND_CORES)
        made.wait_for_nodes(2)
        below = _descendants(second.process.pid)
        assert len(below) >= 2  # the raylet and the processes it started
        assert {_affinity(pid) for pid in [second.process.pid, *below]} - {None} == {SECOND_CORES}
        assert made.head is not None
        assert _affinity(made.head.process.pid) == frozenset(os.sched_getaffinity(0))  # the head: not pinned
    finally:
        made.close()
        os.environ["PYTHONPATH"] = env_path
        if not env_path:
            del os.environ["PYTHONPATH"]


def _rows(db: Path) -> list[dict[str, object]]:
    """The measured candidates as the database holds them (read only, beside the writer)."""
    if not db.exists():
        return []
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as raw:
            raw.row_factory = sqlite3.Row
            query = (
                "SELECT id, status, error, node, built_node, machine, machine_fingerprint, measured_unix,"
                " reused_candidate_id FROM candidates WHERE status != 'pending'"
            )
            return [dict(r) for r in raw.execute(query)]
    except sqlite3.OperationalError:  # the tables are not made yet
        return []


def test_a_search_spans_both_nodes_and_survives_losing_one(cluster, tmp_path: Path) -> None:
    made, ids = cluster
    head, second = ids["head"], ids["second"]
    db, events = tmp_path / "nodes.db", tmp_path / "events.jsonl"
    argv = [sys.executable, "-m", "schedsearch", "run", str(EXAMPLES / "matmul.py"), "--proc", "sgemm",
            "--size", "M=32,N=32,K=32", "--address", made.address, "--workers", "2", "--budget", "60",
            "--no-early-stop", "--db", str(db), "--events", str(events), "--json"]
    started, start_unix = time.monotonic(), time.time()
    run = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Let both nodes build and time a few kernels, then take the second node away
        # mid-search, as a machine that loses power.
        killed_at = None
        while time.monotonic() - started < 240 and run.poll() is None:
            nodes = Counter(r["node"] for r in _rows(db))
            if nodes[second] >= 5 and nodes[head] >= 5:
                made.kill(made.nodes[0])
                killed_at = time.time()
                break
            time.sleep(0.5)
        out, err = run.communicate(timeout=400)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert killed_at is not None, (
        f"the second node never timed 5 kernels before the search ended: {Counter(r['node'] for r in _rows(db))}")
    assert run.returncode == 0, err[-3000:]
    summary = json.loads(out)
    assert summary["status"] == "completed"

    rows = _rows(db)
    timed = [r for r in rows if r["node"] is not None]
    before = [r for r in timed if r["measured_unix"] < killed_at]
    # Measured after the kill and 2 s of grace (a result on its way back as the node died).
    after = [r for r in timed if r["measured_unix"] > killed_at + 2]
    per_node = {name: sum(r["node"] == node for r in before) for name, node in ids.items()}
    failures = [(r["status"], str(r["error"])[:200]) for r in rows if r["status"] != "ok"]
    first_after = min((r["measured_unix"] for r in timed if r["measured_unix"] > killed_at), default=None)
    print(f"isolation {made.isolation}; killed {killed_at - start_unix:.1f} s after the run began; before the kill:"
          f" {per_node}; after it: {len(after)} on the head, the first {(first_after or killed_at) - killed_at:.1f} s"
          f" after the kill; {len(rows)} measured in all; {summary['candidates']}; failures: {failures}")

    # Both nodes built and timed candidates, and each was timed on the node that built it.
    assert per_node["second"] >= 5 and per_node["head"] >= 5
    assert all(r["built_node"] == r["node"] for r in timed), [r for r in timed if r["built_node"] != r["node"]]
    # Each result names the node that timed it and that node's machine.
    machine_of = {r["node"]: json.loads(str(r["machine"])) for r in timed}
    assert set(machine_of) == {head, second}
    if made.isolation is Isolation.NETNS:  # the second node has a host name of its own
        assert machine_of[second]["hostname"] == f"{machine_of[head]['hostname']}-second"
    assert {MachineInfo.from_json(m).fingerprint for m in machine_of.values()} == {
        r["machine_fingerprint"] for r in timed
    } == {MachineInfo.from_json(summary["machine"]).fingerprint}  # one machine under both nodes
    # The search went on without the second node: what was measured later was measured by the
    # head (an expander that lived on the lost node starts again only once Ray has declared the
    # node dead, about 15 s after the kill here, so fewer may come in than before it).
    assert len(after) >= 3 and {r["node"] for r in after} == {head}
    # Nothing was lost or blamed on a candidate: no failure names a worker or a node.
    assert not [f for f in failures if "worker" in f[1] or "node" in f[1].lower()], failures
    assert summary["candidates"]["failed"] == len(failures)
    # The events log says the same of each measurement it reports.
    evaluated = [json.loads(line) for line in events.read_text().splitlines()]
    records = [e["record"] for e in evaluated if e["kind"] == "evaluated" and e["record"]]
    assert {rec["node"] for rec in records if rec["node"]} == {head, second}
    assert all(rec["built_node"] == rec["node"] for rec in records if rec["node"])


_DRIVER = textwrap.dedent("""
    import json, sys, time
    from schedsearch.core import BenchConfig, ExpandOptions, Job, JobKind
    from schedsearch.evaluate.ray_backend import RayExecutor
    from schedsearch.transforms import Expander, load_workload, root_candidate

    address, second, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    workload = load_workload(sys.argv[4], "sgemm", {"M": 32, "N": 32, "K": 32})
    root = root_candidate(workload)
    # Timing takes longer than a build, so each runner has kernels queued when the node dies.
    bench = BenchConfig(warmup_seconds=0.001, min_sample_seconds=0.02, samples=15)
    ex = RayExecutor(Expander, ExpandOptions(), bench, workers=2, address=address)
    children = [c for e in ex.expand(workload, [root]) for c in e.children][:n]
    ex.submit(workload, root, [Job(i, JobKind.EVALUATE, (c,)) for i, c in enumerate(children)])
    results, told = {}, False
    deadline = time.monotonic() + 600
    while ex.pending() and time.monotonic() < deadline:
        for r in ex.poll(0.5):
            for m in r.measurements:
                results[r.job.id] = {"status": m.status.value, "error": m.error, "node": m.node,
                                     "built_node": m.built_node, "at": time.time()}
        if not told and sum(m["node"] == second for m in results.values()) >= 2:
            print("KILL", flush=True)  # the test kills the second node now; jobs are still in flight
            told = True
    print(json.dumps({"submitted": len(children), "results": results, "requeued": ex.requeued,
                      "reasons": ex._lost.reasons[:5]}), flush=True)
    ex.close()
""")


def test_jobs_in_flight_on_a_lost_node_are_done_elsewhere(cluster, tmp_path: Path) -> None:
    """The executor alone: evaluations submitted at once, the node that is building and
    timing some of them killed, and every one still comes back measured, none blamed."""
    made, ids = cluster
    if all(n.killed for n in made.nodes):  # the search test above took the second node away
        made.add_node("third", cpus=1)
        ids = made.wait_for_nodes(2)
    head, other = ids["head"], next(node for name, node in ids.items() if name != "head")
    driver = subprocess.Popen(
        [sys.executable, "-c", _DRIVER, made.address, other, "24", str(EXAMPLES / "matmul.py")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert driver.stdout is not None
        line = driver.stdout.readline()
        assert line.strip() == "KILL", line + driver.stderr.read()[-3000:]
        made.kill(next(n for n in made.nodes if not n.killed))
        killed_at = time.time()
        out, err = driver.communicate(timeout=600)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.communicate()
    assert driver.returncode == 0, err[-3000:]
    # Ray's own messages may share the driver's stdout: the report is its line.
    report = json.loads(next(line for line in reversed(out.splitlines()) if line.startswith('{"submitted"')))
    results = report["results"]
    print(f"isolation {made.isolation}; requeued {report['requeued']}: {report['reasons']}; "
          f"by node: {Counter('head' if m['node'] == head else 'other' for m in results.values())}")
    # Nothing lost: one measurement per job, none blamed on the candidate.
    assert len(results) == report["submitted"] == 24
    assert all(m["status"] == "ok" for m in results.values()), {
        job: (m["status"], m["error"][-500:], "head" if m["node"] == head else "other", m["at"] - killed_at)
        for job, m in results.items() if m["status"] != "ok"}
    assert all(m["node"] == m["built_node"] for m in results.values())
    assert sum(m["node"] == other for m in results.values()) >= 2
    assert all(m["node"] == head for m in results.values() if m["at"] > killed_at + 2)
    # The runner of the lost node had kernels queued: they went back and were built and timed again.
    assert report["requeued"] >= 1
