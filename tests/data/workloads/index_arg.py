from __future__ import annotations

from exo import DRAM, proc


@proc
def indexed(N: size, j: index, x: f32[N] @ DRAM):
    assert j >= 0
    assert j <= N
    for i in seq(0, j):
        x[i] = 1.0
