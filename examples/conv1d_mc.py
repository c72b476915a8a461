"""Multi-channel 1-D convolution: y[o, i] += sum_c sum_r w[o, c, r] * x[c, i + r].

A convolution layer's core: ``O`` output channels, ``C`` input channels, ``N`` points and
``R`` taps ("valid" convolution; ``y`` accumulates, as a matmul's ``C`` does). As a
reduction over channels and taps it is a matmul in disguise: rows are output channels,
columns are points, and the search can hold an output tile in vector registers.

Default sizes: C=32, O=64, N=1024, R=5 (``schedsearch run examples/conv1d_mc.py``).
"""

from __future__ import annotations

from exo import proc

SCHEDSEARCH_SIZES = {"conv1d_mc": {"C": 32, "O": 64, "N": 1024, "R": 5}}


@proc
def conv1d_mc(C: size, O: size, N: size, R: size, x: f32[C, N + R], w: f32[O, C, R], y: f32[O, N]):
    assert C >= 1
    assert O >= 1
    assert N >= 1
    assert R >= 1
    for o in seq(0, O):
        for i in seq(0, N):
            for c in seq(0, C):
                for r in seq(0, R):
                    y[o, i] += w[o, c, r] * x[c, i + r]
