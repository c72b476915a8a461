"""register_tile candidates through real gcc, for every vector target: every shape, with and
without a row tail and a packed panel, computes the same C as the unscheduled proc."""

from __future__ import annotations

from pathlib import Path

import pytest

from schedsearch.core import BenchConfig, Candidate, ExpandOptions, RewriteKind, Schedule, Status
from schedsearch.evaluate import cpu_flags, evaluate_candidate
from schedsearch.targets import target
from schedsearch.transforms import (
    Expander, build_proc, fingerprint, kernel_c, load_workload, proc_text, propose, root_candidate,
)

MATMUL = Path(__file__).resolve().parents[2] / "examples" / "matmul.py"
CONFIG = BenchConfig(samples=3, min_sample_seconds=0.001, warmup_seconds=0.0)


def expected(name: str) -> set[Status]:
    """What a candidate must come out as: on a CPU without the target's instructions they
    fault or fail to build, and the search records that instead of stopping."""
    return {Status.OK} if target(name).supported_by(cpu_flags()) else {Status.RUN_ERROR, Status.BUILD_ERROR}


def children_of_kind(expander: Expander, parent: Candidate, kind: RewriteKind) -> list[Candidate]:
    """The children ``expander.expand(parent)`` would give by rewrites of ``kind`` (without
    applying every other proposal too, which is most of an expansion's time)."""
    proc = expander.proc_for(parent.schedule)
    children, seen = [], {parent.fingerprint}
    for rewrite in propose(proc, expander.options):
        if rewrite.kind is kind:
            child = expander.candidate(parent.schedule.then(rewrite), parent)
            if child.fingerprint not in seen:
                seen.add(child.fingerprint)
                children.append(child)
    return children


@pytest.fixture(scope="module", params=["avx2", "avx512"])
def family(request):
    """Root, its register-tile children, and the packed children of the 6-row kernel (M=20: tails)."""
    workload = load_workload(MATMUL, "sgemm", {"M": 20, "N": 64, "K": 24})
    expander = Expander(workload, ExpandOptions(target=request.param))
    root = root_candidate(workload)
    tiles = children_of_kind(expander, root, RewriteKind.REGISTER_TILE)
    six = next(c for c in tiles if c.schedule.steps[-1].arg("rows") == 6 and c.schedule.steps[-1].arg("order") == "cols")
    packed = children_of_kind(expander, six, RewriteKind.PACK)
    return request.param, workload, root, tiles, packed


def test_every_register_tile_and_packed_tile_matches_the_reference(family, tmp_path):
    name, workload, root, tiles, packed = family
    assert len(tiles) >= 4 and len(packed) >= 1
    assert all(c.schedule.steps[-1].arg("isa") == name for c in tiles)
    for candidate in tiles + packed:
        result = evaluate_candidate(workload, root, candidate, CONFIG, tmp_path)
        assert result.status in expected(name), (candidate.schedule.steps[-1].describe(), result.error)
        if result.status is Status.OK:
            assert result.max_error is not None and result.max_error <= 1e-3


REDUCTIONS = Path(__file__).resolve().parents[1] / "data" / "workloads" / "reductions.py"
CONV_MC = MATMUL.parent / "conv1d_mc.py"


@pytest.mark.parametrize(
    "path,proc,sizes,isa",
    [
        (REDUCTIONS, "bmm", {"B": 2, "M": 7, "N": 32, "K": 5}, "avx2"),
        (REDUCTIONS, "matmul_at", {"M": 13, "N": 64, "K": 6}, "avx512"),
        (REDUCTIONS.parent / "dgemm.py", "dgemm", {"M": 9, "N": 16, "K": 7}, "avx2"),
        (REDUCTIONS, "conv2d", {"C": 2, "O": 13, "H": 3, "W": 32}, "avx512"),
        (CONV_MC, "conv1d_mc", {"C": 3, "O": 14, "N": 64, "R": 5}, "avx512"),
        (CONV_MC, "conv1d_mc", {"C": 3, "O": 7, "N": 32, "R": 3}, "avx2"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_register_tiles_of_other_reduction_nests_match_the_reference(path, proc, sizes, isa, tmp_path):
    """Batched, transposed, f64, and convolutions (reductions over channels and taps), with row tails."""
    workload = load_workload(path, proc, sizes)
    root = root_candidate(workload)
    proc_ = build_proc(workload)
    steps = [r for r in propose(proc_, ExpandOptions(target=isa)) if r.kind is RewriteKind.REGISTER_TILE]
    assert len(steps) >= 4, [r.describe() for r in propose(proc_, ExpandOptions(target=isa))]
    # Every shape is covered on sgemm above: here the widest tile in both orders, and the
    # first one whose rows leave a cut tail.
    tail = next((r for r in steps if int(r.arg("trip")) % int(r.arg("rows"))), None)
    chosen = steps[:2] + ([tail] if tail is not None and tail not in steps[:2] else [])
    marker = {"avx2": "_mm256_fmadd_p", "avx512": "_mm512_fmadd_p"}[isa]
    for step in chosen:
        candidate = candidate_of(workload, Schedule((step,)))
        # the intrinsics of the target, not scalar code gcc might vectorise by itself
        assert marker in candidate.c_source
        result = evaluate_candidate(workload, root, candidate, CONFIG, tmp_path)
        assert result.status in expected(isa), (step.describe(), result.error)


def candidate_of(workload, schedule: Schedule) -> Candidate:
    proc = build_proc(workload, schedule)
    c = kernel_c(proc)
    return Candidate(schedule, c, fingerprint(c), proc_text(proc), None, len(schedule))
