"""Matrix multiplication workloads for schedsearch.

Default sizes: M=N=K=256 (sgemm). ``matmul_i8`` has fixed 16x16x16 sizes.

``sgemm`` is the naive single-precision GEMM ``C += A @ B`` with the loops in i, j, k order;
``matmul_i8`` multiplies two 16x16 int8 matrices and accumulates the products into an int32
matrix; the int8 operands are widened into int32 temporaries so every product is an int32
operation in Exo's semantics, not an int8 one.

``SCHEDSEARCH_PROC`` names the proc ``schedsearch run examples/matmul.py`` tunes when no
``--proc`` is given; ``SCHEDSEARCH_SIZES`` gives the sizes schedsearch uses for any size
argument the caller does not set.
"""

from __future__ import annotations

from exo import DRAM, proc

SCHEDSEARCH_PROC = "sgemm"
SCHEDSEARCH_SIZES = {"sgemm": {"M": 256, "N": 256, "K": 256}}


@proc
def sgemm(M: size, N: size, K: size, A: f32[M, K] @ DRAM, B: f32[K, N] @ DRAM, C: f32[M, N] @ DRAM):
    assert M >= 1
    assert N >= 1
    assert K >= 1
    for i in seq(0, M):
        for j in seq(0, N):
            for k in seq(0, K):
                C[i, j] += A[i, k] * B[k, j]


@proc
def matmul_i8(A: i8[16, 16] @ DRAM, B: i8[16, 16] @ DRAM, C: i32[16, 16] @ DRAM):
    for i in seq(0, 16):
        for j in seq(0, 16):
            for k in seq(0, 16):
                a: i32
                b: i32
                a = A[i, k]
                b = B[k, j]
                C[i, j] += a * b
