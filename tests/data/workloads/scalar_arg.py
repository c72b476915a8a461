from __future__ import annotations

from exo import DRAM, proc


@proc
def axpy(N: size, a: f32, x: f32[N] @ DRAM, y: f32[N] @ DRAM):
    for i in seq(0, N):
        y[i] += a * x[i]
