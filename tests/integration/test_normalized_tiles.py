"""Kernels written the plain way reach a register tile in one step: init and epilogue
statements split off (``fission``), one pair of loops swapped, columns that no tile divides
covered by a narrower kernel and a plain nest. Real Exo decides legality; real gcc builds
every candidate, which must compute what the unscheduled proc computes."""

from __future__ import annotations

from pathlib import Path

import pytest

from schedsearch.core import BenchConfig, ExpandOptions, Rewrite, RewriteKind, Schedule, Status
from schedsearch.evaluate import evaluate_candidate
from schedsearch.transforms import Expander, load_workload, propose, root_candidate, schedule_script
from schedsearch.transforms.rules import describe

KERNELS = Path(__file__).resolve().parents[2] / "examples" / "kernels.py"
CONFIG = BenchConfig(samples=3, min_sample_seconds=0.001, warmup_seconds=0.0)


def tiles(expander: Expander, schedule: Schedule = Schedule()) -> list[Rewrite]:
    proc = expander.proc_for(schedule)
    return [r for r in propose(proc, expander.options) if r.kind is RewriteKind.REGISTER_TILE]


def verified(expander: Expander, schedule: Schedule, tmp_path: Path):
    workload = expander.workload
    candidate = expander.candidate(schedule)
    result = evaluate_candidate(workload, root_candidate(workload), candidate, CONFIG, tmp_path)
    assert result.status is Status.OK, (describe(schedule.steps[-1]), result.error)
    assert result.max_error is not None and result.max_error <= 1e-3
    return candidate


def test_fission_splits_an_init_statement_from_its_reduction() -> None:
    expander = Expander(load_workload(KERNELS, "matmul_init", {"M": 8, "N": 16, "K": 4}),
                        ExpandOptions(target="avx512"))
    steps = [r for r in propose(expander.proc_for(Schedule()), expander.options) if r.kind is RewriteKind.FISSION]
    assert {(r.target, r.arg("before"), r.arg("lifts")) for r in steps} == {("k #0", True, 1), ("k #0", True, 2)}
    whole = next(r for r in steps if r.arg("lifts") == 2)
    text = expander.candidate(Schedule((whole,))).proc_text
    # two nests: the zeroing one, then the perfect reduction nest
    assert text.count("for i in seq(0, 8)") == 2 and text.index("= 0.0") < text.index("+=")


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
@pytest.mark.parametrize(
    "proc,sizes,prep",
    [
        # 44 columns: whole tiles, a narrower kernel and 4 columns below one AVX2 vector
        ("matmul_init", {"M": 13, "N": 44, "K": 5}, {"fission_before"}),
        ("matmul_relu", {"M": 7, "N": 40, "K": 3}, {"fission_before", "fission_after"}),
        ("conv2d", {"Co": 9, "Ci": 2, "H": 3, "W": 20}, {"fission_before", "swap"}),
        ("bmm", {"Bt": 2, "M": 7, "N": 40, "K": 3}, {"fission_before"}),
        ("matmul_chain", {"M": 8, "N": 16, "K": 3, "L": 32}, {"fission_before"}),
        # the second A is not contiguous along the columns: it is copied into a panel first
        ("matmul_aat", {"M": 21, "K": 3}, {"fission_before", "panel"}),
    ],
)
def test_plain_kernels_get_register_tiles_that_compute_the_same(proc, sizes, prep, isa, tmp_path) -> None:
    expander = Expander(load_workload(KERNELS, proc, sizes), ExpandOptions(target=isa))
    found = tiles(expander)
    assert found, f"no register tile proposed for {proc}"
    for step in found[:4]:
        assert {k for k, _ in step.args} >= prep, describe(step)
        assert step.arg("isa") == isa
        candidate = verified(expander, Schedule((step,)), tmp_path)
        assert ("_mm512_fmadd_ps" if isa == "avx512" else "_mm256_fmadd_ps") in candidate.c_source
    # the schedule exports as plain Exo calls, normalizing steps included
    script = schedule_script(expander.workload, Schedule((found[0],)))
    assert "fission(" in script and "replace_in(" in script


def test_column_tails_use_a_narrower_kernel_and_a_masked_vector(tmp_path) -> None:
    expander = Expander(load_workload(KERNELS, "matmul_init", {"M": 6, "N": 60, "K": 3}),
                        ExpandOptions(target="avx512"))
    step = next(r for r in tiles(expander) if r.arg("cols") == 32)
    assert step.arg("ctrip") == 60 and step.arg("mask_names")
    candidate = verified(expander, Schedule((step,)), tmp_path)
    # 32 columns in 16-lane vectors, then 24 in three of AVX2's 8 lanes, then the last 4
    # in one AVX-512 vector masked to 4 lanes: no column is left to a plain loop
    assert "_mm512_fmadd_ps" in candidate.c_source and "_mm256_fmadd_ps" in candidate.c_source
    assert "_mm512_mask_fmadd_ps" in candidate.c_source and "_mm512_maskz_loadu_ps" in candidate.c_source
    assert "C[i, 56 + j] +=" not in candidate.proc_text
    # a step without mask names (a schedule file from before masks) keeps those 4 plain
    plain = Rewrite(step.kind, step.target, tuple((k, v) for k, v in step.args if k != "mask_names"))
    old = verified(expander, Schedule((plain,)), tmp_path)
    assert "_mm512_mask_fmadd_ps" not in old.c_source and "C[i, 56 + j] +=" in old.proc_text


def test_without_masks_the_last_columns_stay_a_plain_nest(tmp_path) -> None:
    expander = Expander(load_workload(KERNELS, "matmul_init", {"M": 6, "N": 20, "K": 3}),
                        ExpandOptions(target="avx2"))
    step = next(r for r in tiles(expander) if r.arg("ctrip") == 20)
    assert step.arg("mask_names") is None  # AVX2 has no masked FMA
    candidate = verified(expander, Schedule((step,)), tmp_path)
    assert "_mm256_fmadd_ps" in candidate.c_source and "mask" not in candidate.c_source


def test_the_second_product_of_a_chain_is_tiled_in_the_next_step(tmp_path) -> None:
    expander = Expander(load_workload(KERNELS, "matmul_chain", {"M": 8, "N": 16, "K": 3, "L": 32}),
                        ExpandOptions(target="avx512"))
    first = tiles(expander)
    assert {r.arg("out") for r in first} == {"tmp", "D"}
    step = next(r for r in first if r.arg("out") == "tmp")
    then = next(r for r in tiles(expander, Schedule((step,))) if r.arg("out") == "D")
    candidate = verified(expander, Schedule((step, then)), tmp_path)
    assert candidate.c_source.count("_mm512_fmadd_ps") > 1


def test_a_transposed_operand_is_copied_into_a_panel_the_tile_streams(tmp_path) -> None:
    expander = Expander(load_workload(KERNELS, "matmul_aat", {"M": 40, "K": 5}), ExpandOptions(target="avx512"))
    step = next(r for r in tiles(expander) if r.arg("panel") is not None)
    assert (step.arg("panel_side"), step.arg("panel_dims"), step.arg("vec")) == ("rhs", "k 5 j 40", "A_panel")
    candidate = verified(expander, Schedule((step,)), tmp_path)
    # one copy before the product, reduction index first; the kernel loads rows of the panel
    assert "A_panel : f32[5, 40]" in candidate.proc_text
    assert "A_panel[k, j] = A[j, k]" in candidate.proc_text
    assert "mm512_loadu_ps(A_panel_vec" in candidate.proc_text
    script = schedule_script(expander.workload, Schedule((step,)))
    assert "bind_expr(" in script and "remove_loop(" in script
    assert step.arg("panel_block") is None  # 5 rows of the panel: no block divides them


def test_a_transposing_copy_is_done_in_square_blocks(tmp_path, monkeypatch) -> None:
    from schedsearch.transforms.rules import layout

    expander = Expander(load_workload(KERNELS, "matmul_aat", {"M": 40, "K": 16}), ExpandOptions(target="avx512"))
    step = next(r for r in tiles(expander) if r.arg("panel") is not None)
    assert step.arg("panel_block") == 8 and len(step.arg("panel_loops").split()) == 4
    candidate = verified(expander, Schedule((step,)), tmp_path)
    jo, ji, ko, ki = step.arg("panel_loops").split()
    # 5 x 2 blocks of 8 x 8, each copied row by row of the source
    assert f"for {jo} in seq(0, 5):\n    for {ko} in seq(0, 2):" in candidate.proc_text
    assert f"A_panel[{ki} + 8 * {ko}, {ji} + 8 * {jo}] = A[{ji} + 8 * {jo}, {ki} + 8 * {ko}]" in candidate.proc_text
    assert "divide_loop(" in schedule_script(expander.workload, Schedule((step,)))
    # a step without blocks (a schedule file from before them) replays the copy row by row
    monkeypatch.setattr(layout, "PANEL_BLOCKS", ())
    old = next(r for r in tiles(expander) if r.arg("panel") is not None)
    assert {k for k, _ in old.args}.isdisjoint({"panel_block", "panel_loops"})
    monkeypatch.undo()
    assert "A_panel[k, j] = A[j, k]" in verified(expander, Schedule((old,)), tmp_path).proc_text
    half = Rewrite(step.kind, step.target, tuple((k, v) for k, v in step.args if k != "panel_loops"))
    from schedsearch.errors import ReplayError

    with pytest.raises(ReplayError, match="go together"):
        expander.candidate(Schedule((half,)))


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_a_long_reduction_is_also_offered_in_blocks(isa, tmp_path) -> None:
    matmul = KERNELS.parent / "matmul.py"
    expander = Expander(load_workload(matmul, "sgemm", {"M": 12, "N": 64, "K": 1024}), ExpandOptions(target=isa))
    found = tiles(expander)
    blocked = [r for r in found if r.arg("red_block") is not None]
    # every tile comes both ways: the whole reduction per tile, and blocks of 512 terms
    assert blocked and len(blocked) * 2 == len(found)
    step = blocked[0]
    assert (step.arg("red_block"), step.arg("red_block_factor"), step.arg("red_block_levels")) == ("k #0", 512, 2)
    candidate = verified(expander, Schedule((step,)), tmp_path)
    ko, ki = step.arg("red_block_names").split()
    # the blocks' loop is outermost: each block of k runs over the whole output
    loops = [line.strip() for line in candidate.proc_text.splitlines() if line.strip().startswith("for ")]
    assert loops[0] == f"for {ko} in seq(0, 2):"
    assert "divide_loop(" in schedule_script(expander.workload, Schedule((step,)))
    # and a tile's streamed panel is then small enough to pack
    packs = [r for r in propose(expander.proc_for(Schedule((step,))), expander.options) if r.kind is RewriteKind.PACK]
    assert any(r.arg("buffer") == "B" and f"512 * {ko}" in r.arg("window") for r in packs)
    half = Rewrite(step.kind, step.target, tuple((k, v) for k, v in step.args if k != "red_block_levels"))
    from schedsearch.errors import ReplayError

    with pytest.raises(ReplayError, match="go together"):
        expander.candidate(Schedule((half,)))


def test_a_short_reduction_is_not_blocked() -> None:
    matmul = KERNELS.parent / "matmul.py"
    expander = Expander(load_workload(matmul, "sgemm", {"M": 12, "N": 64, "K": 512}), ExpandOptions(target="avx512"))
    assert all(r.arg("red_block") is None for r in tiles(expander))


def test_a_panel_needs_all_of_its_arguments() -> None:
    from schedsearch.errors import ReplayError

    expander = Expander(load_workload(KERNELS, "matmul_aat", {"M": 40, "K": 5}), ExpandOptions(target="avx512"))
    step = next(r for r in tiles(expander) if r.arg("panel") is not None)
    broken = Rewrite(step.kind, step.target, tuple((k, v) for k, v in step.args if k != "panel_dims"))
    with pytest.raises(ReplayError, match="go together"):
        expander.candidate(Schedule((broken,)))
    bad = Rewrite(step.kind, step.target, tuple((k, "k five" if k == "panel_dims" else v) for k, v in step.args))
    with pytest.raises(ReplayError, match="pairs of a loop variable and an extent"):
        expander.candidate(Schedule((bad,)))


#: Small sizes of every kernel class, with row and column tails where the lanes allow.
SEARCHED = {
    "matmul_init": {"M": 24, "N": 36, "K": 8},
    "matmul_aat": {"M": 20, "K": 8},
    "bmm": {"Bt": 2, "M": 12, "N": 32, "K": 8},
    "conv2d": {"Co": 8, "Ci": 2, "H": 3, "W": 20},
    "matmul_chain": {"M": 24, "N": 32, "K": 16, "L": 64},
    "matmul_relu": {"M": 12, "N": 40, "K": 8},
}


@pytest.mark.slow
@pytest.mark.parametrize("proc", list(SEARCHED))
def test_a_search_of_each_kernel_class_reaches_a_register_tile(proc, tmp_path) -> None:
    """A whole search with the defaults (its target this machine's), a few candidates: it
    measures a register tile within three steps that verifies, and its best is faster than
    the kernel as written. (At these sizes a kernel takes nanoseconds and a staged one can tie
    with the tile, so which of them wins is the machine's noise, not the search's reach.)"""
    import schedsearch
    from schedsearch.store import open_store

    db = tmp_path / "t.db"
    result = schedsearch.tune(str(KERNELS), SEARCHED[proc], proc=proc, db=str(db),
                              max_candidates=8, budget=240, workers=0, seed=0)
    assert result.status.value == "completed" and 1 <= len(result.schedule.steps) <= 3
    assert result.speedup is not None and result.speedup > 1.0, result.speedup
    store = open_store(str(db), read_only=True)
    try:
        measured = [r for r in store.candidates(result.search_id) if r.status is Status.OK]
    finally:
        store.close()
    tiles = [r for r in measured if len(r.schedule.steps) <= 3
             and any(s.kind is RewriteKind.REGISTER_TILE for s in r.schedule.steps)]
    assert tiles, [[describe(s) for s in r.schedule.steps] for r in measured]
    isa = next(s for s in tiles[0].schedule.steps if s.kind is RewriteKind.REGISTER_TILE).arg("isa")
    assert isa in ("avx2", "avx512", "neon")
