from __future__ import annotations

from exo import DRAM, proc


@proc
def scale(N: size, x: f32[N] @ DRAM):
    for i in seq(0, N):
        x[i] = 2.0 * x[i]


@proc
def add(N: size, x: f32[N] @ DRAM, y: f32[N] @ DRAM):
    for i in seq(0, N):
        y[i] += x[i]
