"""The kernel-class suite: kernels written the way people write them, each searched with
the defaults for the same wall-time budget, against references timed on this machine.

Run: ``python benchmarks/kernel_classes.py [--budget 120] [--cases matmul_init conv2d ...]``

Each case of ``examples/kernels.py`` (plus SGEMM 512 from ``examples/matmul.py``, where the
register tile applies as written) is searched by ``schedsearch run`` in a process of its
own, with a fresh database. Its best (re-measured side by side) is compared with

- numpy's equivalent through OpenBLAS, one thread, pinned, timed in this process: ``A @ B``
  for a product, a batched ``np.matmul``, ``(A @ B) @ E`` for the chain, ``maximum(A @ B, 0)``
  for the epilogue; for the 3x3 convolution the GEMM of the same FLOPs an im2col lowering
  would run (``w`` as Co x 9Ci times a 9Ci x HW matrix), the im2col itself not counted;
- the machine's f32 FMA peak of one core (``fma_peak.py``).

With ``--threads N`` every search runs with ``--threads N`` and numpy with N OpenBLAS
threads, pinned to the same N cores the search times its parallel kernels on (a child
process: OpenBLAS reads its thread count when it loads); the peak is then N cores'.
``--sgemm N`` sets the SGEMM case's size (default 512).

Prints one Markdown table row per case, ready for RESULTS.md, and the CPU's model name.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy is imported
# Where the machine sets them (older OpenBLAS builds needed them), they hold a current
# OpenBLAS to an older CPU's kernels: the reference runs with the kernels of this CPU.
for _name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
    os.environ.pop(_name, None)

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fma_peak import fma_peak  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "examples" / "kernels.py"
MATMUL = ROOT / "examples" / "matmul.py"
rng = np.random.default_rng(0)


def _f32(*shape):
    return rng.standard_normal(shape, dtype=np.float32)


def _gemm(m: int, n: int, k: int):
    a, b = _f32(m, k), _f32(k, n)
    return lambda: a @ b


def _numpy_case(proc: str, s: dict[str, int]):
    """(the numpy call, its FLOP count) standing for ``proc`` at sizes ``s``."""
    if proc in ("matmul_init", "matmul_relu", "sgemm"):
        m, n, k = s["M"], s["N"], s["K"]
        a, b = _f32(m, k), _f32(k, n)
        call = (lambda: np.maximum(a @ b, 0)) if proc == "matmul_relu" else (lambda: a @ b)
        return call, 2 * m * n * k
    if proc == "matmul_aat":
        a = _f32(s["M"], s["K"])
        return (lambda: a @ a.T), 2 * s["M"] ** 2 * s["K"]
    if proc == "bmm":
        a, b = _f32(s["Bt"], s["M"], s["K"]), _f32(s["Bt"], s["K"], s["N"])
        return (lambda: np.matmul(a, b)), 2 * s["Bt"] * s["M"] * s["N"] * s["K"]
    if proc == "conv2d":
        co, ci, hw = s["Co"], s["Ci"], s["H"] * s["W"]
        return _gemm(co, hw, 9 * ci), 2 * co * hw * 9 * ci
    if proc == "matmul_chain":
        a, b, e = _f32(s["M"], s["K"]), _f32(s["K"], s["N"]), _f32(s["N"], s["L"])
        return (lambda: (a @ b) @ e), 2 * s["M"] * s["N"] * (s["K"] + s["L"])
    raise ValueError(proc)


def time_call(call, seconds: float = 1.0) -> float:
    """Median seconds of one call, over samples of at least 20 ms each."""
    call()
    reps, t0 = 1, time.perf_counter()
    call()
    one = max(time.perf_counter() - t0, 1e-7)
    reps = max(1, int(0.02 / one))
    samples, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end or len(samples) < 5:
        t0 = time.perf_counter()
        for _ in range(reps):
            call()
        samples.append((time.perf_counter() - t0) / reps)
    return statistics.median(samples)


def blas_kernel() -> str:
    """The BLAS numpy runs and the CPU kernels it chose (threadpoolctl, when installed)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "unnamed (install threadpoolctl to name it)"
    return ", ".join(f"{i.get('internal_api')} {i.get('version')} {i.get('architecture')}" for i in threadpool_info())


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            name = line.split(":", 1)[1].strip()
            family = next(x for x in Path("/proc/cpuinfo").read_text().splitlines() if x.startswith("cpu family"))
            return f"{name} (family {family.split(':')[1].strip()})"
    return "unknown CPU"


CASES = ("matmul_init", "matmul_aat", "bmm", "conv2d", "matmul_chain", "matmul_relu", "sgemm")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=120.0)
    parser.add_argument("--cases", nargs="*", default=list(CASES))
    parser.add_argument("--numpy-only", action="store_true", help="time the references alone, no search")
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep each case's database and event log in this folder (benchmarks/early_stop.py reads them)")
    parser.add_argument("--run-args", default="", help="more `schedsearch run` options for every case, e.g. --no-early-stop")
    parser.add_argument("--threads", type=int, default=1, help="threads for the kernels and for numpy")
    parser.add_argument("--sgemm", type=int, default=512, help="the SGEMM case's size")
    parser.add_argument("--numpy-child", nargs=2, metavar=("PROC", "SIZES"), help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.numpy_child:
        print(numpy_child(opts.numpy_child[0], json.loads(opts.numpy_child[1]), opts.threads))
        return
    os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})  # numpy pinned to one core
    peak = fma_peak() * opts.threads
    print(f"{cpu_model()}; f32 FMA peak of {opts.threads} core(s) {peak:.1f} GFLOP/s; {opts.threads} thread(s); budget {opts.budget:.0f} s per case; "
          f"numpy's BLAS: {blas_kernel()}\n")
    print("| case | sizes | schedsearch GFLOP/s | 95% of it at | numpy GFLOP/s | x numpy | x FMA peak | depth |")
    print("|---|---|---|---|---|---|---|---|")
    from schedsearch.transforms.workload import load_workload

    for proc in opts.cases:
        file = MATMUL if proc == "sgemm" else KERNELS
        sizes = {"M": opts.sgemm, "N": opts.sgemm, "K": opts.sgemm} if proc == "sgemm" else None
        w = load_workload(file, proc, sizes)
        if opts.threads == 1:
            call, flops = _numpy_case(proc, w.sizes_dict)
            ref = flops / time_call(call) / 1e9
        else:
            ref = numpy_threads(proc, w.sizes_dict, opts.threads)
        if opts.numpy_only:
            print(f"| {proc} | numpy {ref:.1f} GFLOP/s ({ref / peak:.2f} of the FMA peak) |", flush=True)
            continue
        os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
        with tempfile.TemporaryDirectory() as tmp:
            extra = (["--size", ",".join(f"{k}={v}" for k, v in sizes.items())] if sizes else []) + opts.run_args.split()
            extra += ["--threads", str(opts.threads)] if opts.threads > 1 else []
            folder = Path(tmp) if opts.keep is None else opts.keep
            folder.mkdir(parents=True, exist_ok=True)
            result = search(file, proc, opts.budget, folder / f"{proc}.db", extra)
        os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
        best = result["best"] or {}
        ours = best.get("gflops") or 0.0
        events = result.get("best_at", "-")
        print(f"| {proc} | {','.join(f'{k}={v}' for k, v in w.sizes_dict.items())} | {ours:.1f} | {events} | "
              f"{ref:.1f} | {ours / ref:.2f} | {ours / peak:.2f} | {best.get('depth', '-')} |", flush=True)


def numpy_threads(proc: str, sizes: dict[str, int], threads: int) -> float:
    """numpy's GFLOP/s for ``proc`` with ``threads`` OpenBLAS threads (a child process)."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": str(threads)}
    every = set(range(os.cpu_count() or 1))
    # On every core when it starts (this process is pinned to one): OpenBLAS counts the cores
    # it may use when it loads, and starts no more threads than that.
    out = subprocess.run([sys.executable, __file__, "--threads", str(threads), "--numpy-child", proc,
                          json.dumps(sizes)], env=env, capture_output=True, text=True, check=True,
                         preexec_fn=lambda: os.sched_setaffinity(0, every))
    return float(out.stdout.strip().splitlines()[-1])


def numpy_child(proc: str, sizes: dict[str, int], threads: int) -> float:
    """In the child: numpy's GFLOP/s on the cores a search times its parallel kernels on."""
    from schedsearch.evaluate.bench import thread_cpus

    os.sched_setaffinity(0, set(thread_cpus(threads)))
    call, flops = _numpy_case(proc, sizes)
    return flops / time_call(call) / 1e9


def search(file: Path, proc: str, budget: float, db: Path, extra: list[str]) -> dict:
    """``schedsearch run --json`` of ``proc`` with the defaults, ``budget`` seconds and extra
    arguments (sizes); ``best_at``: when the search first measured a candidate within 95%
    of its final best's speed."""
    exe = Path(sys.executable).with_name("schedsearch")
    events = db.with_suffix(".events")
    out = subprocess.run([str(exe), "run", str(file), "--proc", proc, "--budget", str(budget), "--db", str(db),
                          "--json", "--events", str(events), *extra], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{proc}: schedsearch run failed: {out.stderr.strip().splitlines()[-1:]}")
    result = json.loads(out.stdout)
    final = ((result.get("best") or {}).get("search_time") or {}).get("seconds")
    for line in events.read_text().splitlines() if events.exists() and final else []:
        event = json.loads(line)
        seconds = (event.get("record") or {}).get("seconds")
        if event.get("kind") == "new_best" and seconds and seconds <= final / 0.95:
            result["best_at"] = f"{event['elapsed']:.0f} s"
            break
    return result


if __name__ == "__main__":
    main()
