"""vectorize: loops in the target's vector instructions as one rewrite (real Exo, no compiler)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from schedsearch.core import KERNEL_SYMBOL, ExpandOptions, Rewrite, RewriteKind, Schedule
from schedsearch.transforms import build_proc, kernel_c, load_workload, propose, schedule_script, try_apply
from schedsearch.transforms.calls import ExoCall, Stmt, render
from schedsearch.transforms.vector_steps import Bind, Plan

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
KERNELS = ROOT / "tests" / "data" / "workloads" / "vector_kernels.py"


def vectorize(workload, isa: str, allow_tails: bool = True) -> list[Rewrite]:
    proc = build_proc(workload)
    return [r for r in propose(proc, ExpandOptions(target=isa, allow_tails=allow_tails)) if r.kind is RewriteKind.VECTORIZE]


def summary(rewrites) -> set[tuple[str, str, str, int]]:
    """(loop, mode, tail, accumulators or vectors side by side) of each proposal."""
    return {(r.target, str(r.arg("mode")), str(r.arg("tail")), int(r.arg("accs", r.arg("vecs", 1)))) for r in rewrites}


def applied(workload, rewrite: Rewrite) -> str:
    """The C function's body after ``rewrite`` (without the instruction templates Exo
    quotes in comments above it)."""
    proc = try_apply(build_proc(workload), rewrite)
    assert proc is not None, rewrite.describe()
    return kernel_c(proc).rsplit(f"void {KERNEL_SYMBOL}(", 1)[1]


@pytest.fixture(scope="module")
def conv1d():
    return load_workload(EXAMPLES / "conv1d.py", None, {"N": 37, "R": 5})


@pytest.fixture(scope="module")
def matvec():
    return load_workload(EXAMPLES / "matvec.py", None, {"M": 3, "N": 64})


def test_nothing_is_proposed_for_scalar_or_without_a_target(conv1d, matvec):
    blur = load_workload(EXAMPLES / "blur.py", None, {"H": 2, "W": 16})
    for workload in (conv1d, matvec, blur, load_workload(KERNELS, "vadd")):
        assert vectorize(workload, "scalar") == []
        assert [r for r in propose(build_proc(workload)) if r.kind is RewriteKind.VECTORIZE] == []


def test_conv1d_vectorises_the_output_loop_with_cut_and_masked_tails(conv1d):
    # 37 outputs: 2 vectors of 16 and 5 left over (one masked step), or 2 vectors side by side
    assert summary(vectorize(conv1d, "avx512")) == {("i #0", "map", t, v) for t, v in (("cut", 1), ("masked", 1), ("cut", 2))}
    # AVX2 has no masked FMA: only the scalar remainder; 1, 2 or 4 vectors of 8 side by side
    assert summary(vectorize(conv1d, "avx2")) == {("i #0", "map", "cut", v) for v in (1, 2, 4)}
    assert vectorize(conv1d, "avx2", allow_tails=False) == []
    exact = load_workload(EXAMPLES / "conv1d.py", None, {"N": 32, "R": 16})
    # the output loop and (R = 16 taps) the reduction over the taps
    assert summary(vectorize(exact, "avx512")) == {
        ("i #0", "map", "perfect", 1), ("i #0", "map", "perfect", 2), ("r #0", "reduce", "perfect", 1)}


def test_output_vectors_side_by_side_share_the_inner_loop():
    conv = load_workload(EXAMPLES / "conv1d.py", None, {"N": 64, "R": 5})
    four = next(r for r in vectorize(conv, "avx512") if r.arg("vecs") == 4)
    body = applied(conv, four)
    # per tap: 4 loads and 4 independent FMAs into 4 output registers, stored once
    assert "__m512 y_vec[4];" in body and body.count("_mm512_fmadd_ps(") == 4
    assert body.count("_mm512_storeu_ps(") == 4 and "for (int_fast32_t r = 0; r < 5; r++)" in body
    # AVX2: at most 4 vectors (a quarter of its 16 registers)
    assert {r.arg("vecs") for r in vectorize(conv, "avx2")} == {None, 2, 4}


def test_conv1d_keeps_the_output_vector_in_a_register_across_the_taps(conv1d):
    masked = next(r for r in vectorize(conv1d, "avx512") if r.arg("tail") == "masked")
    body = applied(conv1d, masked)
    # one FMA per tap, the output stored once per vector
    assert body.count("_mm512_fmadd_ps(") == 1 and body.count("_mm512_storeu_ps(") == 1
    assert "_mm512_mask_fmadd_ps(" in body and "_mm512_mask_storeu_ps(" in body and "_mm512_maskz_loadu_ps(" in body
    assert "_mm256" not in body


def test_matvec_reduces_into_vectors_of_partial_sums(matvec):
    found = vectorize(matvec, "avx512")
    # 64 columns: 1, 2 or 4 accumulators of 16 lanes divide them; 8 would need 128
    assert summary(found) == {("j #0", "reduce", "perfect", a) for a in (1, 2, 4)}
    body = applied(matvec, next(r for r in found if r.arg("accs") == 4))
    assert body.count("_mm512_fmadd_ps(") == 4  # four independent chains
    assert "__m512 y_acc[4];" in body
    # no horizontal add in Exo's AVX-512 set: the sums are stored and added in C
    assert "_mm512_storeu_ps(&y_acc_lanes" in body
    avx2 = next(r for r in vectorize(matvec, "avx2") if r.arg("accs") == 4)
    body = applied(matvec, avx2)
    assert body.count("_mm256_fmadd_ps(") == 4 and "_mm256_hadd_ps" in body and "_mm512" not in body


def test_a_reduction_gets_a_cut_tail_but_never_a_masked_one():
    workload = load_workload(EXAMPLES / "matvec.py", None, {"M": 3, "N": 37})
    assert summary(vectorize(workload, "avx512")) == {("j #0", "reduce", "cut", a) for a in (1, 2)}
    assert vectorize(workload, "avx512", allow_tails=False) == []


@pytest.mark.parametrize("width,tails", [(16, {"perfect"}), (21, {"cut", "masked"})])
def test_blur_stages_vectorise_with_avx2_instructions_even_on_an_avx512_target(width, tails):
    blur = load_workload(EXAMPLES / "blur.py", None, {"H": 2, "W": width})
    found = vectorize(blur, "avx2")
    assert summary(found) == {(loop, "map", tail, 1) for loop in ("x #0", "x #1") for tail in tails}
    body = applied(blur, max(found, key=lambda r: (r.target, str(r.arg("tail")))))  # x #1, masked if offered
    assert "_mm256_div_ps(" in body and "_mm256_add_ps(" in body
    assert ("_mm256_maskstore_ps" in body) == ("masked" in tails)
    # Exo's AVX-512 set has no division: an AVX-512 target uses the AVX2 instructions it implies
    assert vectorize(blur, "avx512") == found and all(r.arg("isa") == "avx2" for r in found)


def test_elementwise_and_f64_kernels_follow_the_targets_tables():
    vadd = load_workload(KERNELS, "vadd", {"N": 37})
    assert summary(vectorize(vadd, "avx512")) == {("i #0", "map", t, 1) for t in ("cut", "masked")}
    assert summary(vectorize(vadd, "avx2")) == {("i #0", "map", t, 1) for t in ("cut", "masked")}
    # a multiply and a subtraction: AVX2 has both, Exo's AVX-512 set neither
    affine = load_workload(KERNELS, "affine2d", {"M": 3, "N": 16})
    assert summary(vectorize(affine, "avx2")) == {("j #0", "map", "perfect", 1)}
    assert vectorize(affine, "avx512") == vectorize(affine, "avx2")  # AVX2's, which AVX-512 CPUs run
    # f64: AVX2 has 4-lane pd forms, Exo's AVX-512 set has no f64 at all
    dmatvec = load_workload(KERNELS, "dmatvec", {"M": 3, "N": 16})
    found = vectorize(dmatvec, "avx2")
    assert summary(found) == {("j #0", "reduce", "perfect", a) for a in (1, 2, 4)}
    assert all(r.arg("dtype") == "f64" and r.arg("lanes") == 4 for r in found)
    body = applied(dmatvec, found[0])
    assert "_mm256_fmadd_pd(" in body and "_mm256_loadu_pd(" in body
    assert vectorize(dmatvec, "avx512") == found  # AVX2's pd forms


def test_s_equals_s_plus_e_is_folded_into_an_fma():
    dscale = load_workload(KERNELS, "dscale", {"N": 8})  # y[i] = 0.5 * x[i] + y[i]
    (rewrite,) = vectorize(dscale, "avx2")
    assert rewrite.arg("folds") == "0/c"  # commuted, then folded into y[i] += 0.5 * x[i]
    body = applied(dscale, rewrite)
    assert "_mm256_fmadd_pd(" in body and "_mm256_broadcast_sd(" in body


def test_loops_that_do_not_stride_by_one_are_not_proposed():
    sgemm = load_workload(EXAMPLES / "matmul.py", "sgemm", {"M": 4, "N": 32, "K": 32})
    # j: C[i, j] and B[k, j] walk j, A[i, k] is broadcast; i and k stride by rows of B or C
    assert {r.target for r in vectorize(sgemm, "avx512")} == {"j #0"}
    assert vectorize(load_workload(EXAMPLES / "matmul.py", "matmul_i8"), "avx2") == []


def test_neon_proposals_apply_and_write_neon_vectors(conv1d):
    # (x86 proposals are compiled and checked in tests/integration/test_vectorize_kernels.py)
    for workload in (conv1d, load_workload(KERNELS, "axpy", {"N": 37}), load_workload(KERNELS, "dmatvec", {"M": 2, "N": 9})):
        found = vectorize(workload, "neon")
        assert found and all(r.arg("lanes") in (2, 4) for r in found)
        for rewrite in found[:2]:
            body = applied(workload, rewrite)
            assert ("float32x4_t" in body or "float64x2_t" in body) and "_mm" not in body


def test_the_plan_round_trips_through_rewrite_arguments(conv1d):
    rewrite = next(r for r in vectorize(conv1d, "avx512") if r.arg("tail") == "masked")
    plan = Plan.from_args(rewrite.arg)
    assert Rewrite.make(rewrite.kind, rewrite.target, **{k: v for k, v in rewrite.args if k not in plan.args()},
                        **plan.args()) == rewrite
    assert Bind.decode(Bind((1, 2), "lr", "t_vec", "o").encode()) == Bind((1, 2), "lr", "t_vec", "o")
    assert "#" not in "".join(str(v) for v in plan.args().values())


def test_statement_paths_render_blocks_gaps_and_expressions():
    call = ExoCall("bind_expr", (Stmt("i #0", (1, 0, "rhs", "lhs")), "w_vec"))
    assert render(call) == "p = bind_expr(p, p.find_loop('i #0').body()[1].body()[0].rhs().lhs(), 'w_vec')"
    assert render(ExoCall("fission", (Stmt("ii #2", (0, "after")),))) == \
        "p = fission(p, p.find_loop('ii #2').body()[0].after())"
    assert render(ExoCall("stage_mem", (Stmt("i", ("body",)), "y[i]", "y_vec"))) == \
        "p = stage_mem(p, p.find_loop('i').body(), 'y[i]', 'y_vec')"


def test_a_vectorized_schedule_exports_as_a_script_with_the_same_c(conv1d, tmp_path):
    rewrite = next(r for r in vectorize(conv1d, "avx512") if r.arg("tail") == "masked")
    schedule = Schedule((rewrite,))
    script = schedule_script(conv1d, schedule)
    assert "mm512_mask_fmadd_ps" in script and "fold_into_reduce" not in script
    path = tmp_path / "schedule.py"
    path.write_text(script)
    result = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    exported = re.sub(r"\bconv1d\b", KERNEL_SYMBOL, result.stdout.removesuffix("\n"))
    # Exo orders the quoted instruction templates and the function by name, so the renamed
    # kernel's C has them in another order: compare without them
    assert without_templates(exported) == without_templates(kernel_c(build_proc(conv1d, schedule)))


def without_templates(c: str) -> str:
    return re.sub(r"\n+", "\n", re.sub(r"/\* relying on the following instruction.*?\*/", "", c, flags=re.S))
