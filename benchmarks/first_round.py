"""Does history of other sizes help a search from its first round? (a measurement, not a test)

A search with the cost model on (``rank``) measures the root's children in predicted order.
With an empty store it predicts by the analytic estimate alone; with a store that holds
earlier searches made on this machine (of other sizes, other procs), its trees are trained
on those before the first child is measured. For each seed, one search of the kernel with an
empty database (*cold*) and one in a copy of ``--history`` (*history*), both without a warm
start (so the model is all that differs) and each with an empty build cache. Reported for
the root's children of each search (``tree --json``):

- the rank correlation of their predicted speedups with their measured times;
- how much slower than the fastest of them the first one measured is (first pick);
- when the fastest of them was measured (seconds of the search's own time), and how many
  root children were measured by then.

    .venv/bin/python benchmarks/first_round.py --history DB KERNEL_ARGS... [--seeds 3] [--budget 30]

e.g. ``--history imatmul.db examples/matmul.py --proc matmul_i8`` after searches of
``examples/imatmul.py`` at 24 and 32 into ``imatmul.db``. Run it on a quiet machine and name the CPU
(printed first) next to every number.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from schedsearch.search.ranking import spearman

sys.path.insert(0, str(Path(__file__).parent))
from search_efficiency import cpu_name, search  # noqa: E402


@dataclass(frozen=True)
class FirstRound:
    """The root's children of one search."""

    setting: str  # cold | history
    seed: int
    children: int  # root children measured ok
    spearman: float | None  # predicted speedup against measured speed
    first_pick: float  # the first measured child's time over the fastest child's, minus 1
    best_at: float  # seconds into the search when the fastest child was measured
    best_after: int  # root children measured by then (itself included)


def first_round(nodes: list[dict], setting: str, seed: int) -> FirstRound:
    """What the search made of the root's children."""
    root = next(n for n in nodes if n["parent_id"] is None)
    kids = [n for n in nodes if n["parent_id"] == root["candidate_id"] and n["status"] == "ok"
            and n["seconds"] and n["measured_at"] is not None and n.get("reused_from") is None]
    if not kids:
        raise SystemExit(f"{setting} seed {seed}: no root child was measured")
    kids.sort(key=lambda n: n["measured_at"])
    fastest = min(kids, key=lambda n: n["seconds"])
    scored = [n for n in kids if n["predicted_speedup"]]
    rho = spearman([-math.log(n["predicted_speedup"]) for n in scored], [math.log(n["seconds"]) for n in scored]) \
        if len(scored) >= 3 else None
    return FirstRound(setting, seed, len(kids), rho, kids[0]["seconds"] / fastest["seconds"] - 1.0,
                      fastest["measured_at"], kids.index(fastest) + 1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--history", type=Path, required=True, help="a database of earlier searches on this machine")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--budget", type=float, default=30.0, help="seconds per search [30]")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", type=Path, help="write every search's first round here (JSON)")
    args, kernel = p.parse_known_args()
    if not args.history.is_file():
        raise SystemExit(f"--history {args.history}: no such database")
    print(f"CPU: {cpu_name()}", flush=True)
    rounds: list[FirstRound] = []
    with tempfile.TemporaryDirectory(prefix="first-round-") as tmp:
        for seed in range(args.seeds):
            for setting in ("cold", "history"):
                db = Path(tmp) / f"{setting}-{seed}.db"
                if setting == "history":
                    shutil.copyfile(args.history, db)
                nodes = search(tuple(kernel), "rank", seed, args.budget, args.workers, db)["tree"]
                r = first_round(nodes, setting, seed)
                rounds.append(r)
                rho = "n/a" if r.spearman is None else f"{r.spearman:+.2f}"
                print(f"{setting:8s} seed {seed}: {r.children} root children, rho {rho}, first pick "
                      f"{r.first_pick:+.0%}, fastest measured at {r.best_at:.1f} s (#{r.best_after})", flush=True)
    for setting in ("cold", "history"):
        mine = [r for r in rounds if r.setting == setting]
        rhos = [r.spearman for r in mine if r.spearman is not None]
        print(f"{setting:8s} median: rho {statistics.median(rhos) if rhos else float('nan'):+.2f}, first pick "
              f"{statistics.median(r.first_pick for r in mine):+.0%}, fastest at "
              f"{statistics.median(r.best_at for r in mine):.1f} s (#{statistics.median(r.best_after for r in mine):g})")
    if args.out:
        args.out.write_text(json.dumps([asdict(r) for r in rounds], indent=2))


if __name__ == "__main__":
    main()
