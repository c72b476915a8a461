"""Candidates evaluated per second by one search on one Ray node against two nodes.

For each node count, a cluster is started on this machine the way a user starts a real one
(``ray start``, one raylet per node; ``schedsearch.testing.local_cluster``: the second node in
network, PID and mount namespaces of its own where the machine allows it, else on loopback),
each node with ``--cpus-per-node`` CPUs for builds and its own cache directory; then
``schedsearch run --address`` searches the same workload for the same wall-time budget, with
the early stop off, and the candidates it evaluated are divided by its own elapsed seconds
(starting Ray and the workers is not counted). The database says which node timed each.

On one machine the nodes share its cores unless ``--disjoint-cores`` gives each node cores of
its own (``LocalCluster``'s ``cores``: the node's raylet and every process it starts run on
them alone; the head on the last core, the second node on the one before): one node of one
core against two such nodes, as one small machine against two. The driver (``schedsearch
run``, which only schedules and writes the database) is not pinned. Without it, two nodes of
one CPU each get two build slots where one node gets one, on the same cores: the executor's
overhead and scaling across raylets, nothing more.

Run (as root for network namespaces; takes about ``2 * repeats * (budget + 20)`` seconds)::

    .venv/bin/python benchmarks/multinode.py [--budget 30] [--cpus-per-node 1] [--repeats 1]
        [--example examples/matmul.py --proc sgemm --size M=64,N=64,K=64] [--isolation auto]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from schedsearch.testing.local_cluster import Isolation, LocalCluster

sys.path.insert(0, str(Path(__file__).parent))
from search_efficiency import cpu_name

REPO = Path(__file__).resolve().parents[1]


def one_search(nodes: int, args: argparse.Namespace, isolation: Isolation | None) -> dict[str, object]:
    """Start a cluster of ``nodes`` nodes, run one search on it, stop it; what it measured."""
    cores = sorted(os.sched_getaffinity(0))
    if args.disjoint_cores and len(cores) < nodes * args.cpus_per_node:
        raise SystemExit(f"--disjoint-cores: {nodes} nodes of {args.cpus_per_node} core(s) need more than {len(cores)}")

    def own(n: int) -> frozenset[int] | None:
        """Node ``n``'s cores (the head's are the last ones), or None: shared."""
        if not args.disjoint_cores:
            return None
        k = args.cpus_per_node
        return frozenset(cores[len(cores) - (n + 1) * k:len(cores) - n * k])

    with tempfile.TemporaryDirectory(prefix="ssmn") as tmp, LocalCluster.start(
        head_cpus=args.cpus_per_node, isolation=isolation, head_cores=own(0)
    ) as cluster:
        for n in range(1, nodes):
            cluster.add_node(f"node{n}", cpus=args.cpus_per_node, cores=own(n))
        ids = cluster.wait_for_nodes(nodes)
        db = Path(tmp) / "bench.db"
        argv = [sys.executable, "-m", "schedsearch", "run", str(args.example), "--proc", args.proc,
                "--size", args.size, "--address", cluster.address, "--workers", str(args.workers),
                "--budget", str(args.budget), "--no-early-stop", "--db", str(db), "--json"]
        run = subprocess.run(argv, capture_output=True, text=True, timeout=args.budget * 4 + 300, check=False)
        if run.returncode != 0:
            raise SystemExit(f"the search on {nodes} node(s) failed: {run.stderr.strip()[-2000:]}")
        out = json.loads(run.stdout)
        with sqlite3.connect(db) as raw:
            per_node = raw.execute(
                "SELECT node, count(*), avg(build_seconds), avg(run_seconds), min(measured_unix) - s.started_at"
                " FROM candidates c JOIN searches s ON s.id = c.search_id"
                " WHERE node IS NOT NULL AND reused_candidate_id IS NULL GROUP BY node").fetchall()
        names = {node: name for name, node in ids.items()}
        timed = Counter({node: count for node, count, *_ in per_node})
        evaluated = int(out["candidates"]["evaluated"])
        elapsed = float(out["elapsed_seconds"])
        return {
            "nodes": nodes,
            "isolation": str(cluster.isolation),
            "evaluated": evaluated,
            "elapsed_seconds": elapsed,
            "per_second": evaluated / elapsed if elapsed > 0 else 0.0,
            "timed_by": {names.get(node, node[:8]): count for node, count in sorted(timed.items())},
            # Per node: mean seconds to build and to verify and time a kernel, and when (seconds
            # after the search began) the node's first measurement came in.
            "per_node": {names.get(node, node[:8]): {"build": round(b, 3), "run": round(r, 3), "first": round(f, 1)}
                         for node, _, b, r, f in per_node},
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=30.0, help="seconds of search per run")
    parser.add_argument("--cpus-per-node", type=int, default=1, help="CPUs each node offers for builds")
    parser.add_argument("--workers", type=int, default=2, help="expander actors (schedsearch run --workers)")
    parser.add_argument("--repeats", type=int, default=1, help="runs per node count (the median is reported)")
    parser.add_argument("--example", type=Path, default=REPO / "examples" / "matmul.py")
    parser.add_argument("--proc", default="sgemm")
    parser.add_argument("--size", default="M=64,N=64,K=64")
    parser.add_argument("--isolation", choices=["auto", *[i.value for i in Isolation]], default="auto")
    parser.add_argument("--json", action="store_true", help="also print every run as a JSON line")
    parser.add_argument("--disjoint-cores", action="store_true",
                        help="each node on --cpus-per-node cores of its own (the nodes share no core)")
    args = parser.parse_args()
    isolation = None if args.isolation == "auto" else Isolation(args.isolation)
    # The nodes' workers import schedsearch from this tree, as the driver does.
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "src"), os.environ.get("PYTHONPATH")) if p)

    print(f"{cpu_name()}, {os.cpu_count()} cores; {args.proc}[{args.size}], budget {args.budget:g} s, "
          f"{args.cpus_per_node} CPU(s) per node" + (", on cores of its own" if args.disjoint_cores else ", sharing the cores"))
    rates: dict[int, list[float]] = {}
    for repeat in range(args.repeats):
        for nodes in (1, 2):
            result = one_search(nodes, args, isolation)
            rates.setdefault(nodes, []).append(float(result["per_second"]))  # type: ignore[arg-type]
            print(f"  run {repeat + 1}, {nodes} node(s) ({result['isolation']}): {result['evaluated']} evaluated in "
                  f"{result['elapsed_seconds']:.1f} s = {result['per_second']:.2f}/s; timed by {result['timed_by']}; "
                  f"{result['per_node']}")
            if args.json:
                print(json.dumps(result))
    one, two = statistics.median(rates[1]), statistics.median(rates[2])
    print(f"median candidates per second: 1 node {one:.2f}, 2 nodes {two:.2f}: {two / one if one else 0:.2f}x")


if __name__ == "__main__":
    main()
