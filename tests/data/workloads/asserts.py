from __future__ import annotations

from exo import DRAM, proc

SCHEDSEARCH_SIZES = {"blocked": {"N": 64}}


@proc
def blocked(N: size, x: f32[N] @ DRAM, y: f32[N] @ DRAM):
    assert N % 8 == 0
    for i in seq(0, N):
        y[i] += 3.0 * x[i] - 1.0
