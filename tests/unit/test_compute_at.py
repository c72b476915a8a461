"""compute_at: a producer's rows computed inside its consumer's loop (real Exo, no compiler)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from exo.API_cursors import AllocCursor, ForCursor

from schedsearch.core import KERNEL_SYMBOL, ExpandOptions, RewriteKind, Schedule
from schedsearch.transforms import build_proc, fingerprint, kernel_c, load_workload, propose, schedule_script, try_apply
from schedsearch.transforms.walk import literal

ROOT = Path(__file__).resolve().parents[2]
BLUR = ROOT / "examples" / "blur.py"
#: 21 output rows: 4- and 8-row strips leave 1 and 5 rows over (16 rows: a single strip).
SIZES = {"H": 21, "W": 16}

STENCIL = '''
from __future__ import annotations
from exo import proc
from exo.libs.memories import DRAM

@proc
def rows5(H: size, W: size, inp: f32[H + 4, W + 4], w: f32[5], out: f32[H, W]):
    assert H >= 1
    assert W >= 1
    tmp: f32[H + 4, W] @ DRAM
    for y in seq(0, H + 4):
        for x in seq(0, W):
            tmp[y, x] = 0.0
            for k in seq(0, 5):
                tmp[y, x] += w[k] * inp[y, x + k]
    for y in seq(0, H):
        for x in seq(0, W):
            out[y, x] = 0.0
            for k in seq(0, 5):
                out[y, x] += w[k] * tmp[y + k, x]
    {after}
'''


def compute_at(proc, options: ExpandOptions = ExpandOptions()):
    return [r for r in propose(proc, options) if r.kind is RewriteKind.COMPUTE_AT]


def by_mode(rewrites) -> dict[object, object]:
    return {r.arg("rows") if r.arg("mode") == "strip" else "slide": r for r in rewrites}


def alloc(proc, name: str = "tmp") -> AllocCursor:
    return proc.find(f"{name} : _")


def shape(cursor: AllocCursor) -> list[int | None]:
    return [literal(e) for e in cursor.shape()]


@pytest.fixture(scope="module", params=["blur2", "blur2_local"])
def blur(request):
    workload = load_workload(BLUR, request.param, SIZES)
    return workload, build_proc(workload)


def test_both_blurs_get_a_sliding_window_and_strips_that_recompute_little(blur):
    workload, root = blur
    found = by_mode(compute_at(root))
    # 1- and 2-row strips would recompute 100% and 50% of the rows: not offered
    assert set(found) == {"slide", 4, 8}
    local = workload.proc == "blur2_local"
    assert all(r.target == "y #1" and r.arg("producer") == "y #0" and r.arg("buffer") == "tmp" for r in found.values())
    assert found["slide"].arg("lead") == 2 and found["slide"].arg("fold") == (3 if local else 0)
    # 8-row strips: 2 strips, each computing 8 + 5 output rows from 8 + 2 + 5 rows of tmp
    assert (found[8].arg("strips"), found[8].arg("extent"), found[8].arg("local")) == (2, 15, local)
    assert all(try_apply(root, r) is not None for r in found.values())


def test_without_tails_only_strip_heights_that_divide_the_rows(blur):
    workload, _ = blur
    root = build_proc(load_workload(BLUR, workload.proc, {"H": 32, "W": 16}))
    assert set(by_mode(compute_at(root, ExpandOptions(allow_tails=False)))) == {"slide", 4, 8, 16}
    odd = build_proc(load_workload(BLUR, workload.proc, {"H": 31, "W": 16}))
    assert set(by_mode(compute_at(odd, ExpandOptions(allow_tails=False)))) == {"slide"}


def test_a_local_intermediate_becomes_a_small_stack_buffer_inside_the_strip_loop():
    root = build_proc(load_workload(BLUR, "blur2_local", SIZES))
    assert shape(alloc(root)) == [23, 16]
    proc = try_apply(root, by_mode(compute_at(root))[8])
    buffer = alloc(proc)
    loop = buffer.parent()
    # the buffer lives in the strip loop, holds one strip's 15 rows, and precedes both stages
    assert isinstance(loop, ForCursor) and loop.name() == "yo" and literal(loop.hi()) == 2
    assert shape(buffer) == [15, 16] and buffer.mem().name() == "DRAM_STACK"
    assert [type(s) for s in loop.body()] == [AllocCursor, ForCursor, ForCursor]
    assert "float tmp[15 * 16];" in kernel_c(proc) and "malloc" not in kernel_c(proc)


def test_a_local_intermediate_slides_through_a_three_row_circular_buffer():
    root = build_proc(load_workload(BLUR, "blur2_local", SIZES))
    proc = try_apply(root, by_mode(compute_at(root))["slide"])
    assert shape(alloc(proc)) == [3, 16] and alloc(proc).mem().name() == "DRAM_STACK"
    text = " ".join(str(proc).split())
    # two rows before the loop, then one new row per output row, read back modulo 3
    assert "for y in seq(0, 2):" in text and "tmp[(2 + y) % 3, x] =" in text
    assert "tmp[y % 3, x] + tmp[(1 + y) % 3, x] + tmp[(2 + y) % 3, x]" in text


def test_an_argument_intermediate_is_still_written_in_place():
    root = build_proc(load_workload(BLUR, "blur2", SIZES))
    for rewrite in compute_at(root):
        proc = try_apply(root, rewrite)
        assert "tmp" in [a.name() for a in proc.args()]
        assert not any(isinstance(s, AllocCursor) for s in proc.body())
        # the full-size rows are written: tmp[row, x] with the row counted from the top
        text = " ".join(str(proc).split())
        assert re.search(r"tmp\[(yp \+ \d+ \* yo|2 \+ y), x\] =", text), rewrite.describe()


def test_a_stencil_with_reduction_loops_gets_its_taps_as_the_halo(tmp_path):
    path = tmp_path / "rows5.py"
    path.write_text(STENCIL.format(after=""))
    root = build_proc(load_workload(path, "rows5", {"H": 37, "W": 12}))
    found = by_mode(compute_at(root))
    # out[y] reads tmp[y + k] for k in 0..4: four rows ahead, a 5-row circular buffer
    assert found["slide"].arg("lead") == 4 and found["slide"].arg("fold") == 5
    assert set(found) == {"slide", 16}  # 37 rows in 2 strips of 16 + 5 rows
    for rewrite in found.values():
        assert try_apply(root, rewrite) is not None, rewrite.describe()
    assert shape(alloc(try_apply(root, found["slide"]))) == [5, 12]


def test_an_intermediate_used_after_the_consumer_keeps_its_size(tmp_path):
    path = tmp_path / "rows5.py"
    path.write_text(STENCIL.format(after="for x in seq(0, W):\n        out[0, x] = tmp[H + 3, x]"))
    root = build_proc(load_workload(path, "rows5", {"H": 37, "W": 12}))
    found = compute_at(root)
    assert found and all(r.arg("fold", 0) == 0 and not r.arg("local", False) for r in found)
    for rewrite in found:
        assert shape(alloc(try_apply(root, rewrite))) == [41, 12]


def test_no_proposal_when_the_consumer_writes_what_the_producer_reads(tmp_path):
    path = tmp_path / "chain.py"
    path.write_text(
        "from __future__ import annotations\nfrom exo import proc\n\n@proc\n"
        "def chain(H: size, a: f32[H + 2], b: f32[H + 2], c: f32[H]):\n"
        "    for y in seq(0, H + 2):\n        b[y] = a[y] * 2.0\n"
        "    for y in seq(0, H):\n        a[y] = b[y + 2]\n        c[y] = b[y] + b[y + 1]\n"
    )
    assert compute_at(build_proc(load_workload(path, "chain", {"H": 40}))) == []


def test_compute_at_exports_as_a_script_with_the_same_c(tmp_path):
    workload = load_workload(BLUR, "blur2_local", SIZES)
    root = build_proc(workload)
    for key in ("slide", 8):
        schedule = Schedule((by_mode(compute_at(root))[key],))
        script = schedule_script(workload, schedule)
        assert "from exo.libs.memories import DRAM_STACK" in script
        if key == 8:
            assert "divide_with_recompute(p, p.find_loop('y #1'), 2, 8, ['yo', 'yi'])" in script
            assert "unsafe_disable_check=True" in script and "p = sink_alloc(p, 'tmp')" in script
        else:
            assert "p = resize_dim(p, 'tmp', 0, 3, 0, fold=True)" in script
        path = tmp_path / "schedule.py"
        path.write_text(script)
        result = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        exported = re.sub(r"\bblur2_local\b", KERNEL_SYMBOL, result.stdout.removesuffix("\n"))
        assert fingerprint(exported) == fingerprint(kernel_c(build_proc(workload, schedule)))


def test_a_sliding_window_inside_each_strip_composes_from_two_steps():
    root = build_proc(load_workload(BLUR, "blur2_local", SIZES))
    strips = try_apply(root, by_mode(compute_at(root))[8])
    inner = by_mode(compute_at(strips))
    # Halide's store_at(strip) + compute_at(row): each strip slides through 3 rows of tmp
    assert inner["slide"].target == "yi #0" and inner["slide"].arg("producer") == "yp #0"
    proc = try_apply(strips, inner["slide"])
    assert shape(alloc(proc)) == [3, 16] and alloc(proc).parent().name() == "yo"


def test_loops_without_a_halo_or_a_buffer_to_shrink_get_no_strips():
    root = build_proc(load_workload(BLUR, "blur2", SIZES))
    slid = try_apply(root, by_mode(compute_at(root))["slide"])
    # inside the slide, the producer's and the consumer's x loops: a plain fuse would do
    assert compute_at(slid) == []
