"""Small elementwise and reduction kernels for the vectorize tests (f32 and f64).

Sizes are deliberately not multiples of 8 or 16 in the defaults, so tails are exercised.
"""

from __future__ import annotations

from exo import proc

SCHEDSEARCH_PROC = "vadd"
SCHEDSEARCH_SIZES = {
    "vadd": {"N": 37},
    "axpy": {"N": 37},
    "affine2d": {"M": 3, "N": 21},
    "dmatvec": {"M": 5, "N": 19},
    "dscale": {"N": 11},
}


@proc
def vadd(N: size, x: f32[N], y: f32[N], z: f32[N]):
    assert N >= 1
    for i in seq(0, N):
        z[i] = x[i] + y[i]


@proc
def axpy(N: size, a: f32, x: f32[N], y: f32[N]):
    assert N >= 1
    for i in seq(0, N):
        y[i] += a * x[i]


@proc
def affine2d(M: size, N: size, A: f32[M, N], s: f32[N], b: f32[M], out: f32[M, N]):
    assert M >= 1
    assert N >= 1
    for i in seq(0, M):
        for j in seq(0, N):
            out[i, j] = A[i, j] * s[j] - b[i] * 2.0


@proc
def dmatvec(M: size, N: size, A: f64[M, N], x: f64[N], y: f64[M]):
    assert M >= 1
    assert N >= 1
    for i in seq(0, M):
        for j in seq(0, N):
            y[i] += A[i, j] * x[j]


@proc
def dscale(N: size, x: f64[N], y: f64[N]):
    assert N >= 1
    for i in seq(0, N):
        y[i] = 0.5 * x[i] + y[i]
