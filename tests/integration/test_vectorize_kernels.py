"""vectorize candidates through real gcc, for AVX2 and AVX-512: every proposal on matvec,
conv1d, blur, elementwise and f64 kernels applies, uses the target's intrinsics and computes
what the unscheduled proc computes, with sizes that divide the lanes and sizes that leave
cut or masked tails."""

from __future__ import annotations

from pathlib import Path

import pytest

from schedsearch.core import BenchConfig, Candidate, ExpandOptions, Rewrite, RewriteKind, Schedule, Status
from schedsearch.evaluate import cpu_flags, evaluate_candidate
from schedsearch.targets import target
from schedsearch.transforms import (
    build_proc,
    fingerprint,
    kernel_c,
    load_workload,
    proc_text,
    propose,
    root_candidate,
    try_apply,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
KERNELS = ROOT / "tests" / "data" / "workloads" / "vector_kernels.py"
CONFIG = BenchConfig(samples=3, min_sample_seconds=0.001, warmup_seconds=0.0)
PREFIX = {"avx512": "_mm512_", "avx2": "_mm256_"}

#: (file, proc, sizes): one that divides the lanes of both targets, one that leaves tails.
CASES = [
    (EXAMPLES / "matvec.py", "matvec", {"M": 3, "N": 64}),
    (EXAMPLES / "matvec.py", "matvec", {"M": 3, "N": 45}),
    (EXAMPLES / "conv1d.py", "conv1d", {"N": 32, "R": 16}),
    (EXAMPLES / "conv1d.py", "conv1d", {"N": 37, "R": 5}),
    (EXAMPLES / "blur.py", "blur2", {"H": 2, "W": 16}),
    (EXAMPLES / "blur.py", "blur2", {"H": 2, "W": 21}),
    (KERNELS, "vadd", {"N": 32}),
    (KERNELS, "vadd", {"N": 37}),
    (KERNELS, "axpy", {"N": 37}),
    (KERNELS, "affine2d", {"M": 3, "N": 21}),
    (KERNELS, "dmatvec", {"M": 3, "N": 16}),
    (KERNELS, "dmatvec", {"M": 3, "N": 19}),
    (KERNELS, "dscale", {"N": 11}),
]

#: Proposals expected per case and target: (mode, tail) -> how many (accumulator counts
#: multiply a reduction's proposals, output vectors side by side those of conv1d's i loop).
#: AVX-512 in Exo 1.0.0 is f32 add/FMA only: a blur (a division), affine2d (a multiply, a
#: subtraction) and f64 kernels get AVX2's instructions on an AVX-512 target, as its CPUs
#: run them too (``AVX2_ON_AVX512``).
AVX2 = [
    {("reduce", "perfect"): 4}, {("reduce", "cut"): 3},
    {("map", "perfect"): 3, ("reduce", "perfect"): 2}, {("map", "cut"): 3},
    {("map", "perfect"): 2}, {("map", "cut"): 2, ("map", "masked"): 2},
    {("map", "perfect"): 1}, {("map", "cut"): 1, ("map", "masked"): 1}, {("map", "cut"): 1},
    {("map", "cut"): 1, ("map", "masked"): 1},
    {("reduce", "perfect"): 3}, {("reduce", "cut"): 3}, {("map", "cut"): 1},
]
AVX2_ON_AVX512 = {4, 5, 9, 10, 11, 12}
EXPECTED = {
    "avx512": [
        {("reduce", "perfect"): 3}, {("reduce", "cut"): 2},
        {("map", "perfect"): 2, ("reduce", "perfect"): 1}, {("map", "cut"): 2, ("map", "masked"): 1},
        AVX2[4], AVX2[5],
        {("map", "perfect"): 1}, {("map", "cut"): 1, ("map", "masked"): 1}, {("map", "cut"): 1, ("map", "masked"): 1},
        AVX2[9], AVX2[10], AVX2[11], AVX2[12],
    ],
    "avx2": AVX2,
}


def child(workload, root: Candidate, step: Rewrite) -> Candidate:
    """``root`` with ``step`` applied, as the expander would make it (only this step tried)."""
    proc = try_apply(build_proc(workload), step)
    assert proc is not None, step.describe()
    c_source = kernel_c(proc)
    schedule = Schedule((step,))
    return Candidate(schedule=schedule, c_source=c_source, fingerprint=fingerprint(c_source),
                     proc_text=proc_text(proc), parent=root.fingerprint, depth=1)


def expected_status(name: str) -> set[Status]:
    """On a CPU without the instruction set a candidate uses (its step's ``isa``, which is
    AVX2 for the kernels an AVX-512 target writes in AVX2) it faults or fails to build, and
    the search records that instead of stopping."""
    return {Status.OK} if target(name).supported_by(cpu_flags()) else {Status.RUN_ERROR, Status.BUILD_ERROR}


@pytest.mark.slow
@pytest.mark.parametrize("isa", ["avx512", "avx2"])
@pytest.mark.parametrize("case", range(len(CASES)), ids=[f"{p}-{'-'.join(map(str, s.values()))}" for _, p, s in CASES])
def test_every_vectorize_proposal_applies_and_matches_the_reference(isa, case, tmp_path):
    path, proc, sizes = CASES[case]
    workload = load_workload(path, proc, sizes)
    options = ExpandOptions(target=isa)
    proposals = [r for r in propose(build_proc(workload), options) if r.kind is RewriteKind.VECTORIZE]
    counts: dict[tuple[str, str], int] = {}
    for r in proposals:
        key = (str(r.arg("mode")), str(r.arg("tail")))
        counts[key] = counts.get(key, 0) + 1
    assert counts == EXPECTED[isa][case]
    homes = {str(r.arg("isa")) for r in proposals}
    assert homes == ({"avx2"} if isa == "avx2" or case in AVX2_ON_AVX512 else {"avx512"})
    root = root_candidate(workload)
    for step in proposals:
        candidate = child(workload, root, step)  # every proposal applies
        body = candidate.c_source.rsplit("schedsearch_kernel(", 1)[1]
        assert PREFIX[str(step.arg("isa"))] in body, step.describe()
        if step.arg("tail") == "masked":
            assert "mask" in body, step.describe()
        result = evaluate_candidate(workload, root, candidate, CONFIG, tmp_path)
        assert result.status in expected_status(str(step.arg("isa"))), (step.describe(), result.error)
        if result.status is Status.OK:
            assert result.max_error is not None and result.max_error <= 1e-4, step.describe()
