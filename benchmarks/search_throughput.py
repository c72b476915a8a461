"""Search throughput and quality (a measurement, not a test).

1. Candidates evaluated per minute with 1 and 2 Ray workers (and no Ray) on SGEMM 256,
   and the share of wall time the driver spends outside the workers (time not spent
   waiting for the executor's results).
2. The best GFLOP/s found on SGEMM 512 after 5 and 10 minutes of one search, next to numpy
   (OpenBLAS, one thread) measured in the same run.

    .venv/bin/python benchmarks/search_throughput.py [--quick] [--skip-quality]

``--quick`` shortens every budget (for a smoke run); ``--target`` picks the instruction set
as ``schedsearch run --target`` does. Each run starts with an empty build cache.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy is imported anywhere

import argparse
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from schedsearch.core import BenchConfig, Candidate, Executor, ExpandOptions, Expansion, Measurement, SearchConfig, Workload
from schedsearch.evaluate import LocalExecutor, cpu_flags
from schedsearch.evaluate.ray_backend import RayExecutor
from schedsearch.search import make_strategy, run_search
from schedsearch.store import open_store
from schedsearch.targets import TARGETS, resolve
from schedsearch.transforms import Expander, load_workload, root_candidate

MATMUL = Path(__file__).resolve().parents[1] / "examples" / "matmul.py"


class TimedExecutor:
    """Wraps an executor and adds up the time the driver waits for its results."""

    def __init__(self, inner: Executor) -> None:
        self.inner = inner
        self.waiting = 0.0

    def _timed(self, it: Iterator) -> Iterator:
        while True:
            t = time.perf_counter()
            try:
                item = next(it)
            except StopIteration:
                self.waiting += time.perf_counter() - t
                return
            self.waiting += time.perf_counter() - t
            yield item

    def expand(self, workload: Workload, parents: Sequence[Candidate]) -> Iterator[Expansion]:
        return self._timed(iter(self.inner.expand(workload, parents)))

    def evaluate(self, workload: Workload, reference: Candidate, candidates: Sequence[Candidate]) -> Iterator[Measurement]:
        return self._timed(iter(self.inner.evaluate(workload, reference, candidates)))

    def remeasure(self, workload: Workload, reference: Candidate, candidates: Sequence[Candidate]) -> list[Measurement]:
        t = time.perf_counter()
        try:
            return self.inner.remeasure(workload, reference, candidates)
        finally:
            self.waiting += time.perf_counter() - t

    def machine(self):  # noqa: ANN201
        return self.inner.machine()

    def close(self) -> None:
        self.inner.close()


def search(n: int, workers: int, seconds: float, db: str, isa: str) -> tuple[dict, float, float]:
    """Run one search; return (outcome facts, wall seconds, driver share)."""
    workload = load_workload(MATMUL, "sgemm", {"M": n, "N": n, "K": n})
    config = SearchConfig(max_seconds=seconds, workers=workers, finalists=3, expand=ExpandOptions(target=isa))
    # A fresh build cache per run: kernels compiled by an earlier run would be free here.
    cache = Path(db).with_suffix(".cache")
    inner = (LocalExecutor(Expander, config.expand, config.bench, cache_dir=cache) if workers == 0
             else RayExecutor(Expander, config.expand, config.bench, workers=workers, cache_dir=cache))
    executor = TimedExecutor(inner)
    store = open_store(db)
    started = time.perf_counter()
    try:
        outcome = run_search(workload, root_candidate(workload), make_strategy(config), executor, store, config)
    finally:
        wall = time.perf_counter() - started
        executor.close()
    record = store.get_search(outcome.search_id)
    progress = store.progress(outcome.search_id)
    store.close()
    facts = {
        "progress": progress,
        "evaluated": record.counters.evaluated,
        "best_seconds": record.best_seconds,
        "best_gflops": workload.flops / record.best_seconds / 1e9 if record.best_seconds else None,
        "speedup": record.best_speedup,
    }
    return facts, wall, max(0.0, 1 - executor.waiting / wall)


def openblas_gflops(n: int) -> float:
    """numpy's A @ B (OpenBLAS, one thread), timed as sgemm_baselines does: pinned to the
    benchmark CPU, median of samples that each last at least 20 ms."""
    from sgemm_baselines import time_numpy  # the sibling benchmark script

    config = BenchConfig(samples=9, min_sample_seconds=0.02, warmup_seconds=0.05)
    return 2 * n**3 / time_numpy(n, config) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--target", choices=["auto", *(t.name.value for t in TARGETS)], default="auto",
                        help="the instruction set, as `schedsearch run --target` takes it (auto: this CPU's widest)")
    args = parser.parse_args()
    isa = resolve(args.target, cpu_flags()).name.value
    print(f"# rewrite space: target={isa}")
    budget = 30.0 if args.quick else 90.0
    tmp = tempfile.mkdtemp(prefix="schedsearch-bench-")
    print(f"# throughput on SGEMM 256, {budget:.0f} s per run")
    for workers in (0, 1, 2):
        facts, wall, driver = search(256, workers, budget, f"{tmp}/t{workers}.db", isa)
        rate = facts["evaluated"] / wall
        print(f"workers={workers}: {facts['evaluated']} evaluated in {wall:.0f} s = {rate:.2f}/s "
              f"({rate * 60:.0f}/min); driver outside workers {driver:.0%}; best {facts['best_gflops']:.1f} GFLOP/s")
    if args.skip_quality:
        return
    blas = openblas_gflops(512)
    print(f"\n# quality on SGEMM 512; OpenBLAS (1 thread) {blas:.1f} GFLOP/s")
    # One search of the longer budget; the shorter budget's best is read off its progress.
    short, long = (60.0, 120.0) if args.quick else (300.0, 600.0)
    facts, wall, _ = search(512, 2, long, f"{tmp}/quality.db", isa)
    flops = 2 * 512**3
    early = [p for p in facts["progress"] if p.elapsed <= short]
    if early:
        g = flops / early[-1].seconds / 1e9
        print(f"{short / 60:>4.0f} min: best {g:.1f} GFLOP/s = {g / blas:.2f}x OpenBLAS (search timing)")
    g = facts["best_gflops"] or 0.0
    print(f"{long / 60:>4.0f} min: best {g:.1f} GFLOP/s = {g / blas:.2f}x OpenBLAS (finalists re-measured; "
          f"speedup {facts['speedup']:.1f}x over unscheduled, {facts['evaluated']} evaluated)")
    print(f"\nOpenBLAS re-measured at the end: {openblas_gflops(512):.1f} GFLOP/s")


if __name__ == "__main__":
    main()
