"""What a search finds per kernel and target, next to a reference measured in the same run.

Each case runs one search from the unscheduled proc (2 Ray workers, the given budget,
finalists re-measured), then times the best schedule's kernel and its reference in turns
(``--rounds`` rounds of one each, on a quiet machine after the search) and compares their
medians, so a drift of the machine between the search and the reference hits both:

- ``sgemm512``: SGEMM 512 f32 against OpenBLAS SGEMM (numpy, one thread, pinned to the
  benchmark core; on an AVX-512 CPU also held to its AVX-512 kernels, the faster counts); ``sgemm512-avx2`` the same with ``--target avx2`` against OpenBLAS held to
  its AVX2 kernels (``OPENBLAS_CORETYPE=Haswell``, timed in a child process).
- ``quickstart``: the README's quick start, SGEMM 256 for 2 minutes, against OpenBLAS.
- ``conv1d_mc`` and ``conv1d``: against OpenBLAS SGEMM 512's GFLOP/s (a convolution should
  reach a good share of the machine's matmul speed).
- ``gemv``, ``gemv_t``, ``dgemv``, ``dgemv_t`` (1024^2): against numpy's ``A @ x`` / ``x @ A``.
- ``blur2`` and ``blur2_local`` (512^2): against Halide's Adams2019 autoscheduler on the same
  blur (``benchmarks/halide_blur.py``; needs ``pip install halide``) with the same float
  arithmetic. Halide by default divides by 3 as a multiplication by its reciprocal, so the
  ``-relaxed`` cases search with ``--float relaxed`` (gcc ``-freciprocal-math``) against
  default Halide, and the plain cases search strictly against Halide with ``StrictFloat``.

    .venv/bin/python benchmarks/targets.py [CASE ...] [--budget-scale 0.1]

Run one benchmark at a time on a quiet machine; every number names the CPU it ran on.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy is imported anywhere
# OpenBLAS as it loads by default on this CPU: a core type or cache size set for the whole
# environment would hold the reference to other kernels than a user of numpy gets
for _name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
    os.environ.pop(_name, None)

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from schedsearch.cli.wiring import make_cost_model
from schedsearch.core import BenchConfig, Candidate, ExpandOptions, FloatMode, SearchConfig
from schedsearch.evaluate import cpu_flags, machine_info
from schedsearch.evaluate.bench import bench_cpu
from schedsearch.evaluate.ray_backend import RayExecutor
from schedsearch.evaluate.side_by_side import remeasure
from schedsearch.search import make_strategy, run_search
from schedsearch.numbers import ending
from schedsearch.store import open_store
from schedsearch.targets import build_flags, resolve
from schedsearch.transforms import Expander, describe_step, load_workload, root_candidate

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent / "examples"
REF = BenchConfig(samples=9, min_sample_seconds=0.02, warmup_seconds=0.05)


def pinned_median(fn: Callable[[], object], config: BenchConfig = REF) -> float:
    """Median seconds per call of ``fn`` on the core the C driver pins kernels to."""
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {bench_cpu(True)})
    try:
        end = time.perf_counter() + config.warmup_seconds
        while time.perf_counter() < end:
            fn()
        t0 = time.perf_counter()
        fn()
        inner = max(1, int(config.min_sample_seconds / max(time.perf_counter() - t0, 1e-9)) + 1)
        samples = []
        for _ in range(config.samples):
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            samples.append((time.perf_counter() - t0) / inner)
        return statistics.median(samples)
    finally:
        os.sched_setaffinity(0, allowed)


def sgemm_seconds(n: int) -> float:
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(-1, 1, (n, n)).astype(np.float32) for _ in range(2))
    out = np.empty((n, n), np.float32)
    return pinned_median(lambda: np.matmul(a, b, out=out))


def sgemm_coretype_seconds(n: int, coretype: str) -> float:
    """OpenBLAS held to one core type's kernels (``OPENBLAS_CORETYPE``, read when OpenBLAS
    loads, hence a child process): ``Haswell`` for its AVX2 kernels, ``SkylakeX`` for AVX-512."""
    code = f"import sys; sys.path.insert(0, {str(HERE)!r}); import targets; print(targets.sgemm_seconds({n}))"
    env = {**os.environ, "OPENBLAS_CORETYPE": coretype, "OPENBLAS_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def sgemm_best_seconds(n: int) -> tuple[str, float]:
    """OpenBLAS SGEMM as it loads here, and - on an AVX-512 CPU - held to its AVX-512
    kernels too: a CPU newer than the OpenBLAS build (AMD Zen 5 with OpenBLAS 0.3.31) gets
    its AVX2 kernels by default, at half the speed. The faster of the two, named."""
    label, seconds = f"OpenBLAS SGEMM {n} (numpy, 1 thread)", sgemm_seconds(n)
    if "avx512f" in cpu_flags():
        wide = sgemm_coretype_seconds(n, "SkylakeX")
        if wide < seconds:
            label, seconds = f"OpenBLAS SGEMM {n} (numpy, 1 thread, AVX-512 kernels: OPENBLAS_CORETYPE=SkylakeX)", wide
    return label, seconds


def gemv_seconds(n: int, dtype: str, transposed: bool) -> float:
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (n, n)).astype(dtype)
    x = rng.uniform(-1, 1, n).astype(dtype)
    y = np.empty(n, dtype)
    if transposed:
        return pinned_median(lambda: np.matmul(x, a, out=y))
    return pinned_median(lambda: np.matmul(a, x, out=y))


def halide_seconds(h: int, w: int, strict: bool = False) -> float:
    """Halide Adams2019 on the blur; ``strict`` keeps IEEE float semantics (StrictFloat), as an
    Exo schedule must: by default Halide divides by 3 as a multiplication by its reciprocal."""
    sys.path.insert(0, str(HERE))
    from halide_blur import halide_blur_seconds  # the sibling benchmark script

    return halide_blur_seconds(h, w, "Adams2019", cpu=bench_cpu(True), strict=strict)


@dataclass(frozen=True)
class Case:
    """One kernel to tune and how to judge it."""

    file: str
    proc: str
    sizes: dict[str, int]
    budget: float  # seconds of search
    target: str = "auto"
    # "gflops:<what>" compares GFLOP/s with a reference's; "time:<what>" compares times
    reference: str = "gflops:sgemm512"
    float_mode: FloatMode = FloatMode.STRICT


CASES = {
    "sgemm512": Case("matmul.py", "sgemm", {"M": 512, "N": 512, "K": 512}, 600),
    "sgemm512-avx2": Case("matmul.py", "sgemm", {"M": 512, "N": 512, "K": 512}, 600, "avx2",
                          "gflops:sgemm512-haswell"),
    "sgemm1024": Case("matmul.py", "sgemm", {"M": 1024, "N": 1024, "K": 1024}, 300,
                      reference="gflops:sgemm1024"),
    "sgemm2048": Case("matmul.py", "sgemm", {"M": 2048, "N": 2048, "K": 2048}, 300,
                      reference="gflops:sgemm2048"),
    "quickstart": Case("matmul.py", "sgemm", {"M": 256, "N": 256, "K": 256}, 120, reference="gflops:sgemm256"),
    "conv1d_mc": Case("conv1d_mc.py", "conv1d_mc", {"C": 32, "O": 64, "N": 1024, "R": 5}, 180),
    "conv1d": Case("conv1d.py", "conv1d", {"N": 4096, "R": 16}, 180),
    "gemv": Case("gemv.py", "gemv", {"M": 1024, "N": 1024}, 180, reference="time:gemv"),
    "gemv_t": Case("gemv.py", "gemv_t", {"M": 1024, "N": 1024}, 180, reference="time:gemv_t"),
    "dgemv": Case("gemv.py", "dgemv", {"M": 1024, "N": 1024}, 180, reference="time:dgemv"),
    "dgemv_t": Case("gemv.py", "dgemv_t", {"M": 1024, "N": 1024}, 180, reference="time:dgemv_t"),
    "blur2": Case("blur.py", "blur2", {"H": 512, "W": 512}, 180, reference="time:halide-strict"),
    "blur2-relaxed": Case("blur.py", "blur2", {"H": 512, "W": 512}, 180, reference="time:halide",
                          float_mode=FloatMode.RELAXED),
    "blur2_local": Case("blur.py", "blur2_local", {"H": 512, "W": 512}, 180, reference="time:halide-strict"),
    "blur2_local-relaxed": Case("blur.py", "blur2_local", {"H": 512, "W": 512}, 180, reference="time:halide",
                                float_mode=FloatMode.RELAXED),
}


def reference_seconds(name: str, case: Case) -> tuple[str, float, float]:
    """(label, seconds per call of the reference, its FLOP count or 0 when compared by time)."""
    kind, what = case.reference.split(":")
    if what.startswith("sgemm"):
        n = int(what.removeprefix("sgemm").split("-")[0])
        if what.endswith("haswell"):
            return "OpenBLAS SGEMM 512, AVX2 kernels (OPENBLAS_CORETYPE=Haswell)", sgemm_coretype_seconds(n, "Haswell"), \
                2 * n**3
        label, seconds = sgemm_best_seconds(n)
        return label, seconds, 2 * n**3
    if what.startswith("halide"):
        strict = what.endswith("strict")
        label = f"Halide Adams2019 (1 thread{', StrictFloat' if strict else ''})"
        return label, halide_seconds(case.sizes["H"], case.sizes["W"], strict=strict), 0
    dtype = "float64" if what.startswith("d") else "float32"
    transposed = what.endswith("_t")
    label = f"numpy {'x @ A' if transposed else 'A @ x'} {dtype} (OpenBLAS, 1 thread)"
    return label, gemv_seconds(case.sizes["M"], dtype, transposed), 0


def tune(case: Case, budget: float, tmp: str, name: str, auto_stop: bool = True) -> dict:
    """One search of ``case``; the best's re-measured seconds and GFLOP/s."""
    workload = load_workload(EXAMPLES / case.file, case.proc, case.sizes)
    chosen = resolve(case.target, cpu_flags())
    target = chosen.name.value
    # as `schedsearch run --target --float` builds
    bench = BenchConfig(cflags=build_flags(BenchConfig().cflags, chosen, case.float_mode), float_mode=case.float_mode)
    config = SearchConfig(max_seconds=budget, workers=2, finalists=3, bench=bench, expand=ExpandOptions(target=target),
                          auto_stop=auto_stop)
    cache = Path(tmp) / f"{name}.cache"  # a fresh build cache: nothing compiled before is free
    executor = RayExecutor(Expander, config.expand, config.bench, workers=2, cache_dir=cache)
    store = open_store(f"{tmp}/{name}.db")
    model = make_cost_model(config, store, executor)  # as `schedsearch run` does (default: rank)
    started = time.perf_counter()
    try:
        outcome = run_search(workload, root_candidate(workload), make_strategy(config), executor, store, config,
                             cost_model=model)
    finally:
        if model is not None:
            model.close()
        executor.close()
    record = store.get_search(outcome.search_id)
    best = store.get_candidate(record.best_candidate_id) if record.best_candidate_id else None
    store.close()
    root = root_candidate(workload)
    kernel = root if best is None else Candidate(best.schedule, best.c_source, best.fingerprint, best.proc_text,
                                                 root.fingerprint, best.depth)
    return {
        "target": target, "float_mode": case.float_mode.value, "cflags": " ".join(bench.cflags), "wall": time.perf_counter() - started,
        "evaluated": record.counters.evaluated, "search_seconds": record.best_seconds,
        "ended": ending(record).value, "elapsed": record.elapsed_seconds - record.counters.spent.baseline_wait,
        "model_spearman": record.model_accuracy.spearman if record.model_accuracy else None,
        "baseline": record.baseline_seconds, "flops": workload.flops,
        "schedule": [describe_step(s) for s in best.schedule.steps] if best else [],
        "_remeasure": (workload, root, kernel, bench, cache),
    }


def side_by_side(name: str, case: Case, found: dict, rounds: int) -> tuple[str, float, float, float]:
    """(reference label, its median seconds, the best kernel's median seconds, reference FLOPs),
    timing the two in turns so both see the same machine."""
    workload, root, kernel, bench, cache = found.pop("_remeasure")
    refs, mine = [], []
    for _ in range(rounds):
        label, ref, ref_flops = reference_seconds(name, case)
        refs.append(ref)
        m = remeasure(workload, root, [kernel], bench, cache)[0]
        if m.seconds is None:
            raise SystemExit(f"{name}: the best schedule failed its re-measurement: {m.status}: {m.error}")
        mine.append(m.seconds)
    return label, statistics.median(refs), statistics.median(mine), ref_flops


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*", metavar="CASE", help=f"some of {', '.join(CASES)} (default: all)")
    ap.add_argument("--budget-scale", type=float, default=1.0, help="multiply every budget (0.1 for a smoke run)")
    ap.add_argument("--budget", type=float, default=None, help="seconds of search for every case (instead of its own)")
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    ap.add_argument("--no-early-stop", action="store_true", help="every search runs to its budget")
    ap.add_argument("--rounds", type=int, default=5, help="turns of reference and best kernel timed after each search")
    args = ap.parse_args()
    unknown = [c for c in args.cases if c not in CASES]
    if unknown:
        ap.error(f"unknown case(s) {', '.join(unknown)}; choose from {', '.join(CASES)}")
    info = machine_info(BenchConfig())
    print(f"# {info.cpu_model}, {info.cores} cores, {info.compiler_version}, target auto = "
          f"{resolve('auto', cpu_flags()).name}", flush=True)
    tmp = tempfile.mkdtemp(prefix="schedsearch-targets-")
    results = {}
    for name in args.cases or list(CASES):
        case = CASES[name]
        budget = (args.budget or case.budget) * args.budget_scale
        found = tune(case, budget, tmp, name, auto_stop=not args.no_early_stop)
        label, ref, seconds, ref_flops = side_by_side(name, case, found, args.rounds)
        found["seconds"] = seconds
        if ref_flops:
            gflops, ref_gflops = found["flops"] / seconds / 1e9, ref_flops / ref / 1e9
            ratio = gflops / ref_gflops
            line = f"{gflops:.1f} GFLOP/s vs {ref_gflops:.1f} GFLOP/s of {label}: {ratio:.2f}x"
        else:
            ratio = ref / seconds
            line = f"{seconds * 1e6:.1f} us vs {ref * 1e6:.1f} us of {label}: {ratio:.2f}x"
        print(f"{name:14s} [{found['target']}, {case.float_mode} float, {budget:.0f} s, {found['ended']} after {found['elapsed']:.0f} s, {found['evaluated']} evaluated, "
              f"{found['baseline'] / seconds:.1f}x over unscheduled] {line}", flush=True)
        print(f"{'':14s} schedule: {'; '.join(found['schedule'])}", flush=True)
        results[name] = {**found, "reference": label, "reference_seconds": ref, "ratio": ratio}
    if args.json:
        args.json.write_text(json.dumps({"cpu": info.cpu_model, "results": results}, indent=2))


if __name__ == "__main__":
    main()
