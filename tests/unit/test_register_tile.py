"""register_tile: vector register tiles of each target as one rewrite (real Exo, no compiler)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from schedsearch.core import KERNEL_SYMBOL, ExpandOptions, Rewrite, RewriteKind, Schedule
from schedsearch.transforms import build_proc, fingerprint, kernel_c, load_workload, propose, schedule_script, try_apply
from schedsearch.transforms.walk import written_buffers

ROOT = Path(__file__).resolve().parents[2]
MATMUL = ROOT / "examples" / "matmul.py"
AVX2 = ExpandOptions(target="avx2")
AVX512 = ExpandOptions(target="avx512")


@pytest.fixture(scope="module")
def small():
    """20 rows: 6-row tiles leave a 2-row tail, 8-row tiles a 4-row tail."""
    return load_workload(MATMUL, "sgemm", {"M": 20, "N": 32, "K": 8})


def simd(proc, options=AVX2):
    """The register tiles in vector instructions (not the scalar target's, left to gcc)."""
    return [r for r in propose(proc, options) if r.kind is RewriteKind.REGISTER_TILE and r.arg("isa") != "scalar"]


def shape(rewrite) -> tuple[int, int, str]:
    return int(rewrite.arg("rows")), int(rewrite.arg("cols")), str(rewrite.arg("order"))


def test_register_tiles_follow_the_target_and_its_registers(small):
    root = build_proc(small)
    assert simd(root, ExpandOptions()) == []  # scalar: gcc's vectoriser decides
    assert simd(root, ExpandOptions(target="scalar")) == []
    shapes = {shape(r) for r in simd(root)}
    # AVX2: 16 ymm registers, 8 f32 lanes; columns must divide 32
    assert {(r, c) for r, c, _ in shapes} == {(6, 16), (5, 16), (4, 16), (2, 32), (3, 16)}
    assert {o for _, _, o in shapes} == {"rows", "cols"}
    assert all(r.arg("isa") == "avx2" for r in simd(root))
    no_tails = {shape(r)[:2] for r in simd(root, ExpandOptions(target="avx2", allow_tails=False))}
    assert {(4, 16), (5, 16), (2, 32)} <= no_tails and all(20 % r == 0 for r, _ in no_tails)
    wide = load_workload(MATMUL, "sgemm", {"M": 20, "N": 64, "K": 8})
    big = {shape(r)[:2] for r in simd(build_proc(wide), AVX512)}
    # AVX-512: 32 zmm registers, 16 lanes: 6 rows x 4 vectors = 24 accumulators
    assert (6, 64) in big and all(c % 16 == 0 for _, c in big)
    assert all(r * (c // 16) + c // 16 + 1 <= 32 for r, c in big)


def test_tile_shapes_fit_every_targets_registers():
    from schedsearch.targets import TARGETS
    from schedsearch.transforms.rules.tile_nests import tile_shapes

    for t in TARGETS:
        shapes = tile_shapes(t)
        assert shapes and all(r * v + v + 1 <= t.registers for r, v in shapes)
    from schedsearch.targets import AVX2 as AVX2_TARGET, AVX512 as AVX512_TARGET

    assert tile_shapes(AVX512_TARGET)[0] == (6, 4)  # Exo's own AVX-512 SGEMM tile
    assert (6, 2) in tile_shapes(AVX2_TARGET)[:2]  # the classic AVX2 6x16


def test_a_simd_kernel_step_of_an_older_schedule_file_replays_as_an_avx2_tile(small):
    root = build_proc(small)
    step = next(r for r in simd(root) if shape(r) == (6, 16, "cols"))
    legacy = Rewrite(RewriteKind.SIMD_KERNEL, step.target, tuple((k, v) for k, v in step.args if k != "isa"))
    assert kernel_c(try_apply(root, legacy)) == kernel_c(try_apply(root, step))


def test_an_avx512_tile_is_avx512_instructions(small):
    wide = load_workload(MATMUL, "sgemm", {"M": 20, "N": 64, "K": 8})
    root = build_proc(wide)
    step = next(r for r in simd(root, AVX512) if shape(r) == (6, 64, "cols"))
    c = kernel_c(try_apply(root, step))
    assert "__m512 C_reg[6][4];" in c and "__m512 C_reg_t[2][4];" in c
    assert c.count("] = _mm512_fmadd_ps(") == 6 * 4 + 2 * 4
    assert c.count("= _mm512_loadu_ps(&B[") == 4 + 4
    assert "_mm256" not in c


@pytest.mark.parametrize("proc_name", ["matmul_i8"])
def test_no_simd_kernel_for_integer_or_widened_nests(proc_name):
    workload = load_workload(MATMUL, proc_name)
    assert simd(build_proc(workload)) == []


def test_the_kernel_is_avx2_instructions_with_a_tail_kernel(small):
    root = build_proc(small)
    step = next(r for r in simd(root) if shape(r) == (6, 16, "cols"))
    proc = try_apply(root, step)
    assert proc is not None
    c = kernel_c(proc)
    # main kernel: 6 rows x 2 vectors; tail kernel: 2 rows x 2 vectors, one k step each
    assert "__m256 C_reg[6][2];" in c and "__m256 C_reg_t[2][2];" in c
    # (Exo's C also quotes each instruction's template once in a comment)
    assert c.count("] = _mm256_fmadd_ps(") == 6 * 2 + 2 * 2
    assert c.count("= _mm256_broadcast_ss(&A[") == 6 + 2
    # the column vectors are loaded once per k step, not once per row
    assert c.count("= _mm256_loadu_ps(&B[") == 2 + 2
    assert "_mm256_storeu_ps(&C[" in c
    # the tail starts right after the 3 whole tiles: rows 18 and 19
    assert "18 +" in str(proc) and "3 * 6" not in str(proc)


def test_both_kernels_are_built_before_either_is_unrolled(small):
    """Each Exo call costs with the size of the whole proc: the tail kernel's calls run on
    a proc whose main kernel is still rolled, and every unroll comes at the end."""
    from schedsearch.transforms.rules import lower

    step = next(r for r in simd(build_proc(small)) if shape(r) == (6, 16, "cols"))
    ops = [call.op for call in lower(step)]
    first_unroll = ops.index("unroll_loop")
    tail_stage = [i for i, op in enumerate(ops) if op == "stage_mem"][1]  # the tail's output tile
    assert tail_stage < first_unroll
    assert set(ops[first_unroll:-1]) == {"unroll_loop"} and ops[-1] == "simplify"
    assert ops.count("unroll_loop") == 6  # three for each kernel


def test_instruction_operands_count_as_reads_and_writes(small):
    proc = try_apply(build_proc(small), next(r for r in simd(build_proc(small)) if shape(r) == (6, 16, "cols")))
    assert {"A", "B"}.isdisjoint(written_buffers(proc))
    assert "C" in written_buffers(proc)
    packs = {(r.target, r.arg("window")) for r in propose(proc, AVX2) if r.kind is RewriteKind.PACK}
    # B's column panel is re-read by every row tile of a column of tiles: packable
    assert ("io #0", "B[0:8, 16 * jo:16 * jo + 16]") in packs


def test_simd_schedule_exports_as_a_script_with_the_same_c(small, tmp_path):
    root = build_proc(small)
    step = next(r for r in simd(root) if shape(r) == (6, 16, "cols"))
    proc = try_apply(root, step)
    pack = next(r for r in propose(proc, AVX2) if r.kind is RewriteKind.PACK and r.target == "io #0")
    schedule = Schedule((step, pack))
    script = schedule_script(small, schedule)
    assert "from exo.platforms.x86 import mm256_broadcast_ss, mm256_fmadd_ps" in script
    assert "def find_in(p, loop, pattern):" in script
    assert "def replace_in(p, loops, instrs):" in script and "p = replace_in(p, ['" in script
    path = tmp_path / "schedule.py"
    path.write_text(script)
    result = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    exported = re.sub(r"\bsgemm\b", KERNEL_SYMBOL, result.stdout.removesuffix("\n"))
    assert fingerprint(exported) == fingerprint(kernel_c(build_proc(small, schedule)))


@pytest.mark.parametrize(
    "flags,expected",
    [
        (["sse2", "avx", "avx2", "fma", "avx512f", "avx512bw"], "avx512"),
        (["sse2", "avx", "avx2", "fma"], "avx2"),
        (["sse2", "avx", "avx2"], "scalar"),  # AVX2 without FMA: no fused multiply-add
        (["fp", "asimd"], "neon"),
        ([], "scalar"),
    ],
)
def test_target_auto_is_the_widest_the_cpu_flags_allow(monkeypatch, flags, expected):
    from schedsearch.cli.wiring import expand_options
    from schedsearch.evaluate import machine
    from schedsearch.targets import detect

    assert detect(flags).name == expected
    monkeypatch.setattr(machine, "_cpu_model_and_flags", lambda: ("some cpu", sorted(flags)))
    assert expand_options(False, "auto").target == expected
    # an explicit target is taken whatever the CPU: its kernels then fail and are recorded
    assert expand_options(False, "scalar").target == "scalar"
    assert expand_options(True, "avx2") == ExpandOptions(allow_parallel=True, target="avx2")


def test_loops_doing_under_one_percent_of_the_work_get_no_proposals():
    from schedsearch.transforms.walk import loop_work

    workload = load_workload(MATMUL, "sgemm", {"M": 20, "N": 32, "K": 256})
    root = build_proc(workload)
    work, total = loop_work(root)
    assert total == work["i #0"] == work["j #0"] == work["k #0"] == 20 * 32 * 256
    step = next(r for r in simd(root) if shape(r) == (6, 16, "cols"))
    proc = try_apply(root, step)
    work, total = loop_work(proc)
    # per 6x16 tile: 12 vector loads and 12 stores of C against 256 k steps of (one
    # allocation each) 2 loads of B, and per row a broadcast and 2 fmadds
    assert work["i0 #0"] == work["i0 #1"] == 2 * 3 * 6 * 2
    assert work["k #0"] == 2 * 3 * 256 * (1 + 2 + 6 * (1 + 1 + 2))
    targets = {r.target.split()[0] for r in propose(proc, AVX2)}
    assert "i0" not in targets and "jv" not in targets  # the tile's copy loops: 0.4%
    assert {"jo", "io", "k", "j_to"} <= targets  # the kernel and its 2-row tail (11%)


def test_a_split_with_a_tail_leaves_no_float_index_in_instruction_operands(small):
    from schedsearch.core import Rewrite

    root = build_proc(small)
    proc = try_apply(root, next(r for r in simd(root) if shape(r) == (6, 16, "cols")))
    split = Rewrite.make(RewriteKind.SPLIT, "io #0", factor=2, outer="ioo", inner="ioi", tail="cut_and_guard")
    c = kernel_c(try_apply(proc, split))
    # Exo 1.0.0 prints an unfolded "3 / 2 * 2" inside a window argument as "2.0"
    assert "ioi" in c and not re.search(r"\b\d+\.0\b", c.split("schedsearch_kernel", 1)[1])


def test_an_f64_tile_on_an_avx512_target_uses_avx2_instructions():
    dgemm = load_workload(ROOT / "tests" / "data" / "workloads" / "dgemm.py", "dgemm", {"M": 12, "N": 16, "K": 4})
    root = build_proc(dgemm)
    tiles = simd(root, AVX512)
    assert tiles and all(r.arg("isa") == "avx2" and int(r.arg("cols")) % 4 == 0 for r in tiles)
    c = kernel_c(try_apply(root, tiles[0]))
    assert "_mm256_fmadd_pd(" in c and "_mm512" not in c
