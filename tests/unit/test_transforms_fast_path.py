"""The fastest SGEMM schedule found on AVX2 is reachable by the enumerator, step by step.

On an AVX2 + FMA core (16 ymm registers) the fastest schedule built from Exo's scheduling
operations and gcc's vectoriser is an 8x8 register tile of C (staged in a stack buffer,
rows unrolled in two groups of four, one vector of columns per row) with the tile columns
outermost and the B column panel packed into a contiguous buffer once per column of
tiles. These tests replay that path through ``propose`` on the 512^3 problem and check
the code it produces; no compiler runs here.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from schedsearch.core import (
    KERNEL_SYMBOL,
    ExpandOptions,
    Rewrite,
    RewriteKind,
    Schedule,
)
from schedsearch.transforms import (
    build_proc,
    fingerprint,
    kernel_c,
    load_workload,
    propose,
    schedule_script,
    try_apply,
)
from schedsearch.transforms.walk import loops

ROOT = Path(__file__).resolve().parents[2]
MATMUL = ROOT / "examples" / "matmul.py"
OPTIONS = ExpandOptions()

NAMES = {"ao": "io", "ai": "ii", "bo": "jo", "bi": "ji", "aio": "iio", "aii": "iii", "name": "C_stage"}


def micro_kernel(rows: int, cols: int, group: int, order: str) -> Rewrite:
    """The scalar target's register tile (once its own kind, ``micro_kernel``)."""
    window = f"C[{rows} * io:{rows} * io + {rows}, {cols} * jo:{cols} * jo + {cols}]"
    return Rewrite.make(
        RewriteKind.REGISTER_TILE,
        "i #0",
        isa="scalar",
        inner="j #0",
        red="k #0",
        rows=rows,
        cols=cols,
        group=group,
        order=order,
        window=window,
        **NAMES,
    )


B_PANEL = {"buffer": "B", "name": "B_pack", "window": "B[0:512, 8 * jo:8 * jo + 8]"}
PACK_B = Rewrite.make(RewriteKind.PACK, "io #0", **B_PANEL)
SPLIT_K2 = Rewrite.make(RewriteKind.SPLIT, "k #0", factor=2, outer="ko", inner="ki", tail="perfect")
#: Register micro-kernel with tile columns outermost, pack the B column panel, then split
#: k by 2 (gcc unrolls the 2-trip loop: two k steps per iteration of the vector loop).
FAST_PATH = (micro_kernel(8, 8, 4, "cols"), PACK_B, SPLIT_K2)
#: The same code from tile rows outermost: the pack moves the tile columns outward itself.
LONG_PATH = (
    micro_kernel(8, 8, 4, "rows"),
    Rewrite.make(RewriteKind.PACK, "io #0", interchange=True, **B_PANEL),
    SPLIT_K2,
)
#: ... and through a separate interchange of the tile loops.
LONGER_PATH = (micro_kernel(8, 8, 4, "rows"), Rewrite.make(RewriteKind.REORDER, "io jo"), PACK_B, SPLIT_K2)


@pytest.fixture(scope="module")
def workload():
    return load_workload(MATMUL, "sgemm", {"M": 512, "N": 512, "K": 512})


def replay_through_proposals(proc, steps):
    """Apply each step after checking that it is one of its parent's proposals."""
    for step in steps:
        proposals = propose(proc, OPTIONS)
        assert step in proposals, f"{step.describe()} not proposed; got {[p.describe() for p in proposals]}"
        assert len(proposals) <= 60
        proc = try_apply(proc, step)
        assert proc is not None, step.describe()
    return proc


def loop_order(proc) -> list[str]:
    return [info.name for info in loops(proc)]


def test_every_step_of_the_fast_path_is_proposed(workload):
    proc = build_proc(workload)
    first = try_apply(proc, FAST_PATH[0])
    assert FAST_PATH[0] in propose(proc, OPTIONS)
    # tile columns outermost; C tile load, k, two column loops (rows 0-3, rows 4-7), C tile store
    assert loop_order(first) == ["jo", "io", "i0", "i1", "k", "ji", "ji", "i0", "i1"]
    final = replay_through_proposals(proc, FAST_PATH)
    # the B panel copy sits between the two tile loops; k is split by 2 around the vector loops
    assert loop_order(final) == ["jo", "i0", "i1", "io", "i0", "i1", "ko", "ki", "ji", "ji", "i0", "i1"]


def test_fast_path_code_has_the_register_tile_and_the_packed_panel(workload):
    final = replay_through_proposals(build_proc(workload), FAST_PATH)
    c = kernel_c(final)
    assert "float C_stage[8 * 8];" in c  # DRAM_STACK: a stack array gcc keeps in registers
    assert "malloc(512 * 8 * sizeof(*B_pack))" in c  # the packed 512x8 B panel
    assert "B_pack[i0 * 8 + i1] = B[i0 * 512 + i1 + 8 * jo];" in c
    body = c[c.index("for (int_fast32_t ko = 0; ko < 256; ko++)") :]
    assert body.index("for (int_fast32_t ki = 0; ki < 2; ki++)") < body.index("ji = 0")
    column_loops = [m.start() for m in re.finditer(r"for \(int_fast32_t ji = 0; ji < 8; ji\+\+\)", body)]
    assert len(column_loops) == 2
    row = r"C_stage\[(\d+) \+ ji\] \+= A\[\((\d+) \+ 8 \* io\) \* 512 \+ 2 \* ko \+ ki\] \* B_pack\[\(2 \* ko \+ ki\) \* 8 \+ ji\]"
    assert re.findall(row, body) == [(str(8 * r), str(r)) for r in range(1, 8)]  # rows 1..7, unrolled
    row0 = "C_stage[ji] += A[8 * io * 512 + 2 * ko + ki] * B_pack[(2 * ko + ki) * 8 + ji];"
    assert row0 in body[: column_loops[1]]
    assert body.index("C_stage[24 + ji]") < column_loops[1] < body.index("C_stage[32 + ji]")  # groups of 4
    assert "B[(2 * ko + ki) * 512" not in body  # the kernel reads only the packed panel


def test_longer_paths_through_an_interchange_reach_the_same_code(workload):
    proc = build_proc(workload)
    fast = fingerprint(kernel_c(replay_through_proposals(proc, FAST_PATH)))
    assert fingerprint(kernel_c(replay_through_proposals(proc, LONG_PATH))) == fast
    assert fingerprint(kernel_c(replay_through_proposals(proc, LONGER_PATH))) == fast


def test_micro_kernel_proposals_are_few_and_only_for_reduction_nests(workload):
    proc = build_proc(workload)
    kernels = [r for r in propose(proc, OPTIONS) if r.kind is RewriteKind.REGISTER_TILE]
    assert {r.arg("isa") for r in kernels} == {"scalar"}
    shapes = {(r.arg("rows"), r.arg("cols"), r.arg("group"), r.arg("order")) for r in kernels}
    assert (8, 8, 4, "cols") in shapes and (8, 8, 4, "rows") in shapes
    assert len(kernels) == len(shapes) <= 8
    # after the micro-kernel there is no i-j-k reduction nest left to block again
    blocked = try_apply(proc, FAST_PATH[0])
    assert not [r for r in propose(blocked, OPTIONS) if r.kind is RewriteKind.REGISTER_TILE]


def test_pack_is_proposed_only_for_read_only_panels_reused_by_the_loop(workload):
    def packs(proc):
        found = [r for r in propose(proc, OPTIONS) if r.kind is RewriteKind.PACK]
        return [(r.target, r.arg("buffer"), r.arg("window"), bool(r.arg("interchange", False))) for r in found]

    # C is written, never packed; A's row panel changes with io, B's column panel with jo
    cols_first = try_apply(build_proc(workload), micro_kernel(8, 8, 4, "cols"))
    assert packs(cols_first) == [
        ("jo #0", "A", "A[8 * io:8 * io + 8, 0:512]", True),
        ("io #0", "B", "B[0:512, 8 * jo:8 * jo + 8]", False),
    ]
    rows_first = try_apply(build_proc(workload), micro_kernel(8, 8, 4, "rows"))
    assert packs(rows_first) == [
        ("io #0", "B", "B[0:512, 8 * jo:8 * jo + 8]", True),
        ("jo #0", "A", "A[8 * io:8 * io + 8, 0:512]", False),
    ]


def test_fast_path_exports_as_plain_exo_calls(workload, tmp_path):
    schedule = Schedule(FAST_PATH)
    script_dir = tmp_path / "export"
    script_dir.mkdir()
    script = schedule_script(workload, schedule)
    assert "p = stage_mem(p, p.find_loop('io #0'), 'B[0:512, 8 * jo:8 * jo + 8]', 'B_pack')" in script
    assert "p = divide_loop(p, 'k #0', 2, ['ko', 'ki'], perfect=True)" in script
    assert "p = set_memory(p, 'C_stage', DRAM_STACK)" in script
    assert script.count("p = unroll_loop(") == 2
    path = script_dir / "schedule.py"
    path.write_text(script)
    result = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, check=True, timeout=120, cwd=tmp_path
    )
    exported = re.sub(r"\bsgemm\b", KERNEL_SYMBOL, result.stdout.removesuffix("\n"))
    assert fingerprint(exported) == fingerprint(kernel_c(build_proc(workload, schedule)))
