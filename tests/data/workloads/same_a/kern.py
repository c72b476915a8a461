from __future__ import annotations

from exo import DRAM, proc


@proc
def first(x: f32[8] @ DRAM):
    for i in seq(0, 8):
        x[i] = 1.0
