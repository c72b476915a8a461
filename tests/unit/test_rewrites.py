"""Each rewrite kind on small procs: what is proposed and what applying it does (real Exo)."""

from __future__ import annotations

from pathlib import Path

import pytest
from exo.API_cursors import ForCursor

from schedsearch.core import ExpandOptions, Rewrite, RewriteKind
from schedsearch.transforms import (
    build_proc,
    kernel_c,
    load_workload,
    loop_nest_text,
    propose,
    try_apply,
)
from schedsearch.transforms.calls import HELPERS, OPS
from schedsearch.transforms.rules import lower
from schedsearch.transforms.rules.loops import split_factors
from schedsearch.transforms.walk import loops, statements

ROOT = Path(__file__).resolve().parents[2]
MATMUL = ROOT / "examples" / "matmul.py"
DATA = ROOT / "tests" / "data" / "workloads"
OPTIONS = ExpandOptions()


def sgemm(n: int = 64):
    return build_proc(load_workload(MATMUL, "sgemm", {"M": n, "N": n, "K": n}))


def order(proc) -> list[tuple[str, int | None]]:
    """Loop names and trip counts in pre-order."""
    return [(info.name, info.trip) for info in loops(proc)]


def of_kind(proc, kind: RewriteKind, options: ExpandOptions = OPTIONS) -> list[Rewrite]:
    return [rw for rw in propose(proc, options) if rw.kind is kind]


def apply(proc, rewrite: Rewrite):
    out = try_apply(proc, rewrite)
    assert out is not None, rewrite.describe()
    return out


def tile(proc, fa: int, fb: int):
    rw = next(r for r in of_kind(proc, RewriteKind.TILE) if r.target == "i #0" and r.arg("fa") == fa and r.arg("fb") == fb)
    return apply(proc, rw)


def test_root_reorders_of_naive_matmul_are_exactly_ij_and_jk():
    proc = sgemm()
    assert [r.target for r in of_kind(proc, RewriteKind.REORDER)] == ["i j", "j k"]
    swapped = apply(proc, Rewrite.make(RewriteKind.REORDER, "i j"))
    assert [n for n, _ in order(swapped)] == ["j", "i", "k"]


def test_reorder_that_breaks_dependences_is_rejected():
    # the two loops of the fixture are siblings, not nested: nothing to reorder, and
    # forcing a reorder on a non-nested loop returns None instead of raising
    proc = build_proc(load_workload(DATA / "fusable.py"))
    assert of_kind(proc, RewriteKind.REORDER) == []
    assert try_apply(proc, Rewrite.make(RewriteKind.REORDER, "i j")) is None


def test_split_names_bounds_and_factors():
    proc = sgemm()
    splits = [r for r in of_kind(proc, RewriteKind.SPLIT) if r.target == "i #0"]
    assert [r.arg("factor") for r in splits] == [8, 16, 32, 2, 4]
    assert all(r.arg("tail") == "perfect" for r in splits)
    out = apply(proc, splits[0])
    assert order(out) == [("io", 8), ("ii", 8), ("j", 64), ("k", 64)]
    assert "C[8 * io + ii, j]" in str(out)


def test_split_with_tail_and_without_tails():
    w = load_workload(DATA / "two_procs.py", "scale", {"N": 100})
    proc = build_proc(w)
    with_tails = of_kind(proc, RewriteKind.SPLIT)
    assert [(r.arg("factor"), r.arg("tail")) for r in with_tails][:2] == [(8, "cut_and_guard"), (16, "cut_and_guard")]
    out = apply(proc, with_tails[0])
    assert [n for n, _ in order(out)] == ["io", "ii", "ii"]  # main loop nest and the cut tail
    no_tails = of_kind(proc, RewriteKind.SPLIT, ExpandOptions(allow_tails=False))
    assert [r.arg("factor") for r in no_tails] == [2, 4, 5, 10, 20, 25]
    assert all(r.arg("tail") == "perfect" for r in no_tails)


def test_split_factor_ranking():
    assert split_factors(512, 6, True) == [8, 16, 32, 64, 2, 4]
    assert split_factors(12, 3, False) == [2, 3, 4]
    assert split_factors(3, 6, True) == [2]


def test_tile_is_one_step_to_outer_outer_inner_inner():
    out = tile(sgemm(), 8, 32)
    assert order(out) == [("io", 8), ("jo", 2), ("ii", 8), ("ji", 32), ("k", 64)]


def test_hoist_moves_a_loop_over_several_loops():
    tiled = tile(sgemm(), 8, 32)
    hoists = of_kind(tiled, RewriteKind.HOIST)
    assert Rewrite.make(RewriteKind.HOIST, "k #0", levels=2) in hoists
    assert Rewrite.make(RewriteKind.HOIST, "k #0", levels=4) in hoists
    out = apply(tiled, Rewrite.make(RewriteKind.HOIST, "k #0", levels=2))
    assert [n for n, _ in order(out)] == ["io", "jo", "k", "ii", "ji"]


def test_stage_mem_puts_the_output_tile_in_a_stack_buffer():
    tiled = tile(sgemm(), 8, 32)
    hoisted = apply(tiled, Rewrite.make(RewriteKind.HOIST, "k #0", levels=2))
    stages = [r for r in of_kind(hoisted, RewriteKind.STAGE_MEM) if r.arg("hoist") is None]
    assert [(r.target, r.arg("window")) for r in stages] == [("k #0", "C[8 * io:8 * io + 8, 32 * jo:32 * jo + 32]")]
    out = apply(hoisted, stages[0])
    text = " ".join(str(out).split())  # Exo wraps long lines
    assert "C_stage: f32[8, 32] @ DRAM_STACK" in text
    assert "C_stage[ii, ji] +=" in text
    assert "float C_stage[8 * 32];" in kernel_c(out)


def test_stage_mem_of_a_single_element_around_a_long_loop():
    proc = sgemm()
    stages = [r for r in of_kind(proc, RewriteKind.STAGE_MEM) if r.arg("hoist") is None]
    assert [(r.target, r.arg("window")) for r in stages] == [("k #0", "C[i, j]")]
    out = apply(proc, stages[0])
    assert "C_stage: f32 @ DRAM" in str(out)
    c = kernel_c(out)
    assert "float C_stage;" in c and "C_stage[" not in c


def test_stage_mem_with_hoist_moves_the_reduction_loop_out_and_stages_all_it_covers():
    i8 = build_proc(load_workload(MATMUL, "matmul_i8"))
    hoisted = {r.arg("hoist"): r for r in of_kind(i8, RewriteKind.STAGE_MEM) if r.arg("hoist")}
    assert {n: (r.target, r.arg("window")) for n, r in hoisted.items()} == {
        1: ("k #0", "C[i, 0:16]"), 2: ("k #0", "C[0:16, 0:16]")}
    out = apply(i8, hoisted[2])
    # copy in, then k outermost over i and j accumulating into the local, then copy out
    assert [n for n, _ in order(out)] == ["i0", "i1", "k", "i", "j", "i0", "i1"]
    text = " ".join(str(out).split())
    assert "C_stage[i, j] +=" in text
    assert "int32_t C_stage[16 * 16];" in kernel_c(out)
    # the window a two-level hoist would cover at 128 x 128 (16384 elements) is too large to stage
    big = [r.arg("window") for r in of_kind(sgemm(128), RewriteKind.STAGE_MEM) if r.arg("hoist")]
    assert big == ["C[i, 0:128]"]
    # a loop whose index the written window depends on reduces into no fixed window: nothing to stage
    assert not [r for r in of_kind(i8, RewriteKind.STAGE_MEM) if r.arg("hoist") and r.target != "k #0"]


def test_sink_splits_a_loop_and_moves_its_inner_part_below_the_loops_it_encloses():
    i8 = build_proc(load_workload(MATMUL, "matmul_i8"))
    staged = apply(i8, next(r for r in of_kind(i8, RewriteKind.STAGE_MEM) if r.arg("hoist") == 2))
    sinks = {(r.arg("factor"), r.arg("levels")): r for r in of_kind(staged, RewriteKind.SINK) if r.target == "k #0"}
    # k encloses i and j: its inner part may go below one or both, in pairs or fours
    assert set(sinks) == {(2, 1), (2, 2), (4, 1), (4, 2)}
    out = apply(staged, sinks[(2, 1)])
    assert order(out)[2:6] == [("ko", 8), ("i", 16), ("ki", 2), ("j", 16)]
    assert "C_stage[i, j] +=" in " ".join(str(out).split())
    deep = apply(staged, sinks[(4, 2)])
    assert order(deep)[2:6] == [("ko", 4), ("i", 16), ("j", 16), ("ki", 4)]
    # the root nest of SGEMM: i encloses j and k, j only k, k nothing; factors must divide
    root = {(r.target, r.arg("factor"), r.arg("levels")) for r in of_kind(sgemm(), RewriteKind.SINK)}
    assert root == {("i #0", 2, 1), ("i #0", 2, 2), ("i #0", 4, 1), ("i #0", 4, 2), ("j #0", 2, 1), ("j #0", 4, 1)}
    odd = build_proc(load_workload(MATMUL, "sgemm", {"M": 63, "N": 63, "K": 63}))
    assert not of_kind(odd, RewriteKind.SINK)


def test_unroll_removes_a_short_loop():
    proc = build_proc(load_workload(DATA / "same_b" / "kern.py"))
    unrolls = of_kind(proc, RewriteKind.UNROLL)
    assert [r.target for r in unrolls] == ["i #0"]
    out = apply(proc, unrolls[0])
    assert loops(out) == []
    assert "y[3] = x[3]" in str(out)
    # a 64-trip loop is unrolled only when its body is tiny (k: one statement; j: k's loop)
    assert sorted(r.target for r in of_kind(sgemm(), RewriteKind.UNROLL)) == ["j #0", "k #0"]


def test_fuse_adjacent_loops_with_equal_bounds():
    proc = build_proc(load_workload(DATA / "fusable.py"))
    fuses = of_kind(proc, RewriteKind.FUSE)
    assert fuses == [Rewrite.make(RewriteKind.FUSE, "i #0", second="j #0")]
    out = apply(proc, fuses[0])
    assert order(out) == [("i", 16)]
    assert "y[i] = 2.0" in str(out)


def test_simplify_is_proposed_and_applies():
    tiled = tile(sgemm(), 8, 32)
    assert of_kind(tiled, RewriteKind.SIMPLIFY) == [Rewrite.make(RewriteKind.SIMPLIFY, "proc")]
    assert apply(tiled, Rewrite.make(RewriteKind.SIMPLIFY, "proc")) is not None


def test_parallelize_only_when_allowed():
    proc = sgemm()
    assert of_kind(proc, RewriteKind.PARALLELIZE) == []
    par = of_kind(proc, RewriteKind.PARALLELIZE, ExpandOptions(allow_parallel=True))
    assert par == [Rewrite.make(RewriteKind.PARALLELIZE, "i #0")]
    out = apply(proc, par[0])
    assert "#pragma omp parallel for" in kernel_c(out)


@pytest.mark.parametrize("path,proc", [(MATMUL, "sgemm"), (MATMUL, "matmul_i8"), (DATA / "fusable.py", None)])
def test_autofission_is_never_proposed(path, proc):
    options = ExpandOptions(allow_parallel=True, max_unroll=64, target="avx2")
    current = build_proc(load_workload(path, proc, {"M": 16, "N": 16, "K": 16} if proc == "sgemm" else None))
    assert "autofission" not in OPS
    for _ in range(3):  # a few levels deep, always taking the first legal proposal
        proposals = propose(current, options)
        for rw in proposals:
            assert "fission" not in rw.describe()
            assert all(call.op in OPS or call.op in HELPERS for call in lower(rw))
            # Exo's checked fission only splits vector statements apart (register tiles, vectorize)
            if rw.kind not in (RewriteKind.REGISTER_TILE, RewriteKind.VECTORIZE):
                assert all(call.op != "fission" for call in lower(rw))
        current = next(p for p in (try_apply(current, rw) for rw in proposals) if p is not None)


def test_patterns_designate_the_loops_exo_finds():
    # after unrolling, many loops share a name: "ji #n" must number them as Exo does
    tiled = tile(sgemm(), 8, 32)
    out = apply(tiled, Rewrite.make(RewriteKind.UNROLL, "ii #0"))
    infos = loops(out)
    assert sum(1 for i in infos if i.name == "ji") == 8
    cursors = [s for s, _ in statements(out) if isinstance(s, ForCursor)]
    for info, cursor in zip(infos, cursors, strict=True):
        assert out.find_loop(info.pattern) == cursor


def test_proposals_are_deterministic_and_moderate():
    first = propose(sgemm(512), OPTIONS)
    assert first == propose(sgemm(512), OPTIONS)
    assert 10 <= len(first) <= 60
    tiled = tile(sgemm(512), 8, 32)
    assert len(propose(tiled, OPTIONS)) <= 100


def test_loop_nest_text():
    text = loop_nest_text(tile(sgemm(), 8, 32))
    assert text.splitlines() == [
        "for io in 0..8",
        "  for jo in 0..2",
        "    for ii in 0..8",
        "      for ji in 0..32",
        "        for k in 0..64",
        "          C[...] +=",
    ]


def test_reorder_of_the_nth_nested_pair():
    # after unrolling ii, four (ji, k) pairs remain; "ji k #2" must swap the third one
    tiled = tile(sgemm(), 4, 8)
    out = apply(tiled, Rewrite.make(RewriteKind.UNROLL, "ii #0"))
    targets = [r.target for r in of_kind(out, RewriteKind.REORDER)]
    assert targets == ["io jo", "ji k"]  # the copies share the first copy's proposals
    swapped = apply(out, Rewrite.make(RewriteKind.REORDER, "ji k #2"))
    assert [n for n, _ in order(swapped)] == ["io", "jo", "ji", "k", "ji", "k", "k", "ji", "ji", "k"]


def test_copies_of_a_loop_share_one_set_of_proposals():
    proc = build_proc(load_workload(MATMUL, "sgemm", {"M": 4, "N": 16, "K": 16}))
    before = [r for r in of_kind(proc, RewriteKind.SPLIT) if r.target.startswith("j")]
    unrolled = apply(proc, Rewrite.make(RewriteKind.UNROLL, "i #0"))
    assert len(unrolled.find_loop("j", many=True)) == 4  # four copies of the j loop
    after = [r for r in of_kind(unrolled, RewriteKind.SPLIT) if r.target.startswith("j")]
    assert before and len(after) == len(before)
