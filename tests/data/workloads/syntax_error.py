from __future__ import annotations

from exo import proc


@proc
def broken(N: size, x: f32[N]):
    for i in seq(0, N)
        x[i] = 0.0
