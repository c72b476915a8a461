"""1-D convolution: y[i] = sum_r w[r] * x[i + r] (a "valid" convolution).

Default sizes: N=4096, R=16 (``schedsearch run examples/conv1d.py``).
Try other sizes with ``--size N=8192,R=8``.
"""

from __future__ import annotations

from exo import proc

SCHEDSEARCH_SIZES = {"conv1d": {"N": 4096, "R": 16}}


@proc
def conv1d(N: size, R: size, x: f32[N + R], w: f32[R], y: f32[N]):
    assert N >= 1
    assert R >= 1
    for i in seq(0, N):
        y[i] = 0.0
        for r in seq(0, R):
            y[i] += w[r] * x[i + r]
