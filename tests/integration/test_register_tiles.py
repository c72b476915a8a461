"""register_tile candidates through real gcc, for every vector target: every shape, with and
without a row tail and a packed panel, computes the same C as the unscheduled proc."""

from __future__ import annotations

from pathlib import Path

import pytest

from schedsearch.core import BenchConfig, ExpandOptions, RewriteKind, Status
from schedsearch.evaluate import cpu_flags, evaluate_candidate
from schedsearch.targets import target
from schedsearch.transforms import Expander, load_workload, root_candidate

MATMUL = Path(__file__).resolve().parents[2] / "examples" / "matmul.py"
CONFIG = BenchConfig(samples=3, min_sample_seconds=0.001, warmup_seconds=0.0)


def expected(name: str) -> set[Status]:
    """What a candidate must come out as: on a CPU without the target's instructions they
    fault or fail to build, and the search records that instead of stopping."""
    return {Status.OK} if target(name).supported_by(cpu_flags()) else {Status.RUN_ERROR, Status.BUILD_ERROR}


@pytest.fixture(scope="module", params=["avx2", "avx512"])
def family(request):
    """Root, its register-tile children, and the packed children of the 6-row kernel (M=20: tails)."""
    workload = load_workload(MATMUL, "sgemm", {"M": 20, "N": 64, "K": 24})
    expander = Expander(workload, ExpandOptions(target=request.param))
    root = root_candidate(workload)
    tiles = [c for c in expander.expand(root).children if c.schedule.steps[-1].kind is RewriteKind.REGISTER_TILE]
    six = next(c for c in tiles if c.schedule.steps[-1].arg("rows") == 6 and c.schedule.steps[-1].arg("order") == "cols")
    packed = [c for c in expander.expand(six).children if c.schedule.steps[-1].kind is RewriteKind.PACK]
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
