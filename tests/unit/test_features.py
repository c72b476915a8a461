"""Candidate features: deterministic, named, size-aware, and read correctly from Exo's C."""

from __future__ import annotations

import dataclasses
import math

import pytest

from schedsearch.core import Rewrite, RewriteKind, Schedule
from schedsearch.testing.fake_tree import fake_workload
from schedsearch.model.features import (
    FEATURE_NAMES,
    FEATURE_VERSION,
    CacheSizes,
    candidate_features,
    feature_vector,
    machine_caches,
    work_estimate,
)

HEADER = "void schedsearch_kernel( void *ctxt, const float* A, const float* B, float* C ) {\n"

NAIVE = HEADER + """for (int_fast32_t i = 0; i < 64; i++) {
  for (int_fast32_t j = 0; j < 64; j++) {
    for (int_fast32_t k = 0; k < 64; k++) {
      C[i * 64 + j] += A[i * 64 + k] * B[k * 64 + j];
    }
  }
}
}
"""

TILED = HEADER + """for (int_fast32_t io = 0; io < 10; io++) {
  __m512 C_reg[6][4];
  for (int_fast32_t k = 0; k < 64; k++) {
    __m512 B_vec[4];
    B_vec[0] = _mm512_loadu_ps(&B[(k) * (64)]);
    __m512 A_vec;
    A_vec = _mm512_set1_ps(A[(6 * io) * (64) + k]);
    C_reg[0][0] = _mm512_fmadd_ps(A_vec, B_vec[0], C_reg[0][0]);
    C_reg[0][1] = _mm512_fmadd_ps(A_vec, B_vec[1], C_reg[0][1]);
  }
  _mm512_storeu_ps(&C[(6 * io) * (64)], C_reg[0][0]);
}
float *B_pack = (float*) malloc(64 * 64 * sizeof(*B_pack));
free(B_pack);
}
"""


def test_names_are_fixed_and_the_version_follows_them() -> None:
    assert len(FEATURE_NAMES) == len(set(FEATURE_NAMES)) > 40
    vector = feature_vector(NAIVE, Schedule(), fake_workload())
    assert vector.version == FEATURE_VERSION and len(vector.values) == len(FEATURE_NAMES)


def test_features_are_deterministic() -> None:
    schedule = Schedule((Rewrite.make(RewriteKind.REGISTER_TILE, "i #0", rows=6, cols=64),))
    first = feature_vector(TILED, schedule, fake_workload(), CacheSizes())
    assert all(feature_vector(TILED, schedule, fake_workload(), CacheSizes()) == first for _ in range(3))


def test_the_naive_loop_nest() -> None:
    f = candidate_features(NAIVE, Schedule(), fake_workload(n=64), CacheSizes(l1=32 * 1024))
    assert (f.loops, f.max_nest_depth, f.hot_nest_depth) == (3, 3, 3)
    assert (f.trip_l0, f.trip_l1, f.trip_l2, f.trip_l3) == (6, 6, 6, 0)  # log2(64) per level
    assert f.log2_dynamic_statements == pytest.approx(18)
    # Innermost k: C[i,j] does not move, A[i,k] is contiguous, B[k,j] strides a row.
    assert (f.innermost_invariant_share, f.innermost_unit_stride_share, f.innermost_strided_share) == pytest.approx(
        (1 / 3, 1 / 3, 1 / 3))
    # One k loop touches a row of A and a column of B plus one C element: 2*64*4 + 4 bytes.
    assert f.ws_l1_level0 == pytest.approx(__import__("math").log2((2 * 64 * 4 + 4) / (32 * 1024)))
    assert f.vector_bits == 0 and f.vec_fma == 0 and f.local_buffers == 0


I8_HEADER = "void schedsearch_kernel( void *ctxt, const int8_t* A, const int8_t* B, int32_t* C ) {\n"
I8_ROOT = I8_HEADER + """for (int_fast32_t i = 0; i < 16; i++) {
  for (int_fast32_t j = 0; j < 16; j++) {
    for (int_fast32_t k = 0; k < 16; k++) {
      int32_t a;
      int32_t b;
      a = (int32_t)(A[i * 16 + k]);
      b = (int32_t)(B[k * 16 + j]);
      C[i * 16 + j] += a * b;
    }
  }
}
}
"""


def test_the_innermost_loop_counts_every_access_of_its_body() -> None:
    # Exo widens int8 operands into temporaries: the loads and the accumulation are three
    # statements of one computation, and the first of them alone is not its access pattern.
    f = candidate_features(I8_ROOT, Schedule(), fake_workload(n=16))
    assert (f.innermost_invariant_share, f.innermost_unit_stride_share, f.innermost_strided_share) == pytest.approx(
        (1 / 3, 1 / 3, 1 / 3))


def test_the_hot_statement_is_in_the_nest_that_does_the_most_work() -> None:
    # An unrolled computation runs each copy of its body no more often than the staging
    # copy beside it: the nest's total work, not one statement's count, says which is hot.
    c = I8_HEADER + """int32_t C_stage[16 * 16];
for (int_fast32_t i0 = 0; i0 < 16; i0++) {
  for (int_fast32_t i1 = 0; i1 < 16; i1++) {
    C_stage[i0 * 16 + i1] = C[i0 * 16 + i1];
  }
}
for (int_fast32_t k = 0; k < 16; k++) {
  for (int_fast32_t j = 0; j < 16; j++) {
    C_stage[j] += (int32_t)(A[k]) * (int32_t)(B[k * 16 + j]);
  }
  for (int_fast32_t j = 0; j < 16; j++) {
    C_stage[16 + j] += (int32_t)(A[16 + k]) * (int32_t)(B[k * 16 + j]);
  }
}
}
"""
    f = candidate_features(c, Schedule(), fake_workload(n=16))
    # Innermost j of the computation: A[k] does not move, C_stage and B rows are contiguous
    # (the copy loop's accesses would all be contiguous).
    assert (f.innermost_invariant_share, f.innermost_unit_stride_share) == pytest.approx((1 / 3, 2 / 3))


def test_vector_code_register_tile_and_buffers() -> None:
    schedule = Schedule((Rewrite.make(RewriteKind.REGISTER_TILE, "i #0", rows=6, cols=64),
                         Rewrite.make(RewriteKind.PACK, "i #0", buffer="B")))
    f = candidate_features(TILED, schedule, fake_workload())
    assert f.vector_bits == 512
    assert f.vec_fma == pytest.approx(__import__("math").log2(3))  # two FMAs
    assert (f.vec_load, f.vec_broadcast, f.vec_store) == (1, 1, 1)  # log2(1 + 1)
    assert (f.tile_rows, f.tile_cols, f.vector_accumulators) == (6, 64, 24)
    assert (f.steps_register_tile, f.steps_pack, f.depth) == (1, 1, 2)
    assert (f.local_buffers, f.heap_buffers, f.heap_buffers_in_loops) == (1, 1, 0)
    assert f.dynamic_vector_share > 0.95  # the store runs 10 times, the k loop's 4 lines 640 times


def test_a_composite_step_counts_as_the_plain_steps_it_is_made_of() -> None:
    """A sink is a split and a reorder: it adds no feature, so measurements stored under the
    feature version before it existed still train the model."""
    sink = Rewrite.make(RewriteKind.SINK, "k #0", factor=2, levels=1, outer="ko", inner="ki")
    f = candidate_features(NAIVE, Schedule((sink,)), fake_workload(n=64))
    assert (f.steps_split, f.steps_reorder, f.depth) == (1, 1, 1)
    assert not any(name.endswith("sink") for name in FEATURE_NAMES)


def test_the_work_estimate_is_the_dynamic_statement_count_over_the_roots() -> None:
    naive = feature_vector(NAIVE, Schedule(), fake_workload(n=64), root_work=18.0)
    tiled = feature_vector(TILED, Schedule(), fake_workload(n=64), root_work=18.0)
    assert work_estimate(naive) == pytest.approx(0.0)  # 64^3 statements, as many as the root's
    assert work_estimate(tiled) < -4
    assert work_estimate(feature_vector(NAIVE, Schedule(), fake_workload(n=64), root_work=20.0)) == pytest.approx(-2)
    assert work_estimate(dataclasses.replace(naive, version="v0-old")) is None
    assert work_estimate(dataclasses.replace(naive, values=naive.values[:-1])) is None


def test_the_work_estimate_of_real_children_puts_vector_code_first() -> None:
    """On real Exo children of SGEMM: register tiles do less work than the root by about
    the vector width; a loop reorder does the same work."""
    from pathlib import Path

    from schedsearch.core import ExpandOptions
    from schedsearch.transforms import Expander, load_workload, propose, root_candidate

    workload = load_workload(Path(__file__).resolve().parents[2] / "examples" / "matmul.py", "sgemm",
                             {"M": 16, "N": 64, "K": 16})
    expander = Expander(workload, ExpandOptions(target="avx2"))
    root = root_candidate(workload)
    assert expander.root_work == pytest.approx(14, abs=0.01)  # 16*64*16 statements (and an init)
    assert work_estimate(root.features) == 0.0
    proc = expander.proc_for(root.schedule)
    wanted = {RewriteKind.REORDER, RewriteKind.REGISTER_TILE}
    children = {}
    for rewrite in propose(proc, expander.options):
        if rewrite.kind in wanted and rewrite.kind not in children:
            children[rewrite.kind] = expander.candidate(root.schedule.then(rewrite), root)
    assert set(children) == wanted
    assert work_estimate(children[RewriteKind.REORDER].features) == pytest.approx(0.0, abs=0.2)
    assert work_estimate(children[RewriteKind.REGISTER_TILE].features) < -2  # 8 lanes and fewer loads


def test_traffic_counts_data_again_only_where_a_loop_iteration_does_not_fit() -> None:
    import math

    flops = 2 * 64**3
    # A cache that holds everything: each array once, 3 * 64 * 64 floats.
    roomy = candidate_features(NAIVE, Schedule(), fake_workload(n=64), CacheSizes(l1=1 << 30, l2=1 << 30, l3=1 << 30))
    assert roomy.traffic_l1 == roomy.traffic_l3 == pytest.approx(math.log2(3 * 64 * 64 * 4 / flops))
    # 256 bytes: one j iteration (a row of A, a column of B: 516 bytes) no longer fits, so A
    # comes in again for every j, and B (not indexed by i) again for every i; one k
    # iteration (12 bytes) still fits, so C[i, j] stays for its whole k loop.
    tight = candidate_features(NAIVE, Schedule(), fake_workload(n=64), CacheSizes(l1=256, l2=1 << 30, l3=1 << 30))
    assert tight.traffic_l1 == pytest.approx(math.log2((2 * 64**3 + 64 * 64) * 4 / flops))
    assert tight.traffic_l2 == roomy.traffic_l2


def test_traffic_counts_vector_lanes_and_not_vector_registers() -> None:
    import math

    f = candidate_features(TILED, Schedule(), fake_workload(n=64), CacheSizes(l1=1 << 30, l2=1 << 30, l3=1 << 30))
    # A: one float per (io, k); B: a 512-bit load (16 floats) per k, the same for every io;
    # C: one 512-bit store per io. The accumulators C_reg and B_vec are registers.
    assert f.traffic_l1 == pytest.approx(math.log2((10 * 64 * 4 + 64 * 64 + 10 * 64) / (2 * 64**3)))


def test_the_loop_order_of_a_register_tile_shows_in_the_l2_traffic() -> None:
    """Columns first keeps a panel of B in the cache while A streams past once per panel;
    rows first streams all of B once per row block: the same work, far more traffic."""
    def tile(outer: str, inner: str) -> str:
        trips = {"jo": 8, "io": 64}
        return HEADER + f"""for (int_fast32_t {outer} = 0; {outer} < {trips[outer]}; {outer}++) {{
  for (int_fast32_t {inner} = 0; {inner} < {trips[inner]}; {inner}++) {{
    for (int_fast32_t k = 0; k < 512; k++) {{
      B_vec[0] = _mm512_loadu_ps(&B[(k) * (512) + 64 * jo]);
      A_vec = _mm512_set1_ps(A[(8 * io) * (512) + k]);
      C_reg[0][0] = _mm512_fmadd_ps(A_vec, B_vec[0], C_reg[0][0]);
    }}
  }}
}}
__m512 C_reg[8][4];
__m512 B_vec[4];
}}
"""
    # One row block's k loop (2 KB of A, 32 KB of B) fits 128 KB; a pass over all of B
    # (256 KB here: one vector of each 64 columns) or all of A (128 KB) with it does not.
    caches = CacheSizes(l1=48 * 1024, l2=128 * 1024, l3=32 << 20)
    cols = candidate_features(tile("jo", "io"), Schedule(), fake_workload(n=512), caches)
    rows = candidate_features(tile("io", "jo"), Schedule(), fake_workload(n=512), caches)
    assert cols.log2_dynamic_statements == rows.log2_dynamic_statements
    assert rows.traffic_l2 > cols.traffic_l2 + 1
    assert rows.traffic_l3 == cols.traffic_l3  # everything fits 32 MB either way


def test_sizes_count_relative_to_the_caches() -> None:
    small = candidate_features(NAIVE, Schedule(), fake_workload(n=64))
    large = candidate_features(NAIVE, Schedule(), fake_workload(n=1024))
    assert large.log2_flops - small.log2_flops == pytest.approx(12)
    assert large.log2_data_over_l2 - small.log2_data_over_l2 == pytest.approx(8)


def test_machine_caches_reads_sys_and_falls_back(tmp_path) -> None:
    for n, (level, kind, size) in enumerate([(1, "Data", "48K"), (1, "Instruction", "32K"), (2, "Unified", "2048K")]):
        d = tmp_path / f"index{n}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
    caches = machine_caches(str(tmp_path))
    assert caches == CacheSizes(l1=48 * 1024, l2=2048 * 1024, l3=CacheSizes().l3)
    assert machine_caches(str(tmp_path / "missing")) == CacheSizes()
    assert dataclasses.is_dataclass(caches)

# What gcc 12 made of I8_ROOT, read from its machine code (``evaluate.machine_code``): the
# i and j loops (lines 2, 3) are kept as loops, the k loop (line 4) left no branch of its
# own (unrolled), and the accumulation (line 9) uses 16-byte vectors.
I8_ROOT_NOTES = """# machine code by line of C: line vector-bytes branches instructions
2 0 1 3
3 0 1 4
7 0 0 16
8 0 0 16
9 16 0 200
"""


def test_the_compiler_notes_divide_the_work_of_the_loops_it_vectorized_by_their_lanes() -> None:
    workload = fake_workload(n=16)
    plain = candidate_features(I8_ROOT, Schedule(), workload)
    noted = candidate_features(I8_ROOT, Schedule(), workload, notes=I8_ROOT_NOTES)
    assert plain.compiler_notes == 0 and plain.log2_vector_work == 0
    assert noted.compiler_notes == 1
    # 16^3 iterations of 6 operations (two loads; a load, multiply, add and store), 4 int32
    # lanes a vector
    assert noted.log2_vector_work == pytest.approx(math.log2(4096 * 6 / 4))
    assert noted.compiler_vectorized_share == 1.0 and noted.compiler_vector_bytes == 4
    assert noted.compiler_unrolled_share == pytest.approx(1 / 3)
    # The same C, the j loop left scalar: 4x the work of the vectorized root.
    scalar = candidate_features(I8_ROOT, Schedule(), workload, notes="", root_vector_work=noted.log2_vector_work)
    assert scalar.compiler_vectorized_share == 0
    assert scalar.log2_vector_work_over_root == pytest.approx(2)
    assert work_estimate(scalar.vector()) == pytest.approx(2)  # the notes' estimate, not the statement count
    assert work_estimate(plain.vector()) == 0


def test_a_loop_counts_as_vectorized_at_the_widest_vectors_of_its_statements() -> None:
    """The loop-invariant loads of a vectorized loop stay scalar instructions; they cost
    no more than the vectorized statement beside them. Loop-free rows change nothing."""
    wide = I8_ROOT_NOTES.replace("9 16 0 200", "9 64 0 50") + "1 64 0 9\n"
    f = candidate_features(I8_ROOT, Schedule(), fake_workload(n=16), notes=wide)
    assert f.log2_vector_work == pytest.approx(math.log2(4096 * 6 / 16))  # 16 int32 lanes, all three statements
    assert f.compiler_vector_bytes == 6
    kept = I8_ROOT_NOTES + "4 0 1 2\n"  # the k loop kept as a loop
    assert candidate_features(I8_ROOT, Schedule(), fake_workload(n=16), notes=kept).compiler_unrolled_share == 0


def test_the_vector_work_counts_operations_so_a_register_tile_beats_plain_vectorized_c() -> None:
    """gcc vectorizes NAIVE's statement 16 wide; the tile keeps C in registers and issues
    one instruction a statement. Counted in statements both would look alike."""
    workload = fake_workload(n=64)
    naive = candidate_features(NAIVE, Schedule(), workload, notes="")
    vectorized = candidate_features(NAIVE, Schedule(), workload, notes="5 64 0 12\n",
                                    root_vector_work=naive.log2_vector_work)
    assert naive.log2_vector_work == pytest.approx(math.log2(64**3 * 6))  # 3 loads, multiply, add, store
    assert vectorized.log2_vector_work_over_root == pytest.approx(-4)
    tiled = candidate_features(TILED, Schedule(), workload, notes="", root_vector_work=naive.log2_vector_work)
    assert tiled.log2_vector_work_over_root < vectorized.log2_vector_work_over_root
