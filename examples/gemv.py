"""Matrix-vector products in both orientations and precisions, as BLAS has them.

``gemv``: y[i] += A[i, j] * x[j] (numpy's ``A @ x``: a dot product per row);
``gemv_t``: y[j] += A[i, j] * x[i] (numpy's ``x @ A``: an AXPY per row of A);
``dgemv`` and ``dgemv_t``: the same in f64.

Default sizes: M=1024, N=1024 (``schedsearch run examples/gemv.py --proc gemv_t``).
"""

from __future__ import annotations

from exo import proc

SCHEDSEARCH_PROC = "gemv"
SCHEDSEARCH_SIZES = {name: {"M": 1024, "N": 1024} for name in ("gemv", "gemv_t", "dgemv", "dgemv_t")}


@proc
def gemv(M: size, N: size, A: f32[M, N], x: f32[N], y: f32[M]):
    assert M >= 1
    assert N >= 1
    for i in seq(0, M):
        for j in seq(0, N):
            y[i] += A[i, j] * x[j]


@proc
def gemv_t(M: size, N: size, A: f32[M, N], x: f32[M], y: f32[N]):
    assert M >= 1
    assert N >= 1
    for i in seq(0, M):
        for j in seq(0, N):
            y[j] += A[i, j] * x[i]


@proc
def dgemv(M: size, N: size, A: f64[M, N], x: f64[N], y: f64[M]):
    assert M >= 1
    assert N >= 1
    for i in seq(0, M):
        for j in seq(0, N):
            y[i] += A[i, j] * x[j]


@proc
def dgemv_t(M: size, N: size, A: f64[M, N], x: f64[M], y: f64[N]):
    assert M >= 1
    assert N >= 1
    for i in seq(0, M):
        for j in seq(0, N):
            y[j] += A[i, j] * x[i]
