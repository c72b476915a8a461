"""Warm starts and measurement reuse (a measurement, not a test).

For a kernel at two sizes (SGEMM 256 -> 512, or the multi-channel conv1d at N=512 ->
1024), on this machine, each search with an empty build cache:

1. *cold*: the large size searched from scratch (``--no-warm-start``, its own database)
   for ``--budget`` seconds;
2. *warm*: in a second database, a search of the small size (``--small-budget`` seconds),
   then the large size for ``--budget`` seconds with the warm start on (the default);
3. *re-run*: the large size once more in the second database (``--max-candidates``):
   how many candidates it measured that the database already held a measurement of.

Reported: the cold search's best search-time median, and for each search the time (the
search's own elapsed seconds, ``tree --json``'s ``measured_at``) and evaluations until it
first measured a candidate within 95% of that best speed; the warm search's time as a
share of the cold search's whole budget (the goal: <= 20%); the re-run's reused and
re-measured counts (the goal: 0 re-measured).

    .venv/bin/python benchmarks/warm_start.py [--kernel sgemm|conv1d_mc] [--budget 600]
        [--small-budget 120] [--warm-budget S] [--rerun-candidates 20] [--out results.json]

Run it on a quiet machine and name the CPU (printed first) next to every number.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import search_efficiency as eff  # noqa: E402  (the shared search driver and curve reading)

KERNELS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "sgemm": ((str(eff.EXAMPLES / "matmul.py"), "--proc", "sgemm", "--size", "M=256,N=256,K=256"),
              (str(eff.EXAMPLES / "matmul.py"), "--proc", "sgemm", "--size", "M=512,N=512,K=512")),
    "conv1d_mc": ((str(eff.EXAMPLES / "conv1d_mc.py"), "--size", "N=512"),
                  (str(eff.EXAMPLES / "conv1d_mc.py"), "--size", "N=1024")),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", choices=sorted(KERNELS), default="sgemm")
    ap.add_argument("--budget", type=float, default=600.0, help="seconds of each search at the large size [600]")
    ap.add_argument("--small-budget", type=float, default=120.0, help="seconds of the small-size search [120]")
    ap.add_argument("--warm-budget", type=float, default=None,
                    help="seconds of the warm-started search [--budget]; it only has to get near the cold best")
    ap.add_argument("--rerun-candidates", type=int, default=20)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    small, large = KERNELS[args.kernel]
    print(f"CPU: {eff.cpu_name()}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="sched-warm-"))

    print(f"cold: {args.kernel} large size, {args.budget:g} s, no warm start", flush=True)
    cold_out = eff.search(large, "rank", 0, args.budget, args.workers, work / "cold.db")
    cold = eff.to_run(args.kernel, "cold", 0, cold_out)
    print(f"small size, {args.small_budget:g} s", flush=True)
    eff.search(small, "rank", 0, args.small_budget, args.workers, work / "warm.db")
    warm_budget = args.warm_budget or args.budget
    print(f"warm: large size, {warm_budget:g} s, warm-started from the small one", flush=True)
    warm_out = eff.search(large, "rank", 0, warm_budget, args.workers, work / "warm.db", extra=())
    warm = eff.to_run(args.kernel, "warm", 0, warm_out)
    print(f"re-run: large size again, {args.rerun_candidates} candidates", flush=True)
    rerun_out = eff.search(large, "rank", 0, args.budget, args.workers, work / "warm.db",
                           extra=("--max-candidates", str(args.rerun_candidates)))

    best = min(s for s in (cold.best_seconds, warm.best_seconds) if s is not None)
    target = (cold.best_seconds or best) / eff.NEAR_BEST
    result: dict = {"cpu": eff.cpu_name(), "kernel": args.kernel, "budget": args.budget,
                    "cold_best_seconds": cold.best_seconds, "warm_best_seconds": warm.best_seconds}
    for name, run in (("cold", cold), ("warm", warm)):
        got = eff.reach(run, target)
        result[name] = {"seconds_to_95": got[0] if got else None, "evaluations_to_95": got[1] if got else None,
                        "evaluated": run.evaluated, "elapsed": run.elapsed}
    warm_at = result["warm"]["seconds_to_95"]
    result["warm_share_of_cold_budget"] = warm_at / args.budget if warm_at is not None else None
    result["warm_start"] = warm_out.get("warm_start")
    measured_before = {n["fingerprint"] for n in warm_out["tree"] if n["status"] != "pending"}
    remeasured = [n for n in rerun_out["tree"] if n["status"] != "pending" and n["parent_id"] is not None
                  and n["reused_from"] is None and n["fingerprint"] in measured_before]
    result["rerun"] = {"reused": rerun_out["candidates"]["reused"], "evaluated": rerun_out["candidates"]["evaluated"],
                       "remeasured_known": len(remeasured)}
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
