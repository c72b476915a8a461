"""The machine's measured f32 FMA peak of one core: independent chains of vector FMAs.

Run: ``python benchmarks/fma_peak.py`` (prints GFLOP/s). ``fma_peak()`` builds a small C
program with gcc for the widest vectors this CPU has (AVX-512, else AVX2), runs it pinned
to one core and returns the best of a few runs. Twelve chains per register width hide the
FMA latency on every core seen so far (4 cycles, two pipes).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

PROGRAM = r"""
#include <immintrin.h>
#include <stdio.h>
#include <time.h>
#if defined(__AVX512F__)
typedef __m512 V; enum { LANES = 16 };
#define FMA _mm512_fmadd_ps
#define SET _mm512_set1_ps
#define SUM(x) _mm512_reduce_add_ps(x)
#else
typedef __m256 V; enum { LANES = 8 };
#define FMA _mm256_fmadd_ps
#define SET _mm256_set1_ps
static float SUM(V x) { float t[8]; _mm256_storeu_ps(t, x); return t[0] + t[7]; }
#endif
#define CHAINS 12
#define EACH(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define DECL(c) V acc##c = SET((float)c);
#define STEP(c) acc##c = FMA(acc##c, b, a);
#define ADD(c) s += SUM(acc##c);
int main(int argc, char **argv) {
    long n = 400000000L / CHAINS;
    V a = SET(1.0f + 1e-7f * argc), b = SET(0.999999f);
    EACH(DECL)
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < n; i++) {
        EACH(STEP)
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    float s = 0;
    EACH(ADD)
    double sec = (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec);
    printf("%f %f\n", 2.0 * LANES * CHAINS * n / sec / 1e9, s);
    return 0;
}
"""


def fma_peak(runs: int = 5, cpu: int | None = None) -> float:
    """GFLOP/s of f32 FMAs on one core (the best of ``runs``), pinned to ``cpu`` (default:
    the last one this process may use)."""
    cpu = max(os.sched_getaffinity(0)) if cpu is None else cpu
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = Path(tmp) / "fma.c", Path(tmp) / "fma"
        src.write_text(PROGRAM)
        subprocess.run(["gcc", "-O3", "-march=native", str(src), "-o", str(exe)], check=True)
        best = 0.0
        for _ in range(runs):
            out = subprocess.run(["taskset", "-c", str(cpu), str(exe)], check=True, capture_output=True, text=True)
            best = max(best, float(out.stdout.split()[0]))
    return best


if __name__ == "__main__":
    print(f"{fma_peak():.1f} GFLOP/s f32 FMA peak, one core")
