"""An i8 matmul written as one reduction: no target has i8 vector FMAs, so its register
tile is the one gcc vectorises (the scalar target's)."""

from __future__ import annotations

from exo import proc


@proc
def gemm_i8(M: size, N: size, K: size, A: i8[M, K], B: i8[K, N], C: i8[M, N]):
    for i in seq(0, M):
        for j in seq(0, N):
            for k in seq(0, K):
                C[i, j] += A[i, k] * B[k, j]
