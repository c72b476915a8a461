"""simd_kernel candidates through real gcc: every shape, with and without a row tail and a
packed panel, computes the same C as the unscheduled proc."""

from __future__ import annotations

from pathlib import Path

import pytest

from schedsearch.core import BenchConfig, ExpandOptions, RewriteKind, Status
from schedsearch.evaluate import cpu_isa, evaluate_candidate
from schedsearch.transforms import Expander, load_workload, root_candidate

MATMUL = Path(__file__).resolve().parents[2] / "examples" / "matmul.py"
CONFIG = BenchConfig(samples=3, min_sample_seconds=0.001, warmup_seconds=0.0)
#: What a candidate must come out as: on a CPU without AVX2 + FMA the instructions fault or
#: fail to build, and the search records that instead of stopping.
EXPECTED = {Status.OK} if "avx2" in cpu_isa() else {Status.RUN_ERROR, Status.BUILD_ERROR}


@pytest.fixture(scope="module")
def family():
    """Root, its simd children, and the packed children of the 6x16 kernel (M=20: tails)."""
    workload = load_workload(MATMUL, "sgemm", {"M": 20, "N": 32, "K": 24})
    expander = Expander(workload, ExpandOptions(isa=("avx2",)))
    root = root_candidate(workload)
    simd = [c for c in expander.expand(root).children if c.schedule.steps[-1].kind is RewriteKind.SIMD_KERNEL]
    six = next(c for c in simd if c.schedule.steps[-1].arg("rows") == 6 and c.schedule.steps[-1].arg("order") == "cols")
    packed = [c for c in expander.expand(six).children if c.schedule.steps[-1].kind is RewriteKind.PACK]
    return workload, root, simd, packed


def test_every_simd_kernel_and_packed_kernel_matches_the_reference(family, tmp_path):
    workload, root, simd, packed = family
    assert len(simd) == 8 and len(packed) >= 1
    for candidate in simd + packed:
        result = evaluate_candidate(workload, root, candidate, CONFIG, tmp_path)
        assert result.status in EXPECTED, (candidate.schedule.steps[-1].describe(), result.error)
        if result.status is Status.OK:
            assert result.max_error is not None and result.max_error <= 1e-3
