"""Kernels written the way people write them: init statements, odd sizes, several stages.

The kernel-class suite of ``benchmarks/kernel_classes.py`` searches each of these. None is
in the form a register tile applies to as written: each needs an init statement split off,
a loop moved outward, an operand repacked or a tail, and the search has to find those steps.

- ``matmul_init``: ``C = A @ B`` with ``C[i, j] = 0.0`` before the reduction, at sizes that
  are no multiple of any tile (M=N=K=500 by default).
- ``matmul_aat``: ``C = A @ A^T``; both operands are rows of ``A``, so neither is contiguous
  along the output's columns.
- ``bmm``: a batch of small products ``C[b] = A[b] @ B[b]`` with an init statement.
- ``conv2d``: a 3x3 convolution layer over channels (ResNet's 64-channel 56x56 stage),
  ``out`` zeroed in the nest; ``inp`` is the padded input.
- ``matmul_chain``: ``D = (A @ B) @ E`` through a local ``tmp``, each product with its init.
- ``matmul_relu``: ``C = max(A @ B, 0)``: an elementwise epilogue after the reduction.
"""

from __future__ import annotations

from exo import proc
from exo.libs.externs import select

SCHEDSEARCH_PROC = "matmul_init"
SCHEDSEARCH_SIZES = {
    "matmul_init": {"M": 500, "N": 500, "K": 500},
    "matmul_aat": {"M": 512, "K": 512},
    "bmm": {"Bt": 64, "M": 48, "N": 48, "K": 48},
    "conv2d": {"Co": 64, "Ci": 64, "H": 56, "W": 56},
    "matmul_chain": {"M": 256, "N": 256, "K": 256, "L": 256},
    "matmul_relu": {"M": 512, "N": 512, "K": 512},
}


@proc
def matmul_init(M: size, N: size, K: size, A: f32[M, K], B: f32[K, N], C: f32[M, N]):
    for i in seq(0, M):
        for j in seq(0, N):
            C[i, j] = 0.0
            for k in seq(0, K):
                C[i, j] += A[i, k] * B[k, j]


@proc
def matmul_aat(M: size, K: size, A: f32[M, K], C: f32[M, M]):
    for i in seq(0, M):
        for j in seq(0, M):
            C[i, j] = 0.0
            for k in seq(0, K):
                C[i, j] += A[i, k] * A[j, k]


@proc
def bmm(Bt: size, M: size, N: size, K: size, A: f32[Bt, M, K], B: f32[Bt, K, N], C: f32[Bt, M, N]):
    for b in seq(0, Bt):
        for i in seq(0, M):
            for j in seq(0, N):
                C[b, i, j] = 0.0
                for k in seq(0, K):
                    C[b, i, j] += A[b, i, k] * B[b, k, j]


@proc
def conv2d(Co: size, Ci: size, H: size, W: size, inp: f32[Ci, H + 2, W + 2], w: f32[Co, Ci, 3, 3],
           out: f32[Co, H, W]):
    for o in seq(0, Co):
        for y in seq(0, H):
            for x in seq(0, W):
                out[o, y, x] = 0.0
                for c in seq(0, Ci):
                    for r in seq(0, 3):
                        for s in seq(0, 3):
                            out[o, y, x] += w[o, c, r, s] * inp[c, y + r, x + s]


@proc
def matmul_chain(M: size, N: size, K: size, L: size, A: f32[M, K], B: f32[K, N], E: f32[N, L], D: f32[M, L]):
    tmp: f32[M, N]
    for i in seq(0, M):
        for j in seq(0, N):
            tmp[i, j] = 0.0
            for k in seq(0, K):
                tmp[i, j] += A[i, k] * B[k, j]
    for i in seq(0, M):
        for j in seq(0, L):
            D[i, j] = 0.0
            for k in seq(0, N):
                D[i, j] += tmp[i, k] * E[k, j]


@proc
def matmul_relu(M: size, N: size, K: size, A: f32[M, K], B: f32[K, N], C: f32[M, N]):
    for i in seq(0, M):
        for j in seq(0, N):
            C[i, j] = 0.0
            for k in seq(0, K):
                C[i, j] += A[i, k] * B[k, j]
            C[i, j] = select(0.0, C[i, j], C[i, j], 0.0)
