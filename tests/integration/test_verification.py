"""The verification's tolerance from both sides, and no false rejections.

The tolerance of each float element is ``scale * u * mag + rtol * |ref|`` (see
``evaluate.verification``): an error just beyond it fails and one half of it passes,
wherever the element's tolerance comes from; reordering a long f32 sum passes with a wide
margin; every committed schedule and every first step of every example kernel verifies
``ok``, none using more than a small share of its tolerance.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from exo.stdlib.scheduling import reorder_loops

from schedsearch.core import BenchConfig, Candidate, ExpandOptions, Status
from schedsearch.evaluate import cpu_flags, evaluate_candidate
from schedsearch.evaluate.verification import terms_per_element
from schedsearch.schedule_file import read_schedule_file
from schedsearch.targets import target
from schedsearch.transforms import (
    Expander,
    build_proc,
    fingerprint,
    kernel_c,
    load_workload,
    proc_text,
    root_candidate,
)
from tests.conftest import EXAMPLES, REPO
from tests.integration.answer_keys import appended, from_c, key_file, read_key, report_of, tolerance

CONFIG = BenchConfig(warmup_seconds=0.001, min_sample_seconds=0.001, samples=1, run_timeout=30.0)
SGEMM = load_workload(EXAMPLES / "matmul.py", "sgemm", {"M": 64, "N": 64, "K": 64})
#: Real candidates use at most this share of their tolerance (measured: 0.04 at most over
#: some 1300 candidates of every example kernel, 0.017 for the committed schedules).
MARGIN = 0.1


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("verification")


def test_the_answer_key_bounds_every_element_and_scales_with_the_sum(cache: Path) -> None:
    sets = read_key(SGEMM, root_candidate(SGEMM), CONFIG, cache)
    assert len(sets) == 2 and not np.array_equal(sets[0]["A"], sets[1]["A"])  # two different input sets
    for arrays in sets:
        a, b, c0 = (arrays[n].astype(np.float64) for n in ("A", "B", "C"))
        assert np.all(np.abs(a) < 1) and np.all(np.abs(a) >= 1 / 64) and (a < 0).any() and (a > 0).any()
        assert len(np.unique(np.floor(np.log2(np.abs(a))))) == 6  # six binades of magnitudes
        np.testing.assert_allclose(arrays["C.ref"], c0 + a @ b, rtol=0, atol=1e-5)
        # mag is the sum of the terms' magnitudes, the quantity summation error is bounded by
        np.testing.assert_allclose(arrays["C.mag"], np.abs(c0) + np.abs(a) @ np.abs(b), rtol=1e-6)
        tol = tolerance(SGEMM, arrays, "C", CONFIG)
        atol = tol - CONFIG.rtol * np.abs(arrays["C.ref"])
        # 64 terms of magnitude up to 1: a few 1e-5, far below the 1e-2 the whole-output test allowed
        assert terms_per_element(SGEMM) == 64 and 1e-5 < np.median(atol) < 1e-4


def test_the_memory_check_counts_what_the_driver_holds(cache: Path) -> None:
    from schedsearch.evaluate import memory_needed
    from schedsearch.evaluate.harness import GUARD_BYTES

    key = key_file(SGEMM, root_candidate(SGEMM), CONFIG, cache)
    header = (key.read_bytes().index(b"\n") + 1 + 63) // 64 * 64
    buffers = sum(a.nbytes + 2 * GUARD_BYTES for a in SGEMM.args)
    assert memory_needed(SGEMM.args) == buffers + key.stat().st_size - header


@pytest.mark.parametrize("where", ["smallest", "largest"])
def test_an_error_just_beyond_an_elements_tolerance_fails_and_half_of_it_passes(cache: Path, where: str) -> None:
    """At the element whose tolerance is most its absolute part (the smallest result) and
    at the one where it is most its relative part (the largest)."""
    root = root_candidate(SGEMM)
    first, second = read_key(SGEMM, root, CONFIG, cache)
    ref = np.abs(first["C.ref"]).ravel()
    e = int(np.argmin(ref) if where == "smallest" else np.argmax(ref))
    tol = [tolerance(SGEMM, s, "C", CONFIG).ravel()[e] for s in (first, second)]
    base = from_c(kernel_c(reorder_loops(build_proc(SGEMM), "j k")))
    beyond = appended(base, f"C[{e}] += {1.5 * tol[0]:.9e}f;")
    report, _ = report_of(SGEMM, root, beyond, CONFIG, cache)
    v = report.verdict
    assert v is not None and not v.ok and v.index == e and v.input_set == 0
    assert v.tolerance == pytest.approx(tol[0], rel=1e-6)
    within = appended(base, f"C[{e}] += {0.5 * min(tol):.9e}f;")
    assert evaluate_candidate(SGEMM, root, within, CONFIG, cache).status is Status.OK


def test_a_long_f32_sum_in_another_order_passes_and_a_two_tenths_percent_change_fails(cache: Path,
                                                                                       tmp_path: Path) -> None:
    """Rows of 1024 terms (the longest sums of the examples: gemv, matvec) summed in eight
    interleaved partial sums, as a vector schedule adds them, against the reference's one
    running sum. A change of 0.2% is caught where the result is not small beside its
    terms' magnitudes (below about 0.5 * mag / sqrt(n) the rounding of a sum in another
    order may be as large as that)."""
    src = tmp_path / "dot.py"
    src.write_text("from __future__ import annotations\nfrom exo import *\n\n\n@proc\n"
                   "def dot_rows(M: size, N: size, A: f32[M, N], x: f32[N], y: f32[M]):\n"
                   "    for i in seq(0, M):\n        for j in seq(0, N):\n            y[i] += A[i, j] * x[j]\n")
    w = load_workload(src, "dot_rows", {"M": 32, "N": 1024})
    root = root_candidate(w)
    c = root.c_source
    head = c[: c.index("{", c.rindex("void schedsearch_kernel(")) + 1]
    partial = from_c(head + """
for (int_fast32_t i = 0; i < 32; i++) {
  float s[8] = {0};
  for (int_fast32_t j = 0; j < 1024; j += 8)
    for (int_fast32_t l = 0; l < 8; l++) s[l] += A[i * 1024 + j + l] * x[j + l];
  y[i] += ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}
}
""")
    report, out = report_of(w, root, partial, CONFIG, cache)
    assert report.verdict is not None and report.verdict.ok, out
    assert 0 < report.verdict.max_error and report.verdict.worst < MARGIN, out
    first = read_key(w, root, CONFIG, cache)[0]
    e = int(np.argmax(np.abs(first["y.ref"]) / first["y.mag"]))
    moved = evaluate_candidate(w, root, appended(partial, f"y[{e}] *= 1.002f;"), CONFIG, cache)
    assert moved.status is Status.WRONG_RESULT and f"y[{e}] is" in moved.error, moved.error


def test_a_kernel_that_subtracts_is_checked_against_its_largest_magnitude(cache: Path, tmp_path: Path) -> None:
    """|a| - |b| bounds nothing: the driver sees it and checks the whole output against its
    largest magnitude, as before, so a reordered difference of sums still passes."""
    src = tmp_path / "diff.py"
    src.write_text("from __future__ import annotations\nfrom exo import *\n\n\n@proc\n"
                   "def diff(M: size, N: size, A: f32[M, N], B: f32[M, N], y: f32[M]):\n"
                   "    for i in seq(0, M):\n        for j in seq(0, N):\n            y[i] += A[i, j] - B[i, j]\n")
    w = load_workload(src, "diff", {"M": 16, "N": 512})
    root = root_candidate(w)
    c = root.c_source
    head = c[: c.index("{", c.rindex("void schedsearch_kernel(")) + 1]
    split = from_c(head + """
for (int_fast32_t i = 0; i < 16; i++) {
  float p = 0.0f, q = 0.0f;
  for (int_fast32_t j = 0; j < 512; j++) { p += A[i * 512 + j]; q += B[i * 512 + j]; }
  y[i] += p - q;
}
}
""")
    report, out = report_of(w, root, split, CONFIG, cache)
    assert "tolerance y global" in out and report.verdict is not None and report.verdict.ok, out
    assert evaluate_candidate(w, root, appended(split, "y[3] += 0.5f;"), CONFIG, cache).status is Status.WRONG_RESULT


def _committed() -> list[Path]:
    return sorted((REPO / "schedules").glob("*.json"))


@pytest.mark.parametrize("path", _committed(), ids=[p.stem for p in _committed()])
def test_every_committed_schedule_verifies_with_a_wide_margin(cache: Path, path: Path) -> None:
    sf = read_schedule_file(path)
    needed = target(sf.needs_target)
    if not needed.supported_by(cpu_flags()):
        pytest.skip(f"this CPU lacks {needed.name}")
    w = load_workload(EXAMPLES / Path(sf.workload_file).name, sf.proc, dict(sf.sizes))
    p = build_proc(w, sf.schedule)
    c = kernel_c(p)
    cand = Candidate(sf.schedule, c, fingerprint(c), proc_text(p), None, len(sf.schedule))
    report, out = report_of(w, root_candidate(w), cand, CONFIG, cache)
    assert report.verdict is not None and report.verdict.ok, out
    assert report.verdict.worst < MARGIN, out
    assert all(line.endswith("elementwise") for line in out.splitlines() if line.startswith("tolerance"))


#: Every proc of ``examples/`` at sizes small enough to build each first step in seconds.
EXAMPLE_PROCS = [
    ("matmul.py", "sgemm", {"M": 48, "N": 40, "K": 64}), ("matmul.py", "matmul_i8", {}),
    ("imatmul.py", "imatmul", {"M": 24, "N": 40, "K": 200}),
    ("blur.py", "blur2", {"H": 40, "W": 36}), ("blur.py", "blur2_local", {"H": 40, "W": 36}),
    ("conv1d.py", "conv1d", {"N": 256, "R": 16}), ("conv1d_mc.py", "conv1d_mc", {"C": 16, "O": 16, "N": 64, "R": 5}),
    *[("gemv.py", n, {"M": 96, "N": 200}) for n in ("gemv", "gemv_t", "dgemv", "dgemv_t")],
    ("matvec.py", "matvec", {"M": 96, "N": 1000}),
    ("kernels.py", "matmul_init", {"M": 50, "N": 50, "K": 300}), ("kernels.py", "matmul_aat", {"M": 48, "K": 256}),
    ("kernels.py", "bmm", {"Bt": 4, "M": 24, "N": 24, "K": 48}),
    ("kernels.py", "conv2d", {"Co": 16, "Ci": 16, "H": 10, "W": 10}),
    ("kernels.py", "matmul_chain", {"M": 32, "N": 64, "K": 64, "L": 32}),
    ("kernels.py", "matmul_relu", {"M": 48, "N": 48, "K": 256}),
]


@pytest.mark.slow
@pytest.mark.parametrize("file, name, sizes", EXAMPLE_PROCS, ids=[n for _, n, _ in EXAMPLE_PROCS])
def test_every_first_step_of_every_example_kernel_verifies(cache: Path, file: str, name: str, sizes: dict) -> None:
    """No false rejection: the unscheduled proc and each of its children (every rewrite
    the search proposes first, vector kernels for this CPU's widest target included)."""
    w = load_workload(EXAMPLES / file, name, sizes)
    root = root_candidate(w)
    widest = next(t for t in ("avx512", "avx2", "scalar") if target(t).supported_by(cpu_flags()))
    children = Expander(w, ExpandOptions(target=widest)).expand(root).children
    assert children
    for cand in [root, *children]:
        report, out = report_of(w, root, cand, CONFIG, cache)
        step = cand.schedule.steps[-1].describe() if cand.schedule.steps else "root"
        assert report.verdict is not None and report.verdict.ok, (step, out)
        assert report.verdict.worst < MARGIN, (step, out)
        assert not re.search(r"^tolerance \w+ global$", out, re.M), (step, out)  # all sums of products
