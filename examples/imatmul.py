"""An int8 matrix multiply at any sizes: ``C += A @ B`` on int8 operands into int32.

Default sizes: M=N=K=32. The computation of ``matmul_i8`` in ``matmul.py`` (fixed at
16x16x16): the int8 operands are widened into int32 temporaries so every product is an int32
operation in Exo's semantics. Searches of ``imatmul`` at other sizes are history a search of
``matmul_i8`` can learn from (the cost model trains on every measurement made on the
machine, whatever the workload).
"""

from __future__ import annotations

from exo import DRAM, proc

SCHEDSEARCH_SIZES = {"imatmul": {"M": 32, "N": 32, "K": 32}}


@proc
def imatmul(M: size, N: size, K: size, A: i8[M, K] @ DRAM, B: i8[K, N] @ DRAM, C: i32[M, N] @ DRAM):
    assert M >= 1
    assert N >= 1
    assert K >= 1
    for i in seq(0, M):
        for j in seq(0, N):
            for k in seq(0, K):
                a: i32
                b: i32
                a = A[i, k]
                b = B[k, j]
                C[i, j] += a * b
