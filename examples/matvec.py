"""Matrix-vector product: y[i] += A[i, j] * x[j].

Default sizes: M=1024, N=1024 (``schedsearch run examples/matvec.py``).
"""

from __future__ import annotations

from exo import proc

SCHEDSEARCH_SIZES = {"matvec": {"M": 1024, "N": 1024}}


@proc
def matvec(M: size, N: size, A: f32[M, N], x: f32[N], y: f32[M]):
    assert M >= 1
    assert N >= 1
    for i in seq(0, M):
        for j in seq(0, N):
            y[i] += A[i, j] * x[j]
