"""Where a shared machine's drift comes from, and how much of it two kernels timed side by side share.

Two kernels of a kept search (by default its fastest and the fastest of its first step) are
timed side by side in one driver process (``schedsearch.evaluate.remeasure``, interleaved
rounds), in ``--processes`` fresh processes ``--gap`` seconds apart; after each, two probes
run in one process of their own:

- *clock*: eight independent chains of dependent multiply-adds in registers, which only the
  core's clock can speed up or slow down;
- *memory*: one read of every cache line of a 128 MB buffer, which the memory system and
  the neighbours sharing it decide.

Reported for each kernel, their ratio, and each probe: the median, the largest over the
smallest and the coefficient of variation over the processes; and how closely the first
kernel's time follows each probe (Pearson's r). A kernel whose time swings while the clock
probe holds still is slowed by its memory traffic; a ratio that varies less than either
time is drift the two kernels share, which timing them side by side in one process (as the
finalists are) takes out.

Run::

    .venv/bin/python benchmarks/drift_probe.py DB [--search ID] [--processes 60] [--gap 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from schedsearch.core import Candidate, CandidateRecord, Status
from schedsearch.evaluate import remeasure
from schedsearch.store import open_store

sys.path.insert(0, str(Path(__file__).parent))
from search_efficiency import cpu_name  # noqa: E402

PROBE_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }
__attribute__((noinline)) static double chains(long n) {
  double a[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  for (long i = 0; i < n; i++)
    for (int c = 0; c < 8; c++) a[c] = a[c] * 0.999999 + 1e-7;
  return a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
}
__attribute__((noinline)) static double stream(const float *p, long n) {
  double s = 0; for (long i = 0; i < n; i += 16) s += p[i]; return s;
}
int main(void) {
  long n = 32l << 20;  /* floats: 128 MB */
  float *p = malloc(n * sizeof(float));
  for (long i = 0; i < n; i++) p[i] = (float)(i & 7);
  double tc[15], tm[15], sink = 0;
  sink += chains(100000) + stream(p, n);
  for (int r = 0; r < 15; r++) {
    double t0 = now(); sink += chains(2000000); double t1 = now(); sink += stream(p, n); double t2 = now();
    tc[r] = t1 - t0; tm[r] = t2 - t1;
  }
  qsort(tc, 15, sizeof(double), cmp); qsort(tm, 15, sizeof(double), cmp);
  printf("%.9g %.9g %g\n", tc[7], tm[7], sink > 0 ? 0.0 : 1.0);
  return 0;
}
"""


def _candidate(r: CandidateRecord) -> Candidate:
    return Candidate(schedule=r.schedule, c_source=r.c_source, fingerprint=r.fingerprint, proc_text=r.proc_text,
                     depth=r.depth)


def _stats(xs: list[float]) -> str:
    mean = statistics.fmean(xs)
    cv = statistics.pstdev(xs) / mean if mean else 0.0
    return f"median {statistics.median(xs):.4g}  max/min {max(xs) / min(xs):.2f}  CV {cv:.1%}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("db", type=Path)
    p.add_argument("--search", type=int, default=None, help="the search (default: the last)")
    p.add_argument("--processes", type=int, default=60)
    p.add_argument("--gap", type=float, default=3.0, help="seconds between processes")
    args = p.parse_args(argv)
    if not args.db.is_file() or args.processes < 3:
        print("drift_probe: give a schedsearch database and --processes of 3 or more", file=sys.stderr)
        return 2
    store = open_store(str(args.db), create=False, read_only=True)
    try:
        search = store.list_searches()[-1] if args.search is None else store.get_search(args.search)
        records = store.candidates(search.id)
    finally:
        store.close()
    ok = sorted((r for r in records if r.status is Status.OK and r.seconds), key=lambda r: r.seconds or 0.0)
    root = next(r for r in records if r.parent_id is None)
    first = next((r for r in ok if r.depth == 1), None)
    best = ok[0] if ok else None
    if best is None or first is None or best.id == first.id:
        print("drift_probe: the search needs two different fast kernels (its best, deeper than one step)",
              file=sys.stderr)
        return 2
    kernels = [_candidate(best), _candidate(first)]
    print(f"CPU: {cpu_name()}; search {search.id} ({search.workload.label}): kernels #{best.id} (best) and "
          f"#{first.id} (best first step), {args.processes} processes {args.gap:g} s apart")
    rows: list[tuple[float, float, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="drift-probe-") as tmp:
        probe = Path(tmp) / "probe"
        (Path(tmp) / "probe.c").write_text(PROBE_C)
        subprocess.run(["gcc", "-O2", "-o", str(probe), str(Path(tmp) / "probe.c")], check=True)
        cache = Path(tmp) / "cache"
        for _ in range(args.processes):
            ms = remeasure(search.workload, _candidate(root), kernels, search.config.bench, cache)
            if all(m.status is Status.OK and m.timing for m in ms):
                out = subprocess.run([str(probe)], capture_output=True, text=True, check=True).stdout.split()
                rows.append((ms[0].timing.median, ms[1].timing.median, float(out[0]), float(out[1])))  # type: ignore[union-attr]
            time.sleep(args.gap)
    if len(rows) < 3:
        print("drift_probe: too few processes measured both kernels", file=sys.stderr)
        return 1
    k0, k1, clock, memory = (list(c) for c in zip(*rows, strict=True))
    ratio = [a / b for a, b in zip(k0, k1, strict=True)]
    print(f"  best          {_stats(k0)}")
    print(f"  first step    {_stats(k1)}")
    print(f"  best / first  {_stats(ratio)}")
    print(f"  clock probe   {_stats(clock)}")
    print(f"  memory probe  {_stats(memory)}")
    print(f"  the best's time against: the clock probe r = {statistics.correlation(k0, clock):.2f}, "
          f"the memory probe r = {statistics.correlation(k0, memory):.2f}, "
          f"the first step's time r = {statistics.correlation(k0, k1):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
