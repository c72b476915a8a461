"""TVM MetaSchedule on the kernel-class suite, given a wall-time budget per case.

The peer measurement for ``kernel_classes.py``: each case of ``examples/kernels.py`` at its
default sizes (and SGEMM 512, written ``C = A @ B``) is written in TVM's tensor expressions
the plain way and tuned by MetaSchedule with its defaults (evolutionary search, XGBoost cost
model, batches of 64 candidates) for the given wall time, each case in a fresh work
directory. Tuning uses one search thread, one build worker, and MetaSchedule's runner timing
one candidate at a time on ``--threads`` threads (default 1). The target is LLVM for this
CPU (``llvm -mcpu=<LLVM's name for it> -num-cores=<threads>``); ``--sgemm N`` sets the SGEMM
case's size.

A measure callback records every measured candidate with the wall time (from the start of
``tune_tir``) at which its result came in, and ends the task once the budget has passed.
MetaSchedule only looks at callbacks between batches, so a case may run over its budget by
up to one batch (searching, building and measuring 64 candidates can take most of a
minute); the row says how long it actually tuned, and ``--trials-per-iter`` makes batches
smaller. The best schedule is then compiled again, its output checked against numpy, and it
is timed here on the same threads, pinned to the last CPUs (the minimum over 15 repeats of
``time_evaluator``, each at least 50 ms).

Install (its own environment, not the project's ``.venv``; not part of CI):

    python3 -m venv .venv-tvm && .venv-tvm/bin/pip install -r benchmarks/requirements-tvm.txt

Run:

    .venv-tvm/bin/python benchmarks/tvm_kernel_classes.py [--budget 120] [--cases ...] \
        [--json out.json] [--trials-per-iter 64] [--verbose]

Prints the CPU's model name and the TVM target, then one Markdown row per case: GFLOP/s of
the best kernel timed here, the best GFLOP/s MetaSchedule measured while tuning and the
tuning seconds at which it came in, the valid trials measured, the seconds tuned and the
output's largest error relative to numpy's. ``--json`` also writes each case's improvements
over time (seconds into tuning, best GFLOP/s so far), for "time to reach X".
"""

from __future__ import annotations

import argparse
import os

# Read before tvm is imported: its thread pool takes TVM_NUM_THREADS when it loads.
_early = argparse.ArgumentParser(add_help=False)
_early.add_argument("--threads", type=int, default=1)
THREADS = max(1, _early.parse_known_args()[0].threads)
os.environ["TVM_NUM_THREADS"] = str(THREADS)  # the kernels run on this many threads
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import json  # noqa: E402
import logging  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import tvm  # noqa: E402
from tvm import te  # noqa: E402
from tvm.ir.utils import derived_object  # noqa: E402
from tvm.s_tir import meta_schedule as ms  # noqa: E402
from tvm.target import codegen  # noqa: E402

Workload = tuple[list[te.Tensor], int]  # (inputs..., output), FLOP count


def matmul(m: int, n: int, k: int, relu: bool = False) -> Workload:
    a, b = te.placeholder((m, k), name="A"), te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    if relu:
        c = te.compute((m, n), lambda i, j: te.max(c[i, j], tvm.tirx.const(0.0, "float32")), name="relu")
    return [a, b, c], 2 * m * n * k


def matmul_aat(m: int, k: int) -> Workload:
    a = te.placeholder((m, k), name="A")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute((m, m), lambda i, j: te.sum(a[i, r] * a[j, r], axis=r), name="C")
    return [a, c], 2 * m * m * k


def bmm(bt: int, m: int, n: int, k: int) -> Workload:
    a, b = te.placeholder((bt, m, k), name="A"), te.placeholder((bt, k, n), name="B")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute((bt, m, n), lambda z, i, j: te.sum(a[z, i, r] * b[z, r, j], axis=r), name="C")
    return [a, b, c], 2 * bt * m * n * k


def conv2d(co: int, ci: int, h: int, w: int) -> Workload:
    """``out[o, y, x] = sum w[o, c, r, s] * inp[c, y + r, x + s]``, ``inp`` already padded."""
    inp, wt = te.placeholder((ci, h + 2, w + 2), name="inp"), te.placeholder((co, ci, 3, 3), name="w")
    c, r, s = (te.reduce_axis((0, e), name=v) for e, v in ((ci, "c"), (3, "r"), (3, "s")))
    out = te.compute((co, h, w), lambda o, y, x: te.sum(wt[o, c, r, s] * inp[c, y + r, x + s], axis=[c, r, s]),
                     name="out")
    return [inp, wt, out], 2 * co * ci * 9 * h * w


def matmul_chain(m: int, n: int, k: int, l_: int) -> Workload:
    a, b = te.placeholder((m, k), name="A"), te.placeholder((k, n), name="B")
    e = te.placeholder((n, l_), name="E")
    r1, r2 = te.reduce_axis((0, k), name="k"), te.reduce_axis((0, n), name="n")
    tmp = te.compute((m, n), lambda i, j: te.sum(a[i, r1] * b[r1, j], axis=r1), name="tmp")
    d = te.compute((m, l_), lambda i, j: te.sum(tmp[i, r2] * e[r2, j], axis=r2), name="D")
    return [a, b, e, d], 2 * m * n * k + 2 * m * l_ * n


def _conv_reference(inp: np.ndarray, w: np.ndarray) -> np.ndarray:
    windows = np.lib.stride_tricks.sliding_window_view(inp, (3, 3), axis=(1, 2))  # [c, y, x, r, s]
    return np.tensordot(w, windows, axes=([1, 2, 3], [0, 3, 4]))


#: Each case: its workload at ``kernels.py``'s default sizes, and numpy's answer to check it by.
CASES: dict[str, tuple[Callable[[], Workload], Callable[..., np.ndarray]]] = {
    "matmul_init": (lambda: matmul(500, 500, 500), lambda a, b: a @ b),
    "matmul_aat": (lambda: matmul_aat(512, 512), lambda a: a @ a.T),
    "bmm": (lambda: bmm(64, 48, 48, 48), np.matmul),
    "conv2d": (lambda: conv2d(64, 64, 56, 56), _conv_reference),
    "matmul_chain": (lambda: matmul_chain(256, 256, 256, 256), lambda a, b, e: (a @ b) @ e),
    "matmul_relu": (lambda: matmul(512, 512, 512, relu=True), lambda a, b: np.maximum(a @ b, 0)),
    "sgemm": (lambda: matmul(SGEMM, SGEMM, SGEMM), lambda a, b: a @ b),
}
SGEMM = 512  # the SGEMM case's size (``--sgemm``)


@derived_object
class Budget(ms.measure_callback.PyMeasureCallback):
    """Records each measured candidate's time; ends the task once ``seconds`` have passed."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.start = seconds, time.monotonic()
        self.trials: list[tuple[float, float]] = []  # (seconds into tuning, kernel seconds)

    def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results) -> None:
        now = time.monotonic() - self.start
        for result in runner_results:
            if result.error_msg is None and result.run_secs:
                self.trials.append((now, min(float(s) for s in result.run_secs)))
        if now >= self.seconds:
            task_scheduler.terminate_task(task_id)


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def target_spec() -> dict[str, Any]:
    """LLVM for this CPU on ``THREADS`` cores; ``znver4`` for a later Zen that TVM's LLVM does
    not know."""
    cpu = codegen.llvm_get_system_cpu()
    known = set(codegen.llvm_get_cpu_archlist(tvm.target.Target("llvm")))
    if cpu not in known and cpu.startswith("znver") and "znver4" in known:
        cpu = "znver4"
    return {"kind": "llvm", "mcpu": cpu, "num-cores": THREADS}


def timing_cpus() -> set[int]:
    """The CPUs the best kernel is timed on: the last ``THREADS`` of this process's, as
    ``kernel_classes.py`` times numpy and a search its kernels."""
    return set(sorted(os.sched_getaffinity(0))[-THREADS:])


def run_case(name: str, budget: float, target: tvm.target.Target, per_iter: int = 64,
             verbose: bool = False) -> dict[str, Any]:
    build, reference = CASES[name]
    tensors, flops = build()
    func = te.create_prim_func(tensors)
    # MetaSchedule's console log takes this level (it sets its logger to DEBUG after each run)
    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.INFO if verbose else logging.WARNING)
    with tempfile.TemporaryDirectory(prefix=f"tvm-{name}-") as work:
        clock = Budget(budget)
        database = ms.tune_tir(
            func, target, work, max_trials_global=1_000_000, num_trials_per_iter=per_iter,
            num_tuning_cores=1,
            builder=ms.builder.LocalBuilder(max_workers=1),
            measure_callbacks=[*ms.measure_callback.MeasureCallback.create("default"), clock],
        )
        tuned = time.monotonic() - clock.start
        schedule = ms.tir_integration.compile_tir(database, func, target)
    if schedule is None:
        raise RuntimeError(f"{name}: MetaSchedule measured no valid schedule in {budget:g} s")
    lib = tvm.compile(schedule.mod, target=target).jit()
    dev = tvm.cpu(0)
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal([int(d) for d in t.shape], dtype=np.float32) for t in tensors[:-1]]
    args = [tvm.runtime.tensor(x, dev) for x in inputs]
    args.append(tvm.runtime.tensor(np.zeros([int(d) for d in tensors[-1].shape], np.float32), dev))
    lib(*args)
    want = reference(*inputs)
    error = float(np.abs(args[-1].numpy() - want).max() / max(1.0, float(np.abs(want).max())))
    affinity = os.sched_getaffinity(0)
    os.sched_setaffinity(0, timing_cpus())  # pinned, as kernel_classes.py times numpy
    try:
        timer = lib.time_evaluator(lib.entry_name, dev, number=10, repeat=15, min_repeat_ms=50)
        runs = list(timer(*args).results)
    finally:
        os.sched_setaffinity(0, affinity)
    curve: list[tuple[float, float]] = []  # (seconds into tuning, best GFLOP/s so far) at each gain
    for at, secs in clock.trials:
        if not curve or flops / secs / 1e9 > curve[-1][1]:
            if curve and curve[-1][0] == round(at, 2):  # the same batch
                curve.pop()
            curve.append((round(at, 2), flops / secs / 1e9))
    return {"case": name, "gflops": flops / min(runs) / 1e9, "gflops_median": flops / statistics.median(runs) / 1e9,
            "tuning_best_gflops": curve[-1][1] if curve else None, "best_at_s": curve[-1][0] if curve else None,
            "trials": len(clock.trials), "tuned_s": tuned, "budget_s": budget,
            "max_rel_error": error, "curve": curve}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=120.0, help="wall-time seconds of tuning per case")
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES), metavar="CASE",
                        help=f"some of: {' '.join(CASES)} (default: all)")
    parser.add_argument("--trials-per-iter", type=int, default=64,
                        help="candidates built and measured per batch (MetaSchedule's default: 64)")
    parser.add_argument("--verbose", action="store_true", help="show MetaSchedule's log")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows (with curves) here")
    parser.add_argument("--threads", type=int, default=1, help="threads the kernels run on (the target's num-cores)")
    parser.add_argument("--sgemm", type=int, default=512, help="the SGEMM case's size")
    args = parser.parse_args()
    global SGEMM
    SGEMM = args.sgemm
    target = tvm.target.Target(target_spec())
    print(f"{cpu_name()}; TVM {tvm.__version__} MetaSchedule, kernels on {THREADS} thread(s), {args.budget:g} s per case, "
          f"batches of {args.trials_per_iter}")
    print(f"target: {target}\n")
    print("| case | TVM GFLOP/s | best in tuning (GFLOP/s) | found at | trials | tuned for | max rel. error |")
    print("|---|---|---|---|---|---|---|", flush=True)
    rows = []
    for name in args.cases:
        row = run_case(name, args.budget, target, args.trials_per_iter, args.verbose)
        rows.append(row)
        best = f"{row['tuning_best_gflops']:.1f} | {row['best_at_s']:.0f} s" if row["curve"] else "- | -"
        flag = "" if row["max_rel_error"] < 1e-3 else " WRONG"
        print(f"| {name} | {row['gflops']:.1f} | {best} | {row['trials']} | {row['tuned_s']:.0f} s "
              f"| {row['max_rel_error']:.1e}{flag} |", flush=True)
        if args.json is not None:  # after every case, so a long run keeps what it has
            args.json.write_text(json.dumps({"cpu": cpu_name(), "target": str(target), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
