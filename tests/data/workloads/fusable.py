from __future__ import annotations

from exo import DRAM, proc


@proc
def two_loops(x: f32[16] @ DRAM, y: f32[16] @ DRAM):
    for i in seq(0, 16):
        x[i] = 1.0
    for j in seq(0, 16):
        y[j] = 2.0
