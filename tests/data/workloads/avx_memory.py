from __future__ import annotations

from exo import proc
from exo.libs.memories import AVX2


@proc
def in_registers(x: f32[8] @ AVX2):
    for i in seq(0, 8):
        x[i] = 0.0
