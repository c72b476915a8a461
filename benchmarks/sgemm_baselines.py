"""SGEMM baselines: hand-written Exo schedules vs. single-threaded OpenBLAS, plus noise.

Run: ``python benchmarks/sgemm_baselines.py [--sizes 256 512] [--repeats 5]``

For each size it measures, side by side in one driver process (``remeasure``):
the unscheduled Exo SGEMM, the i,k,j reorder, an 8x32 tile with the C tile staged into a
stack buffer (``stage_mem`` + ``DRAM_STACK``), the same with the tile's rows unrolled, and a
4x32 tile staged and unrolled (its accumulators fit the 16 AVX2 registers better), and the
best schedules of schedsearch's own rewrites: an 8x8 micro_kernel left to gcc's vectoriser,
and a 6x16 simd_kernel in AVX2 instructions, each with the B panel packed.
numpy's ``A @ B`` (OpenBLAS, one thread) is timed in this process, pinned to the same CPU, with the same statistics
(median of samples that each repeat the call for at least ``min_sample_seconds``). Numpy
computes ``C = A @ B`` while the Exo kernels compute ``C += A @ B``; the extra n^2 adds are
negligible next to the n^3 multiply-adds.

Then it states the measurement noise of one candidate (the 4x32 schedule):
within a process (IQR / median of one run's samples) and across processes (spread of
medians over ``--repeats`` separate ``evaluate_candidate`` runs), and the spread of the
i,k,j/4x32 speed ratio over repeated side-by-side runs.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy is imported

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from exo.libs.memories import DRAM_STACK  # noqa: E402
from exo.stdlib.scheduling import (  # noqa: E402
    divide_loop,
    rename,
    reorder_loops,
    set_memory,
    simplify,
    stage_mem,
    unroll_loop,
)

from schedsearch.core import (  # noqa: E402
    KERNEL_SYMBOL,
    ArgRole,
    ArgSpec,
    BenchConfig,
    Candidate,
    DType,
    Schedule,
    Status,
    Workload,
    sha256_text,
)
from schedsearch.evaluate import evaluate_candidate, machine_info, remeasure  # noqa: E402
from schedsearch.evaluate.bench import bench_cpu  # noqa: E402

BEST = "exo tile 4x32 + stage C + unroll"
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "matmul.py"


def load_sgemm():
    """The ``sgemm`` proc of examples/matmul.py."""
    spec = importlib.util.spec_from_file_location("schedsearch_example_matmul", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.sgemm


def candidate(p) -> Candidate:
    c = rename(p, KERNEL_SYMBOL).c_code_str()
    return Candidate(Schedule(), c, sha256_text(c), str(p))


def tile_and_stage(base, ti: int, tj: int, unroll: bool):
    """Tile i by ``ti`` and j by ``tj``, order io jo k ii ji, stage the C tile around k in a
    stack buffer, and optionally unroll the tile's rows."""
    p = divide_loop(base, "i", ti, ["io", "ii"], perfect=True)
    p = divide_loop(p, "j", tj, ["jo", "ji"], perfect=True)
    p = reorder_loops(p, "ii jo")
    p = reorder_loops(p, "ji k")
    p = reorder_loops(p, "ii k")
    p = stage_mem(p, "for k in _: _", f"C[{ti}*io:{ti}*io+{ti}, {tj}*jo:{tj}*jo+{tj}]", "Cb")
    p = simplify(set_memory(p, "Cb", DRAM_STACK))
    return simplify(unroll_loop(p, "ii")) if unroll else p


def schedules(sgemm, n: int) -> dict[str, Candidate]:
    """The hand-written schedules, by name."""
    base = sgemm.partial_eval(M=n, N=n, K=n)
    return {
        "exo unscheduled": candidate(base),
        "exo i,k,j": candidate(reorder_loops(base, "j k")),
        "exo tile 8x32 + stage C": candidate(tile_and_stage(base, 8, 32, unroll=False)),
        "exo tile 8x32 + stage C + unroll": candidate(tile_and_stage(base, 8, 32, unroll=True)),
        BEST: candidate(tile_and_stage(base, 4, 32, unroll=True)),
        "micro_kernel 8x8 + pack B + split k": candidate(micro_kernel_path(n)),
        "register_tile 6x16 (AVX2) + pack B": candidate(simd_kernel_path(n)),
        **({"register_tile 6x64 (AVX-512) + pack B": candidate(simd_kernel_path(n, "avx512", 64))}
           if n % 64 == 0 else {}),
    }


def micro_kernel_path(n: int):
    """The best schedule of gcc-vectorised rewrites on AVX2: three schedsearch rewrites."""
    from schedsearch.core import Rewrite, RewriteKind
    from schedsearch.transforms import build_proc, load_workload

    names = {"ao": "io", "ai": "ii", "bo": "jo", "bi": "ji", "aio": "iio", "aii": "iii", "name": "C_stage"}
    steps = (
        Rewrite.make(RewriteKind.MICRO_KERNEL, "i #0", inner="j #0", red="k #0", rows=8, cols=8, group=4,
                     order="cols", window="C[8 * io:8 * io + 8, 8 * jo:8 * jo + 8]", **names),
        Rewrite.make(RewriteKind.PACK, "io #0", buffer="B", name="B_pack", window=f"B[0:{n}, 8 * jo:8 * jo + 8]"),
        Rewrite.make(RewriteKind.SPLIT, "k #0", factor=2, outer="ko", inner="ki", tail="perfect"),
    )
    return build_proc(load_workload(EXAMPLE, "sgemm", {"M": n, "N": n, "K": n}), Schedule(steps))


def simd_kernel_path(n: int, isa: str = "avx2", cols: int = 16):
    """Two schedsearch rewrites: a 6-row register tile of the target (6x16 on AVX2, 6x64 on
    AVX-512; a cut tail for the rows 6 does not divide) with the columns of tiles outermost,
    then B's column panel packed."""
    from schedsearch.core import ExpandOptions, RewriteKind
    from schedsearch.transforms import build_proc, load_workload, propose, try_apply

    options = ExpandOptions(target=isa)
    proc = build_proc(load_workload(EXAMPLE, "sgemm", {"M": n, "N": n, "K": n}))
    simd = next(r for r in propose(proc, options) if r.kind is RewriteKind.REGISTER_TILE
                and (r.arg("rows"), r.arg("cols"), r.arg("order")) == (6, cols, "cols"))
    proc = try_apply(proc, simd)
    pack = next(r for r in propose(proc, options) if r.kind is RewriteKind.PACK
                and r.target == "io #0" and r.arg("buffer") == "B")
    return try_apply(proc, pack)


def workload(n: int) -> Workload:
    src = EXAMPLE.read_text()
    args = (
        ArgSpec("A", ArgRole.TENSOR, DType.F32, (n, n)),
        ArgSpec("B", ArgRole.TENSOR, DType.F32, (n, n)),
        ArgSpec("C", ArgRole.TENSOR, DType.F32, (n, n), output=True),
    )
    return Workload(str(EXAMPLE), src, sha256_text(src), "sgemm", (("M", n), ("N", n), ("K", n)), args, 2 * n**3)


def time_numpy(n: int, config: BenchConfig) -> float:
    """Median seconds of ``A @ B`` with the same sampling scheme as the C driver."""
    rng = np.random.default_rng(config.seed)
    a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    b = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    out = np.empty((n, n), np.float32)
    # Same CPU the driver pins single-threaded kernels to, so both see the same core.
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {bench_cpu(True)})
    try:
        return _sample_numpy(a, b, out, config)
    finally:
        os.sched_setaffinity(0, allowed)


def _sample_numpy(a: np.ndarray, b: np.ndarray, out: np.ndarray, config: BenchConfig) -> float:
    end = time.perf_counter() + max(config.warmup_seconds, 0.05)
    while time.perf_counter() < end:
        np.matmul(a, b, out=out)
    t0 = time.perf_counter()
    np.matmul(a, b, out=out)
    inner = max(1, int(config.min_sample_seconds / max(time.perf_counter() - t0, 1e-9)) + 1)
    samples = []
    for _ in range(config.samples):
        t0 = time.perf_counter()
        for _ in range(inner):
            np.matmul(a, b, out=out)
        samples.append((time.perf_counter() - t0) / inner)
    return statistics.median(samples)


def spread(xs: list[float]) -> float:
    """(max - min) / median."""
    return (max(xs) - min(xs)) / statistics.median(xs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 512])
    ap.add_argument("--repeats", type=int, default=5, help="separate processes for the noise estimate")
    ap.add_argument("--cache-dir", type=Path, default=None)
    opts = ap.parse_args()
    config = BenchConfig(samples=9, min_sample_seconds=0.02, warmup_seconds=0.05, run_timeout=60.0)
    cache = opts.cache_dir or Path(tempfile.mkdtemp(prefix="schedsearch-bench-"))
    m = machine_info(config)
    print(f"# {m.cpu_model}, {m.cores} cores, {m.compiler_version}, {' '.join(m.cflags)}, exo {m.exo_version}")
    print(f"# numpy {np.__version__}, OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}")
    sgemm = load_sgemm()
    for n in opts.sizes:
        w = workload(n)
        cands = schedules(sgemm, n)
        ref = cands["exo unscheduled"]
        blas = time_numpy(n, config)
        names = list(cands)
        ms = remeasure(w, ref, [cands[k] for k in names], config, cache)
        print(f"\n## n = {n}  ({w.flops / 1e6:.1f} MFLOP per call)")
        print(f"{'variant':36} {'median ms':>10} {'GFLOP/s':>8} {'vs BLAS':>8} {'IQR/med':>8}")
        for name, meas in zip(names, ms):
            if meas.status is not Status.OK or meas.timing is None:
                print(f"{name:36} {meas.status.value}: {meas.error[:80]}")
                continue
            t = meas.timing
            print(
                f"{name:36} {t.median * 1e3:10.3f} {w.flops / t.median / 1e9:8.1f} "
                f"{blas / t.median:8.2f} {t.spread * 100:7.1f}%"
            )
        print(f"{'numpy / OpenBLAS (1 thread)':36} {blas * 1e3:10.3f} {w.flops / blas / 1e9:8.1f} {1.0:8.2f}")

        tiled = cands[BEST]
        within = ms[names.index(BEST)].timing
        medians = []
        for _ in range(opts.repeats):
            one = evaluate_candidate(w, ref, tiled, config, cache)
            assert one.timing is not None, one.error
            medians.append(one.timing.median)
        ratios = []
        for _ in range(max(2, opts.repeats // 2)):
            pair = remeasure(w, ref, [tiled, cands["exo i,k,j"]], config, cache)
            ratios.append(pair[1].timing.median / pair[0].timing.median)
        print(
            f"noise ({BEST}): within one process IQR/median {within.spread * 100:.1f}%; "
            f"across {opts.repeats} processes medians {min(medians) * 1e3:.3f}..{max(medians) * 1e3:.3f} ms "
            f"(spread {spread(medians) * 100:.1f}%); i,k,j / 4x32 time ratio side by side "
            f"{min(ratios):.2f}..{max(ratios):.2f} (spread {spread(ratios) * 100:.1f}%)"
        )


if __name__ == "__main__":
    main()
