from __future__ import annotations

from exo import DRAM, proc


@proc
def strided(N: size, s: stride, x: f32[N] @ DRAM):
    for i in seq(0, N):
        x[i] = 0.0
