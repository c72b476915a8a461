"""Two-stage box blur: a horizontal 3-tap pass into a temporary, then a vertical one.

Default sizes: H=512, W=512 (``schedsearch run examples/blur.py`` tunes ``blur2``).
In ``blur2`` the temporary ``tmp`` is an argument so both stages are visible to the search
(fuse, reorder, split and unroll apply to each stage) and its contents are part of the
result. ``blur2_local`` computes the same ``out`` with ``tmp`` a local allocation, the
form Halide schedules: the search may shrink it to a few rows computed next to their
consumer (``compute_at``), since nothing outside the proc sees it
(``schedsearch run examples/blur.py --proc blur2_local``).
"""

from __future__ import annotations

from exo import proc
from exo.libs.memories import DRAM

SCHEDSEARCH_PROC = "blur2"
SCHEDSEARCH_SIZES = {"blur2": {"H": 512, "W": 512}, "blur2_local": {"H": 512, "W": 512}}


@proc
def blur2(H: size, W: size, inp: f32[H + 2, W + 2], tmp: f32[H + 2, W], out: f32[H, W]):
    assert H >= 1
    assert W >= 1
    for y in seq(0, H + 2):
        for x in seq(0, W):
            tmp[y, x] = (inp[y, x] + inp[y, x + 1] + inp[y, x + 2]) / 3.0
    for y in seq(0, H):
        for x in seq(0, W):
            out[y, x] = (tmp[y, x] + tmp[y + 1, x] + tmp[y + 2, x]) / 3.0


@proc
def blur2_local(H: size, W: size, inp: f32[H + 2, W + 2], out: f32[H, W]):
    assert H >= 1
    assert W >= 1
    tmp: f32[H + 2, W] @ DRAM
    for y in seq(0, H + 2):
        for x in seq(0, W):
            tmp[y, x] = (inp[y, x] + inp[y, x + 1] + inp[y, x + 2]) / 3.0
    for y in seq(0, H):
        for x in seq(0, W):
            out[y, x] = (tmp[y, x] + tmp[y + 1, x] + tmp[y + 2, x]) / 3.0
