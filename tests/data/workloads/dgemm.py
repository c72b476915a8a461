"""A double-precision matrix multiplication, ``C += A @ B`` in i, j, k order.

For the vector targets with f64 instructions (AVX2, NEON): ``sgemm`` of
``examples/matmul.py`` in f64. The default sizes leave a row tail for most tile shapes.
"""

from __future__ import annotations

from exo import DRAM, proc

SCHEDSEARCH_SIZES = {"dgemm": {"M": 20, "N": 16, "K": 8}}


@proc
def dgemm(M: size, N: size, K: size, A: f64[M, K] @ DRAM, B: f64[K, N] @ DRAM, C: f64[M, N] @ DRAM):
    assert M >= 1
    assert N >= 1
    assert K >= 1
    for i in seq(0, M):
        for j in seq(0, N):
            for k in seq(0, K):
                C[i, j] += A[i, k] * B[k, j]
