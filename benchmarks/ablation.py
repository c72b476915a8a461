"""The search loop's heuristics on the kernel-class suite, each turned off in turn.

Run:    python benchmarks/ablation.py [--budget 60] [--configs all-on apart ...] [--out DIR]
Report: python benchmarks/ablation.py --report DIR

Each configuration searches every case of the kernel-class suite (``kernel_classes.CASES``)
with ``schedsearch run`` and the defaults but the one heuristic it turns off, a fresh
database and a fresh cache folder (``SCHEDSEARCH_CACHE_DIR``) each: every expansion, build and
the cost model's history start cold, alike for every configuration (a warm expansion cache
would hide exactly the heuristics that order the expansions). With ``--warm`` a configuration's
cases share one database instead, searched in turn, so that every search after the first has a
cost model trained on other kernels, as a user's own database gives it. ``all-on`` runs twice, first
and last, so the report can tell a heuristic's effect from two runs of the same search.

A heuristic with a ``schedsearch run`` option is turned off by it; the others by a patch of
the search loop applied in the searching process, a child of this script
(``--child NAME -- ARGS``). The patches live here, for measuring only.

The report gives, per case and configuration, the best kernel's GFLOP/s by the search's own
times and the search's seconds (the wait for the baseline not counted) until it first measured
a kernel within 5% of the best any run found for that case; then, per configuration, the
geometric means over the cases of its GFLOP/s against the ``all-on`` runs' - by the search's
own times, and as the best was re-measured beside the other finalists (what a user is given) -
and the median of those seconds. Each run appends a JSON line to ``DIR/results.jsonl``; a run
of the script resumes after the runs already there. Every search's database is kept in ``DIR``.

With ``--load SHARE`` a neighbour keeps the timing core busy that share of the time, in bursts
of 0.05-1 s, while the searches run: a noisy machine. A search's own times then flatter a lucky
measurement, so the best each run chose is judged afterwards on the quiet machine: every run's
best of a case re-measured side by side (``side_by_side``, its rounds each in a fresh driver
process), written to ``DIR/quiet.json`` and reported against the ``all-on`` runs' bests; with
the range, over the cases, of the best's GFLOP/s by the search's own times and as finally given
(re-measured beside the other finalists) over its quiet GFLOP/s: how far the numbers a user
sees are off.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernel_classes import CASES, KERNELS, MATMUL, cpu_model
from side_by_side import side_by_side


def _apart_off() -> None:
    """Children predicted alike and of one kind are not spread apart (``ranking.kind_handicaps``,
    ``alike_groups``): the measuring order is the predictions' alone."""
    from schedsearch.search import loop

    loop.ALIKE = 0.0


def _runner_idle_off() -> None:
    """No also-ran is measured while the runner would idle (``Measuring.runner_idle``)."""
    from schedsearch.search.measuring import Measuring

    Measuring.runner_idle = lambda self, rnd, nxt: False  # type: ignore[method-assign]


def _late_rounds_off() -> None:
    """A round is started whenever asked, however late it would come in (``Asker.too_late``)."""
    from schedsearch.search.asking import Asker

    Asker.too_late = lambda self, parents, cur: False  # type: ignore[method-assign]


def _leading_share_off() -> None:
    """A streamed round plans the next one only once its last shard is in (``rounds.leaders_in``)."""
    from schedsearch.search import pipeline_results

    pipeline_results.leaders_in = lambda parts, depth, **kw: False


def _whole_pick_off() -> None:
    """A leading model's pick is expanded in two parts like any other (``Asker.parts``)."""
    from schedsearch.search.asking import Asker
    from schedsearch.search.parts import TwoParts

    init = Asker.__init__

    def patched(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        init(self, *args, **kwargs)
        self.parts = TwoParts(self.config.defer_costly and not self.strategy.whole_rounds, self.strategy)

    Asker.__init__ = patched  # type: ignore[method-assign]


#: Configuration -> the patch its searching process applies (None: none).
PATCHES: dict[str, Callable[[], None] | None] = {
    "all-on": None,
    "apart": _apart_off,
    "runner-idle": _runner_idle_off,
    "late-rounds": _late_rounds_off,
    "leading-share": _leading_share_off,
    "whole-pick": _whole_pick_off,
    "no-notes": None,
}
#: Configuration -> the ``schedsearch run`` options that turn its heuristic off.
#: ``no-notes``: without gcc's notes the cost model does not lead the search (``model_leads``).
OPTIONS: dict[str, list[str]] = {
    "no-notes": ["--no-compiler-notes"],
}
DEFAULT = ["all-on", "apart", "runner-idle", "late-rounds", "all-on"]


def child(name: str, args: list[str]) -> None:
    """In the searching process: apply ``name``'s patch, then run ``schedsearch`` with ``args``."""
    patch = PATCHES[name]
    if patch is not None:
        patch()
    from schedsearch.cli.main import main as cli

    cli(args)


def run_case(
    name: str, case: str, budget: float, folder: Path, max_candidates: int | None = None, db: Path | None = None
) -> dict:
    """One search of ``case`` with ``name``'s heuristic off: its best and its new bests.
    ``db``: the database to search in (default: a new one in ``folder``)."""
    file = MATMUL if case == "sgemm" else KERNELS
    sizes = ["--size", "M=512,N=512,K=512"] if case == "sgemm" else []
    db, events = db or folder / f"{case}.db", folder / f"{case}.events"
    args = ["run", str(file), "--proc", case, "--budget", str(budget), "--db", str(db), "--json",
            "--events", str(events), *sizes, *OPTIONS.get(name, [])]
    if max_candidates:
        args += ["--max-candidates", str(max_candidates)]
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "SCHEDSEARCH_CACHE_DIR": cache}
        out = subprocess.run([sys.executable, __file__, "--child", name, "--", *args], env=env,
                             capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{name} {case}: schedsearch run failed: {out.stderr.strip().splitlines()[-1:]}")
    result = json.loads(out.stdout)
    best = result["best"] or {}
    seconds = (best.get("search_time") or {}).get("seconds")
    flops = best["gflops"] * best["seconds"] if best.get("gflops") else None  # GFLOP of one call
    bests = []
    for line in events.read_text().splitlines():
        event = json.loads(line)
        record = event.get("record") or {}
        if event.get("kind") == "new_best" and record.get("seconds"):
            waited = ((event.get("counters") or {}).get("spent") or {}).get("baseline_wait", 0.0)
            bests.append((event["elapsed"] - waited, record["seconds"]))
    return {"config": name, "case": case, "gflops": flops / seconds if flops and seconds else 0.0,
            "fingerprint": best.get("fingerprint"), "db": str(db),
            "declared": best.get("gflops") or 0.0, "remeasured": bool(best.get("remeasured")),
            "flop": flops, "bests": bests, "evaluated": result["candidates"]["evaluated"],
            "ended": result.get("ended")}


def _burn(share: float, seed: int) -> None:
    """Keep one core busy ``share`` of the time, in bursts of 0.05-1 s: a neighbour's work.
    The core kernels are timed on (the last allowed: ``evaluate.bench.bench_cpu``), as a
    host's other guests take a virtual CPU's time; on another core the timings would not
    see it."""
    os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
    rng = random.Random(seed)
    while True:
        on = rng.uniform(0.05, 1.0)
        end = time.perf_counter() + on
        while time.perf_counter() < end:
            pass
        time.sleep(on * (1.0 - share) / share)


def quiet_check(out: Path, rounds: int = 5) -> None:
    """Every run's best of each case re-measured side by side on the (now quiet) machine:
    ``DIR/quiet.json``, case -> fingerprint -> seconds (the median of its rounds)."""
    runs = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]
    quiet: dict[str, dict[str, float]] = {}
    for case in dict.fromkeys(r["case"] for r in runs):
        mine = [r for r in runs if r["case"] == case and r.get("fingerprint") and r.get("gflops")]
        speeds = {r["fingerprint"]: r["flop"] / r["gflops"] for r in mine}
        dbs = list(dict.fromkeys(Path(r["db"]) for r in mine))
        with tempfile.TemporaryDirectory() as cache:
            measured = side_by_side(dbs, speeds, Path(cache), within=math.inf, most=len(speeds), rounds=rounds)
        if measured is not None:
            quiet[case] = measured.measured
            print(f"{case}: {measured.kernels} bests side by side, {measured.rounds} rounds", flush=True)
    (out / "quiet.json").write_text(json.dumps(quiet, indent=1))


def _spread(ratios: list[float]) -> str:
    """``ratios``' lowest-highest, e.g. ``0.53-1.04``."""
    return f"{min(ratios):.2f}-{max(ratios):.2f}" if ratios else "-"


def _geomean(values: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(v) for v in values)) if values else float("nan")


def report(out: Path) -> None:
    """The tables of the runs in ``out/results.jsonl`` (see the module's docstring)."""
    runs = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]
    configs = list(dict.fromkeys(f"{r['config']}#{r['round']}" for r in runs))
    cases = list(dict.fromkeys(r["case"] for r in runs))
    by = {(f"{r['config']}#{r['round']}", r["case"]): r for r in runs}
    top = {c: max((r["gflops"] for r in runs if r["case"] == c), default=0.0) for c in cases}

    def reached(r: dict) -> float | None:
        for at, seconds in r["bests"]:
            if r["flop"] and r["flop"] / seconds >= 0.95 * top[r["case"]]:
                return at
        return None

    def reference(case: str, key: str) -> float | None:
        """The geometric mean of the ``all-on`` runs' ``key`` for ``case`` (None: none has it)."""
        values = [r[key] for r in runs if r["config"] == "all-on" and r["case"] == case and r.get(key)]
        return _geomean(values) if values else None

    print("Each cell: GFLOP/s of the best by the search's own times / seconds of search until it first measured "
          "a kernel within 5% of the case's best in any run (- never). Ratios: geometric means over the cases of "
          "the search-time GFLOP/s, and of the best's GFLOP/s as re-measured beside the other finalists, each "
          "against the all-on runs'.\n")
    quiet_file = out / "quiet.json"
    quiet: dict[str, dict[str, float]] = json.loads(quiet_file.read_text()) if quiet_file.exists() else {}

    def quietly(r: dict) -> float | None:
        """The run's best as re-measured side by side on the quiet machine (seconds)."""
        return quiet.get(r["case"], {}).get(r.get("fingerprint") or "")

    extra = " x all-on (quiet, side by side) | search's / quiet | final / quiet |" if quiet else ""
    print("| configuration | " + " | ".join(cases) + f" | x all-on (search) | x all-on (re-measured) |{extra} "
          "median s to 95% |")
    print("|---|" + "---|" * (len(cases) + 3 + 3 * bool(quiet)))
    for cfg in configs:
        cells, search, declared, times, calm, claims, finals = [], [], [], [], [], [], []
        for case in cases:
            r = by.get((cfg, case))
            if r is None:
                cells.append("-")
                continue
            at = reached(r)
            cells.append(f"{r['gflops']:.1f} / {'-' if at is None else f'{at:.0f}'}")
            ref = reference(case, "gflops")
            if ref and r["gflops"]:
                search.append(r["gflops"] / ref)
            ref = reference(case, "declared")
            if ref and r.get("declared"):
                declared.append(r["declared"] / ref)
            times.append(at if at is not None else math.inf)
            mine = quietly(r)
            refs = [t for x in runs if x["config"] == "all-on" and x["case"] == case and (t := quietly(x))]
            if mine and refs:
                calm.append(_geomean(refs) / mine)
            if mine and r["flop"]:  # the numbers the search gave against the quiet machine's
                claims.append(r["gflops"] * mine / r["flop"])
                finals.append(r["declared"] * mine / r["flop"])
        med = statistics.median(times) if times else float("nan")
        quiet_cell = f" {_geomean(calm):.3f} | {_spread(claims)} | {_spread(finals)} |" if quiet else ""
        print(f"| {cfg} | " + " | ".join(cells) + f" | {_geomean(search):.3f} | {_geomean(declared):.3f} |{quiet_cell}"
              f" {med:.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=60.0)
    parser.add_argument("--max-candidates", type=int, default=None,
                        help="also stop each search after this many candidates (a small-budget pass)")
    parser.add_argument("--configs", nargs="*", default=DEFAULT, choices=list(PATCHES))
    parser.add_argument("--cases", nargs="*", default=list(CASES))
    parser.add_argument("--out", type=Path, default=Path("ablation-runs"))
    parser.add_argument("--report", type=Path, default=None, help="print the tables of a finished folder")
    parser.add_argument("--warm", action="store_true",
                        help="one database per configuration and run, its cases searched in turn: each search after "
                             "the first starts with a cost model trained on the kernels before it")
    parser.add_argument("--load", type=float, default=0.0, metavar="SHARE",
                        help="a neighbour keeps one core busy this share of the time during the searches; the runs' "
                             "bests are then re-measured side by side on the quiet machine")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    opts, rest = parser.parse_known_args()
    if opts.child:
        child(opts.child, [a for a in rest if a != "--"])
        return
    if opts.report:
        report(opts.report)
        return
    opts.out.mkdir(parents=True, exist_ok=True)
    results = opts.out / "results.jsonl"
    done = {(r["config"], r["round"], r["case"]) for r in map(json.loads, results.read_text().splitlines())} \
        if results.exists() else set()
    cap = f", at most {opts.max_candidates} candidates" if opts.max_candidates else ""
    model = "the cost model trained on the cases before" if opts.warm else "cold cost model"
    if not 0.0 <= opts.load < 1.0:
        parser.error("--load is a share of one core's time, from 0 up to (not including) 1")
    load = f"; a neighbour busy {opts.load:.0%} of one core" if opts.load else ""
    print(f"{cpu_model()}; budget {opts.budget:.0f} s per case{cap}; cold caches, {model}{load}", flush=True)
    burner = multiprocessing.Process(target=_burn, args=(opts.load, 0), daemon=True) if opts.load else None
    if burner is not None:
        burner.start()
    try:
        run_all(opts, results, done)
    finally:
        if burner is not None:
            burner.terminate()
            burner.join()
    if opts.load:
        quiet_check(opts.out)
    report(opts.out)


def run_all(opts: argparse.Namespace, results: Path, done: set[tuple[str, int, str]]) -> None:
    """The runs of ``opts`` not yet in ``results``, each appended to it as it ends."""
    seen: dict[str, int] = {}
    for name in opts.configs:
        seen[name] = seen.get(name, 0) + 1
        for case in opts.cases:
            if (name, seen[name], case) in done:
                continue
            with tempfile.TemporaryDirectory() as tmp:
                db = opts.out / (f"{name}-{seen[name]}.db" if opts.warm else f"{name}-{seen[name]}-{case}.db")
                r = run_case(name, case, opts.budget, Path(tmp), opts.max_candidates, db)
            r["round"] = seen[name]
            with results.open("a") as f:
                f.write(json.dumps(r) + "\n")
            print(f"{name}#{seen[name]} {case}: {r['gflops']:.1f} GFLOP/s, {r['evaluated']} evaluated", flush=True)


if __name__ == "__main__":
    main()
