"""Reduction nests of other shapes than C[i, j] += A[i, k] * B[k, j], for register tiles
(the f64 matmul is ``dgemm.py`` beside this file)."""

from __future__ import annotations

from exo import proc


@proc
def bmm(B: size, M: size, N: size, K: size, A: f32[B, M, K], Bm: f32[B, K, N], C: f32[B, M, N]):
    for b in seq(0, B):
        for i in seq(0, M):
            for j in seq(0, N):
                for k in seq(0, K):
                    C[b, i, j] += A[b, i, k] * Bm[b, k, j]


@proc
def matmul_at(M: size, N: size, K: size, A: f32[K, M], B: f32[K, N], C: f32[M, N]):
    for i in seq(0, M):
        for j in seq(0, N):
            for k in seq(0, K):
                C[i, j] += A[k, i] * B[k, j]


@proc
def conv2d(C: size, O: size, H: size, W: size, x: f32[C, H + 2, W + 2], w: f32[O, C, 3, 3], y: f32[O, H, W]):
    for h in seq(0, H):
        for o in seq(0, O):
            for i in seq(0, W):
                for c in seq(0, C):
                    for dy in seq(0, 3):
                        for dx in seq(0, 3):
                            y[o, h, i] += w[o, c, dy, dx] * x[c, h + dy, i + dx]
