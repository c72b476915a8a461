"""Search efficiency with and without the learned cost model (a measurement, not a test).

For each kernel (by default SGEMM 512, the multi-channel conv1d of ``examples/conv1d_mc.py``
and the i8 matmul; also the blurs, ``gemv_t`` and the single-channel conv1d, whose good
schedules lie deeper than the root's first vector step), each seed and each cost-model setting, one real ``schedsearch run`` with the same
wall-time budget, every run with an empty build cache and its own database:

- ``off``: children measured in proposal order;
- ``rank``: the model learns from this search only (a cold start);
- ``rank-warm`` (with ``--warm``): the database first holds searches of *other* workloads
  and sizes (SGEMM 256, conv1d_mc with N=512, the int8 matmul ``imatmul`` at 32x32x32)
  made on this machine, so the model can help from the first round - or, with
  ``--history DB``, the searches that database holds;
- ``rank-notes`` (with ``--notes``): ``rank`` with ``--compiler-notes``, the model reading
  gcc's notes on each child (every child built as it is made): ``schedsearch run``'s
  default; every other setting runs with ``--no-compiler-notes``;
- ``rank-oracle`` (with ``--oracle DIR``): the model replaced, for every C that the
  databases of an earlier run of this benchmark in DIR measured, by that C's pooled time
  (``oracle_search.py``): what a perfect model would do in the same search and pipeline,
  the ceiling for any cost model on this machine.

Each search's times are its own medians, so the runs' times are pooled as measured, within the
machine's drift (below).

Reported per kernel: the fastest kernel any run found, and per setting the time (seconds of
the search's own elapsed time, from ``tree --json``'s ``measured_at``) and the number of
evaluations until a run first measured a kernel within 95% of that one's speed (median over
seeds; a run that never got there counts as its whole budget), how many nodes each run
expanded, the model's rank correlation
(over the last predictions, and over every prediction made after the search's 200th
measurement; and, for runs whose model predicted the first round, its rank correlation over
the root's children: what history of other workloads and sizes is worth before this search
has measured anything), how well the runs' measurements of the same C agree (the ceiling for any model's rank
correlation), where the runs' time went (``run --json``'s ``time_spent``, median over seeds) and how busy
the CPU was over each run, and, separately, the throughput (evaluated candidates a second) of SGEMM 256 with 2 workers
in the default rewrite space.

A kernel's speed here is the median of every search-time measurement of its C (its
fingerprint) over all runs of the kernel, not the one the run happened to take: the same C
measured 2.40 ms in one SGEMM 512 run and 2.82 ms in another (the other core builds and
expands meanwhile), and a single lucky measurement would otherwise decide which run
"reached" the best. The pooled time still carries the moment each run measured at: the
machine's speed drifts (on a shared 2-vCPU Zen 3 the same register tile measured 3.9-8.5 ms
in 18 runs of one afternoon). So the kernels within 1.5x of the fastest pooled time (at most
24), and every kernel a run held as its fastest on the way (``held_best``), are then
re-measured side by side, in ``--side-by-side`` separate driver processes with interleaved
rounds (``side_by_side.py``), and judged by their median ratio to the pooled fastest; the
report also gives the result by the pooled times alone. The held kernels are there because
the fastest 24 by pooled time alone can be the luckiest measurements of a crowd of equals:
on Zen 4, SGEMM 512's searches reported bests of 2.07-2.18 ms that side by side ran no
faster than the register tile each had measured in its first seconds at 2.35-2.46 ms. To report again on the
runs of an earlier invocation, give it the same ``--keep DIR`` and ``--resume``.

    .venv/bin/python benchmarks/search_efficiency.py [--budget 180] [--seeds 3] [--kernels sgemm512,conv1d_mc,i8]
        [--notes] [--warm] [--settings off,rank-notes] [--throughput-budget 60] [--throughput-seeds 3] [--skip-throughput] [--out results.json] [--keep DIR [--resume]]
        [--side-by-side 5]

It takes about an hour with the defaults; run it on a quiet machine and name the CPU
(printed first) next to every number reported.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

from schedsearch.search.ranking import SETTLED_AFTER, span, spearman

sys.path.insert(0, str(Path(__file__).resolve().parent))
from side_by_side import MOST, ROUNDS, WITHIN, SideBySide, side_by_side  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
#: Within this share of the best speed any run found counts as "there".
NEAR_BEST = 0.95
#: Also reported: how long the runs took to other shares of the best speed. Where the first
#: good kernel is already within a few percent of the best, 95% lies inside the run-to-run
#: noise of a kernel's time, and the levels around it show what decides the time to 95%.
LEVELS = (0.90, 0.95, 0.97)

KERNELS: dict[str, tuple[str, ...]] = {
    "sgemm512": (str(EXAMPLES / "matmul.py"), "--proc", "sgemm", "--size", "M=512,N=512,K=512"),
    "conv1d_mc": (str(EXAMPLES / "conv1d_mc.py"),),
    "i8": (str(EXAMPLES / "matmul.py"), "--proc", "matmul_i8"),
    # kernels whose good schedules are deeper than the root's first vector step
    "blur2": (str(EXAMPLES / "blur.py"), "--proc", "blur2"),
    "blur2_local": (str(EXAMPLES / "blur.py"), "--proc", "blur2_local"),
    "gemv_t": (str(EXAMPLES / "gemv.py"), "--proc", "gemv_t"),
    "conv1d": (str(EXAMPLES / "conv1d.py"),),
    # the kernel-class suite (``kernel_classes.py``): written the way people write them
    **{name: (str(EXAMPLES / "kernels.py"), "--proc", name)
       for name in ("matmul_init", "matmul_aat", "bmm", "conv2d", "matmul_chain", "matmul_relu")},
}
DEFAULT_KERNELS = ("sgemm512", "conv1d_mc", "i8")
#: Other workloads and sizes whose searches make the warm-start history.
WARMUP: tuple[tuple[str, ...], ...] = (
    (str(EXAMPLES / "matmul.py"), "--proc", "sgemm", "--size", "M=256,N=256,K=256"),
    (str(EXAMPLES / "conv1d_mc.py"), "--size", "N=512"),
    (str(EXAMPLES / "imatmul.py"),),
)


@dataclass(frozen=True)
class Run:
    kernel: str
    setting: str
    seed: int
    search_id: int
    elapsed: float
    evaluated: int
    best_seconds: float | None  # fastest measurement of the search (not the finalists' re-measurement)
    spearman: float | None
    trained_on: int
    measured: tuple[tuple[float, float | None, str], ...]  # (measured_at, seconds or None, fingerprint) in order
    # rank correlation of predicted and measured speed-ups over the root's children: how well
    # the model ranked the first round, before this search had measured anything of its own
    first_round: float | None = None
    # the recorded accuracy's other half: how far apart the window's times were, and the share
    # of its pairs told apart beyond noise that the predictions ordered right
    span: float | None = None
    concordance: float | None = None
    # every prediction made after the search's SETTLED_AFTER-th measurement, against its
    # measurement: rank correlation, how many, and how far apart their times were
    settled: float | None = None
    settled_pairs: int = 0
    settled_span: float | None = None
    # nodes whose expansion gave children: where Exo is slow (seconds per register-tiled
    # node), a search affords few, and which ones it expands decides how deep it gets
    expansions: int = 0
    db: str = ""  # its kept database ("" when not kept)
    # where its time went (``run --json``'s ``time_spent``: seconds expanding, building,
    # measuring, and with nothing being measured); empty for a run made before it was counted
    spent: dict[str, float] = field(default_factory=dict)
    cpu_busy: float | None = None  # the machine's CPU use over the run (``CpuBusy``), 0-1
    # how well the settled measurements would rank a second measurement of themselves (the
    # search's ``settled_repeat``): the most ``settled`` can be expected to reach
    settled_repeat: float | None = None


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "schedsearch", *args], capture_output=True, text=True, env=env,
                          check=False)


class CpuBusy:
    """The machine's CPU use while a block runs (``with CpuBusy() as busy: ...``; then
    ``busy.share``, 0-1 over all cores): whether the time a search's runner waited was time
    the cores were busy with its expansions and builds, or time nothing used them."""

    def __init__(self, every: float = 0.5) -> None:
        self.every, self.samples = every, []
        self.share: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        psutil.cpu_percent(None)  # the first call only sets the starting point
        while not self._stop.wait(self.every):
            self.samples.append(psutil.cpu_percent(None) / 100.0)

    def __enter__(self) -> CpuBusy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.share = statistics.mean(self.samples) if self.samples else None


def kept(db: Path) -> dict | None:
    """The last search a kept database holds, as ``search`` returns it, when it completed
    (``--keep`` with a folder of an earlier, interrupted run of this benchmark)."""
    if not db.is_file():
        return None
    env = dict(os.environ)
    listed = _json(cli("list", "--db", str(db), "--json", env=env), "list")
    rows = listed if isinstance(listed, list) else listed.get("searches", [])
    if not rows:
        return None
    sid = max(int(r["search_id"]) for r in rows)
    out = _json(cli("show", str(sid), "--db", str(db), "--json", env=env), "show")
    if out.get("status") != "completed":
        return None
    out["tree"] = _json(cli("tree", str(sid), "--db", str(db), "--json", env=env), "tree")
    return out


def search(kernel_args: tuple[str, ...], setting: str, seed: int, budget: float, workers: int, db: Path,
           extra: tuple[str, ...] = ("--no-warm-start",), timing: str = "auto") -> dict:
    """One ``schedsearch run``; returns its --json output plus the tree. By default without
    a warm start, so that what is compared is the cost model alone (``extra``: more options).
    Its events go beside the database (``--events``: ``NAME.events.jsonl``), so a kept run
    can be read afterwards round by round."""
    env = dict(os.environ, SCHEDSEARCH_CACHE_DIR=tempfile.mkdtemp(prefix="sched-eff-cache-"))
    mode = "off" if setting.startswith("off") else "rank"
    # The notes are schedsearch run's default: every other setting turns them off.
    extra = (*extra, "--compiler-notes" if setting.endswith("-notes") else "--no-compiler-notes")
    try:
        with CpuBusy() as busy:
            r = cli("run", *kernel_args, "--budget", str(budget), "--seed", str(seed), "--workers", str(workers),
                    "--cost-model", mode, "--timing", timing, "--db", str(db), "--json",
                    "--events", str(db.with_suffix(".events.jsonl")), *extra, env=env)
        if r.returncode != 0:
            raise SystemExit(f"schedsearch run {' '.join(kernel_args)} failed ({r.returncode}): {r.stderr[-2000:]}")
        out = _json(r, "run")
        out["cpu_busy"] = busy.share  # over the whole process, Ray's start and the finalists included
        tree = cli("tree", str(out["search_id"]), "--db", str(db), "--json", env=env)
        out["tree"] = _json(tree, "tree")
        return out
    finally:
        shutil.rmtree(env["SCHEDSEARCH_CACHE_DIR"], ignore_errors=True)


def oracle_search(kernel_args: tuple[str, ...], seed: int, budget: float, workers: int, db: Path,
                  earlier: list[Path], timing: str = "auto") -> dict:
    """One search with the oracle model of ``oracle_search.py`` (known C from ``earlier``
    databases of the kernel), as ``search`` returns one."""
    env = dict(os.environ, SCHEDSEARCH_CACHE_DIR=tempfile.mkdtemp(prefix="sched-eff-cache-"))
    try:
        r = subprocess.run([sys.executable, str(Path(__file__).with_name("oracle_search.py")), *kernel_args,
                            "--from", *map(str, earlier), "--db", str(db), "--budget", str(budget), "--seed",
                            str(seed), "--workers", str(workers), "--timing", timing],
                           capture_output=True, text=True, env=env, check=False)
        if r.returncode != 0:
            raise SystemExit(f"oracle_search {' '.join(kernel_args)} failed ({r.returncode}): {r.stderr[-2000:]}")
        done = kept(db)
        if done is None:
            raise SystemExit(f"oracle_search left no completed search in {db}: {r.stdout[-1000:]}")
        return done
    finally:
        shutil.rmtree(env["SCHEDSEARCH_CACHE_DIR"], ignore_errors=True)


def _json(r: subprocess.CompletedProcess[str], what: str) -> Any:
    """The one JSON document a ``--json`` command printed; what it printed otherwise."""
    try:
        return json.loads(r.stdout)
    except json.JSONDecodeError as e:
        raise SystemExit(f"schedsearch {what} --json (exit {r.returncode}) printed no JSON document ({e}): "
                         f"stdout {r.stdout[:1000]!r}; stderr {r.stderr[-2000:]!r}") from None


def to_run(kernel: str, setting: str, seed: int, out: dict, db: Path | None = None) -> Run:
    nodes = sorted((n for n in out["tree"] if n["measured_at"] is not None), key=lambda n: n["measured_at"])
    ok = [n["seconds"] for n in nodes if n["status"] == "ok" and n["seconds"]]
    model = out.get("cost_model") or {}
    first = [(n["predicted_speedup"], n["speedup"]) for n in nodes
             if n["depth"] == 1 and n["status"] == "ok" and n["predicted_speedup"] and n["speedup"]]
    measured = [n for n in nodes if n["status"] == "ok" and n["seconds"]]
    settled = [n for n in measured[SETTLED_AFTER:] if n["predicted_speedup"] and n["speedup"]]
    return Run(kernel, setting, seed, out["search_id"], out["elapsed_seconds"], out["candidates"]["evaluated"],
               min(ok) if ok else None, model.get("spearman"), model.get("trained_on", 0),
               tuple((n["measured_at"], n["seconds"] if n["status"] == "ok" else None, n["fingerprint"])
                     for n in nodes),
               spearman([p for p, _ in first], [m for _, m in first]) if len(first) >= 5 else None,
               model.get("span"), model.get("concordance"),
               spearman([n["predicted_speedup"] for n in settled], [n["speedup"] for n in settled]),
               len(settled), span([n["seconds"] for n in settled]),
               len({n["parent_id"] for n in out["tree"] if n["parent_id"] is not None}),
               str(db) if db is not None else "", spent=dict(out.get("time_spent") or {}),
               cpu_busy=out.get("cpu_busy"), settled_repeat=model.get("settled_repeat"))


def pooled_speeds(runs: list[Run]) -> dict[str, float]:
    """Fingerprint -> median of every measurement of that C over ``runs``."""
    seen: dict[str, list[float]] = {}
    for run in runs:
        for _, seconds, fp in run.measured:
            if seconds is not None:
                seen.setdefault(fp, []).append(seconds)
    return {fp: statistics.median(times) for fp, times in seen.items()}


def retest(runs: list[Run], least: int = 20) -> tuple[float, float] | None:
    """How well the searches' own measurements rank kernels: over every pair of runs, the
    rank correlation of the times both measured for the same C (median over pairs), over
    all such kernels and over the faster half. No model can rank measurements better than
    they agree with themselves."""
    every, faster = [], []
    for i, a in enumerate(runs):
        for b in runs[i + 1:]:
            ta = {fp: sec for _, sec, fp in a.measured if sec}
            tb = {fp: sec for _, sec, fp in b.measured if sec}
            common = sorted(set(ta) & set(tb))
            if len(common) < least:
                continue
            x, y = [ta[f] for f in common], [tb[f] for f in common]
            median = sorted(x)[len(x) // 2]
            fast = [k for k in range(len(x)) if x[k] <= median]
            rho, rho_fast = spearman(x, y), spearman([x[k] for k in fast], [y[k] for k in fast])
            if rho is not None and rho_fast is not None:
                every.append(rho)
                faster.append(rho_fast)
    return (statistics.median(every), statistics.median(faster)) if every else None


def spread(runs: list[Run], near: float = 1.3) -> dict | None:
    """How far apart two runs' times for the same C are: |a - b| / min(a, b), median and
    90th percentile, over every pair of runs, for all shared kernels and for those within
    ``near`` times the fastest (where the search has to choose)."""
    every, close = [], []
    for i, a in enumerate(runs):
        for b in runs[i + 1:]:
            ta = {fp: sec for _, sec, fp in a.measured if sec}
            tb = {fp: sec for _, sec, fp in b.measured if sec}
            common = set(ta) & set(tb)
            if not common:
                continue
            best = min(min(ta.values()), min(tb.values()))
            for fp in common:
                d = abs(ta[fp] - tb[fp]) / min(ta[fp], tb[fp])
                every.append(d)
                if min(ta[fp], tb[fp]) <= near * best:
                    close.append(d)

    def q(xs: list[float], p: float) -> float | None:
        return sorted(xs)[int(p * (len(xs) - 1))] if xs else None

    if not every:
        return None
    return {"pairs": len(every), "median": q(every, 0.5), "p90": q(every, 0.9),
            "near_pairs": len(close), "near_median": q(close, 0.5), "near_p90": q(close, 0.9)}


def reach(run: Run, speeds: dict[str, float], target_seconds: float) -> tuple[float, int] | None:
    """(seconds, evaluations) until the run first measured a kernel whose pooled time is
    within reach, or None."""
    for count, (at, seconds, fp) in enumerate(run.measured, start=1):
        if seconds is not None and speeds[fp] <= target_seconds:
            return at, count
    return None


def pooled_reach(runs: list[Run], pooled: dict[str, float], budget: float) -> dict[str, dict]:
    """Per setting, how many runs reached 95% of the fastest pooled time and the median
    seconds to it (the budget for a run that never did), by the pooled times alone."""
    line = min(pooled.values()) / NEAR_BEST
    out: dict[str, dict] = {}
    for setting in dict.fromkeys(r.setting for r in runs):
        got = [reach(r, pooled, line) for r in runs if r.setting == setting]
        out[setting] = {"reached": sum(g is not None for g in got), "runs": len(got),
                        "median_seconds_to_95": statistics.median(g[0] if g else budget for g in got)}
    return out


def warm_history(budget: float, workers: int, work: Path) -> Path:
    """A database holding short searches of other workloads and sizes (cost model off)."""
    db = work / "warm.db"
    for args in WARMUP:
        print(f"warm-up search: {' '.join(Path(a).name if a.endswith('.py') else a for a in args)}", flush=True)
        search(args, "off", 0, budget, workers, db)
    return db


def throughput(budget: float, workers: int, work: Path, seeds: int = 3, timing: str = "auto",
               setting: str = "rank-notes") -> dict:
    """Candidates measured a second: SGEMM 256, default rewrite space, cost model on
    (``setting``; by default as ``schedsearch run`` searches, with the compiler's notes), one
    search per seed, each in a database of its own (reused measurements would count for
    nothing measured). One search's rate swings with what it happens to measure - how slow its
    kernels are, and how many the cutoff times by one call - so the median counts."""
    runs = []
    for seed in range(seeds):
        db = work / f"throughput-{seed}.db"
        db.unlink(missing_ok=True)
        out = search((str(EXAMPLES / "matmul.py"), "--proc", "sgemm", "--size", "M=256,N=256,K=256"), setting, seed,
                     budget, workers, db, timing=timing)
        counts = out["candidates"]
        measured = counts["evaluated"] - counts.get("reused", 0)
        beside = counts.get("timed_beside", 0)
        spent = out.get("time_spent") or {}
        runs.append({"seed": seed, "measured": measured, "elapsed": out["elapsed_seconds"],
                     "per_second": measured / out["elapsed_seconds"], "timed_beside": beside,
                     "time_spent": spent, "cpu_busy": out.get("cpu_busy")})
        where = (f"; workers expanding {spent['expanding']:.0f} s and building {spent['building']:.0f} s, "
                 f"verifying and timing {spent['measuring']:.0f} s, nothing measured {spent['idle']:.0f} s"
                 if spent else "")
        busy = f"; CPU {out['cpu_busy']:.0%} busy" if out.get("cpu_busy") is not None else ""
        print(f"throughput seed {seed}: {measured} measured in {out['elapsed_seconds']:.0f} s "
              f"({beside} timed beside builds and expansions){where}{busy}", flush=True)
    return {"per_second": statistics.median(r["per_second"] for r in runs), "runs": runs, "workers": workers,
            "timing": timing, "setting": setting}


def duration(seconds: float) -> str:
    """A kernel's time in the unit that keeps three digits (the i8 matmul takes ~100 ns)."""
    if seconds < 1e-6:
        return f"{seconds * 1e9:.1f} ns"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} us"
    return f"{seconds * 1e3:.2f} ms"


def cpu_name() -> str:
    """The CPU's model name with its family and model numbers (a cloud guest's name alone,
    "AMD EPYC", does not tell Zen 4 from Zen 5)."""
    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        return "unknown CPU"
    name = fields.get("model name", "unknown CPU")
    if "cpu family" in fields and "model" in fields:
        name += f" (family {fields['cpu family']}, model {fields['model']})"
    return name


def held_best(run: Run) -> list[str]:
    """The kernels the run held as its fastest on the way, in the order it found them: what
    it would have handed out had it been stopped then (the root excluded)."""
    held: list[str] = []
    best = float("inf")
    for _, seconds, fp in run.measured[1:]:
        if seconds is not None and seconds < best:
            best = seconds
            held.append(fp)
    return held


def judged(runs: list[Run], pooled: dict[str, float], rounds: int) -> tuple[dict[str, float], SideBySide | None]:
    """Each kernel's speed for judging the runs: the pooled search-time measurements
    (``pooled_speeds``), with the near-best kernels' and every kernel a run held as its
    fastest on the way (``held_best``) re-measured side by side (``side_by_side``) when
    ``rounds`` and the runs' databases were kept."""
    dbs = [Path(r.db) for r in runs if r.db and Path(r.db).is_file()]
    if not rounds or not dbs:
        return pooled, None
    cache = Path(tempfile.mkdtemp(prefix="sched-eff-sbs-"))
    try:
        sbs = side_by_side(dbs, pooled, cache, rounds=rounds, also=[fp for r in runs for fp in held_best(r)])
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    return ({**pooled, **sbs.seconds} if sbs else pooled), sbs


def first_child_seconds(runs: list[Run]) -> float | None:
    """The median, over ``runs``, of when each first measured a child of the root (its
    second measurement; the first is the root's own): no order of measuring reaches 95%
    sooner, so ``off``'s time to 95% over it is about the most a model can shorten that
    time by (``ceiling``; a run whose first child comes in early by chance can go past it)."""
    firsts = [r.measured[1][0] for r in runs if len(r.measured) > 1]
    return statistics.median(firsts) if firsts else None


def ceiling(rows: dict[str, dict], first_child: float | None, base: str = "off") -> float | None:
    """How many times sooner than ``base`` any model could reach 95% of the fastest kernel:
    ``base``'s median time to it over ``first_child`` (``first_child_seconds``); a kernel
    whose ``base`` searches get there with the root's first children leaves a model little
    to win, however well it ranks."""
    if base not in rows or not first_child:
        return None
    return rows[base]["median_seconds_to_95"] / first_child


def median_spent(runs: list[Run]) -> dict[str, float]:
    """The median of each kind of time spent over ``runs`` that counted it ({} if none did)."""
    counted = [r.spent for r in runs if r.spent]
    if not counted:
        return {}
    return {k: statistics.median(s.get(k, 0.0) for s in counted) for k in counted[0]}


def report(runs: list[Run], budget: float, side_rounds: int = 0) -> dict:
    summary: dict = {}
    for kernel in dict.fromkeys(r.kernel for r in runs):
        mine = [r for r in runs if r.kernel == kernel]
        pooled = pooled_speeds(mine)
        speeds, sbs = judged(mine, pooled, side_rounds)
        best = min(speeds.values(), default=None)
        if best is None:
            continue
        target = best / NEAR_BEST
        rows = {}
        for setting in dict.fromkeys(r.setting for r in mine):
            got = [reach(r, speeds, target) for r in mine if r.setting == setting]
            times = [g[0] if g else budget for g in got]
            evals = [g[1] if g else None for g in got]
            rhos = [r.spearman for r in mine if r.setting == setting and r.spearman is not None]
            concordances = [r.concordance for r in mine if r.setting == setting and r.concordance is not None]
            spans = [r.span for r in mine if r.setting == setting and r.span is not None]
            firsts = [r.first_round for r in mine if r.setting == setting and r.first_round is not None]
            settled = [r for r in mine if r.setting == setting and r.settled is not None]
            levels = {}
            for level in LEVELS:
                there = [reach(r, speeds, best / level) for r in mine if r.setting == setting]
                levels[f"{level:.2f}"] = {"median_seconds": statistics.median(g[0] if g else budget for g in there),
                                          "reached": sum(g is not None for g in there)}
            rows[setting] = {
                "first_round_spearman": firsts,
                "reached": sum(g is not None for g in got), "runs": len(got),
                "median_seconds_to_95": statistics.median(times),
                "levels": levels,
                "evaluations_to_95": evals,
                "expansions": [r.expansions for r in mine if r.setting == setting],
                "median_spearman": statistics.median(rhos) if rhos else None,
                "median_concordance": statistics.median(concordances) if concordances else None,
                "median_span": statistics.median(spans) if spans else None,
                "settled_spearman": [r.settled for r in settled],
                "settled_span": [r.settled_span for r in settled],
                "settled_repeat": [r.settled_repeat for r in settled],
                "time_spent": median_spent([r for r in mine if r.setting == setting]),
                "cpu_busy": [r.cpu_busy for r in mine if r.setting == setting and r.cpu_busy is not None],
            }
        agreement = retest(mine)
        apart = spread(mine)
        near = sum(1 for t in speeds.values() if t <= target)
        own = pooled_reach(mine, pooled, budget)
        first_child = first_child_seconds(mine)
        most = ceiling(rows, first_child)
        summary[kernel] = {"best_seconds": best, "settings": rows, "retest_spearman": agreement, "retest_spread": apart,
                           "first_child_seconds": first_child, "ceiling": most,
                           "kernels": len(speeds), "kernels_within_95": near, "by_search_times": own,
                           "side_by_side": None if sbs is None else {
                               "kernels": sbs.kernels, "rounds": sbs.rounds, "ratio_spread": sbs.ratio_spread}}
        how = ("median of its measurements over all runs" if sbs is None else
               f"re-measured side by side with {sbs.kernels} kernels: those within {WITHIN:g}x of the fastest by "
               f"the runs' own times, at most {MOST}, and every one a run held as its fastest on the way; "
               f"in {sbs.rounds} driver processes")
        print(f"\n{kernel}: fastest kernel {duration(best)} ({how}); "
              f"95% of its speed = {duration(target)}; {near} of the {len(speeds)} distinct kernels measured "
              f"({near / len(speeds):.0%}) are within it")
        if sbs is not None:
            varied = f"{sbs.ratio_spread:.1%}" if sbs.ratio_spread is not None else "-"
            print(f"  side by side, a kernel's ratio to the anchor varied by a median {varied} between processes; by the "
                  f"runs' own times alone: " + ", ".join(
                      f"{k} reached {v['reached']}/{v['runs']}, median {v['median_seconds_to_95']:.1f} s"
                      for k, v in own.items()))
        for setting, row in rows.items():
            rho = f"{row['median_spearman']:.2f}" if row["median_spearman"] is not None else "-"
            print(f"  {setting:10s} reached {row['reached']}/{row['runs']}, median {row['median_seconds_to_95']:6.1f} s "
                  f"to 95%, evaluations {row['evaluations_to_95']}, median rank correlation {rho}, "
                  f"nodes expanded {row['expansions']}")
            print(f"  {'':10s} median time to " + ", ".join(
                f"{float(k):.0%}: {v['median_seconds']:.1f} s ({v['reached']}/{row['runs']})"
                for k, v in row["levels"].items()))
            if row["median_span"] is not None:
                told = (f"{row['median_concordance']:.0%} of the pairs told apart beyond noise ordered right"
                        if row["median_concordance"] is not None else "no pair told apart beyond noise")
                print(f"  {'':10s} the last predictions' times spanned {row['median_span']:.2f}x (median); {told}")
            if row["settled_spearman"]:
                print(f"  {'':10s} every prediction after the {SETTLED_AFTER}th measurement: rank correlation "
                      + ", ".join(f"{x:.2f} (times spanning {y:.2f}x" + (f"; themselves at most {z:.2f})" if z else ")")
                                  if y else f"{x:.2f}"
                                  for x, y, z in zip(row["settled_spearman"], row["settled_span"],
                                                     row["settled_repeat"], strict=True)))
            if row["first_round_spearman"]:
                print(f"  {'':10s} the root's children as predicted before any measurement of this search: rank "
                      f"correlation {', '.join(f'{x:.2f}' for x in row['first_round_spearman'])}")
            if row["time_spent"]:
                t = row["time_spent"]
                print(f"  {'':10s} time spent (median of the runs): workers expanding {t['expanding']:.0f} s and "
                      f"building {t['building']:.0f} s; verifying and timing {t['measuring']:.0f} s; nothing being "
                      f"measured for {t['idle']:.0f} s"
                      + (f"; the CPU was {', '.join(f'{b:.0%}' for b in row['cpu_busy'])} busy"
                         if row["cpu_busy"] else ""))
        if agreement is not None:
            print(f"  the same C measured by two runs: rank correlation {agreement[0]:.2f} "
                  f"({agreement[1]:.2f} over the faster half)")
        if apart is not None and apart["near_median"] is not None:
            print(f"  ... apart by a median {apart['median']:.1%} (p90 {apart['p90']:.1%}); within 1.3x of the "
                  f"fastest {apart['near_median']:.1%} (p90 {apart['near_p90']:.1%}, {apart['near_pairs']} pairs)")
        if most is not None:
            print(f"  the first child of the root was measured {first_child:.1f} s in (median of the runs): no order of "
                  f"measuring gets to 95% sooner, so a model can make it about {most:.2f}x sooner than off at most")
        for base, model in (("off", "rank"), ("off", "rank-notes"), ("off", "rank-warm"), ("off", "rank-oracle")):
            if base in rows and model in rows and rows[model]["median_seconds_to_95"] > 0:
                ratios = ", ".join(
                    f"{float(k):.0%} {rows[base]['levels'][k]['median_seconds'] / v['median_seconds']:.2f}x"
                    for k, v in rows[model]["levels"].items() if v["median_seconds"] > 0)
                print(f"  time to: {base} / {model} = {ratios}")
    return summary


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--budget", type=float, default=180.0, help="seconds per search [180]")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--kernels", default=",".join(DEFAULT_KERNELS),
                   help=f"comma-separated, of {', '.join(KERNELS)} [{','.join(DEFAULT_KERNELS)}]")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--notes", action="store_true", help="also run rank-notes (rank with --compiler-notes)")
    p.add_argument("--warm", action="store_true", help="also run rank-warm (history of other workloads and sizes)")
    p.add_argument("--history", type=Path, metavar="DB",
                   help="with --warm: this database of earlier searches on this machine is the history, "
                        "instead of the warm-up searches")
    p.add_argument("--oracle", type=Path, metavar="DIR",
                   help="also run rank-oracle: a perfect model's times from an earlier run's --keep DIR")
    p.add_argument("--throughput-budget", type=float, default=60.0)
    p.add_argument("--throughput-seeds", type=int, default=3, help="throughput searches, one per seed [3]")
    p.add_argument("--timing", choices=("auto", "quiet", "shared"), default="auto", help="as schedsearch run --timing")
    p.add_argument("--skip-throughput", action="store_true")
    p.add_argument("--settings", default=None, metavar="A,B",
                   help="only these of the settings the other options ask for (e.g. off,rank-notes)")
    p.add_argument("--out", type=Path, default=None, help="write every run and the summary here (JSON)")
    p.add_argument("--keep", type=Path, default=None,
                   help="keep every run's database and its events (NAME.events.jsonl) in this folder")
    p.add_argument("--side-by-side", type=int, default=ROUNDS, metavar="N",
                   help=f"judge the near-best kernels by re-measuring them side by side in N driver processes "
                        f"(0: by the runs' own times alone) [{ROUNDS}]")
    p.add_argument("--resume", action="store_true",
                   help="with --keep: take the runs whose database there holds a completed search from it")
    args = p.parse_args(argv)
    kernels = [k.strip() for k in args.kernels.split(",") if k.strip()]
    unknown = [k for k in kernels if k not in KERNELS]
    if args.side_by_side < 0:
        print("search_efficiency: --side-by-side must be 0 or more", file=sys.stderr)
        return 2
    if unknown or args.seeds < 1:
        print(f"search_efficiency: unknown kernel(s) {', '.join(unknown)}; choose from {', '.join(KERNELS)}"
              if unknown else "search_efficiency: --seeds must be at least 1", file=sys.stderr)
        return 2
    print(f"CPU: {cpu_name()}; budget {args.budget:g} s per search, {args.seeds} seed(s), {args.workers} worker(s), "
          f"{args.timing} timing")
    if args.history is not None and not (args.warm and args.history.is_file()):
        print(f"search_efficiency: --history {args.history} needs --warm and an existing database", file=sys.stderr)
        return 2
    if args.oracle is not None and not any(args.oracle.glob("*.db")):
        print(f"search_efficiency: --oracle {args.oracle} holds no database of an earlier run (--keep DIR)",
              file=sys.stderr)
        return 2
    settings = (["off", "rank"] + (["rank-notes"] if args.notes else [])
                + (["rank-warm"] if args.warm else [])
                + (["rank-oracle"] if args.oracle else []))
    if args.settings is not None:
        wanted = [s.strip() for s in args.settings.split(",") if s.strip()]
        unknown = [s for s in wanted if s not in settings]
        if not wanted or unknown:
            print(f"search_efficiency: --settings {args.settings}: choose among {', '.join(settings)} "
                  "(--notes, --warm and --oracle add theirs)", file=sys.stderr)
            return 2
        settings = wanted
    runs: list[Run] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="sched-eff-") as tmp:
        work = Path(tmp) if args.keep is None else args.keep
        work.mkdir(parents=True, exist_ok=True)
        warm_db = args.history or work / "warm.db"
        if args.warm and args.history is None and not (args.resume and warm_db.is_file()):
            warm_db = warm_history(args.budget / 2, args.workers, work)
        for kernel in kernels:
            for seed in range(args.seeds):
                for setting in settings:
                    db = work / f"{kernel}-{setting}-{seed}.db"
                    out = kept(db) if args.resume else None
                    if out is None:
                        db.unlink(missing_ok=True)
                        db.with_suffix(".events.jsonl").unlink(missing_ok=True)  # a run cut short's
                        if setting == "rank-warm":
                            shutil.copyfile(warm_db, db)
                        if setting == "rank-oracle":
                            earlier = sorted(p for p in args.oracle.glob(f"{kernel}-*.db") if "oracle" not in p.name)
                            out = oracle_search(KERNELS[kernel], seed, args.budget, args.workers, db, earlier,
                                                timing=args.timing)
                        else:
                            out = search(KERNELS[kernel], setting, seed, args.budget, args.workers, db,
                                         timing=args.timing)
                    run = to_run(kernel, setting, seed, out, db)
                    runs.append(run)
                    best = duration(run.best_seconds) if run.best_seconds else "-"
                    print(f"{kernel} seed {seed} {setting}: {run.evaluated} evaluated in {run.elapsed:.0f} s, "
                          f"{run.expansions} nodes expanded, best {best}, rank correlation {run.spearman}", flush=True)
        summary = report(runs, args.budget, args.side_by_side)
        rate = None if args.skip_throughput else throughput(args.throughput_budget, args.workers, work,
                                                            max(1, args.throughput_seeds), args.timing)
    if rate:
        each = ", ".join(f"{r['per_second']:.2f}" for r in rate["runs"])
        print(f"\nthroughput: SGEMM 256, {rate['workers']} workers, {rate['timing']} timing: "
              f"{rate['per_second']:.2f} measured/s, median "
              f"of {len(rate['runs'])} seeds ({each})")
    print(f"\ntotal {time.monotonic() - started:.0f} s")
    if args.out:
        args.out.write_text(json.dumps({"cpu": cpu_name(), "budget": args.budget, "summary": summary,
                                        "throughput": rate, "runs": [asdict(r) for r in runs]}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
