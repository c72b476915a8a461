"""evaluate_candidate end to end with real gcc: statuses, numpy cross-checks, integer exactness."""

from __future__ import annotations

import contextlib
import os
import threading
import dataclasses
from pathlib import Path

import numpy as np
import pytest
from exo import proc
from exo.stdlib.scheduling import rename, reorder_loops

from schedsearch.core import (
    KERNEL_SYMBOL,
    ArgRole,
    ArgSpec,
    BenchConfig,
    Candidate,
    DType,
    Schedule,
    Status,
    Workload,
    sha256_text,
)
from schedsearch.errors import InfrastructureError, SearchError, ToolchainError
from schedsearch.evaluate import evaluate_candidate, remeasure, run_once
from schedsearch.evaluate.bench import bench_lock
from schedsearch.evaluate.harness import INPUT_SETS

N = 48  # not a power of two: catches index mix-ups that square powers of two hide


@proc
def sgemm(M: size, N: size, K: size, A: f32[M, K], B: f32[K, N], C: f32[M, N]):
    for i in seq(0, M):
        for j in seq(0, N):
            for k in seq(0, K):
                C[i, j] += A[i, k] * B[k, j]


@proc
def matmul_i8(A: i8[16, 16], B: i8[16, 16], C: i32[16, 16]):
    for i in seq(0, 16):
        for j in seq(0, 16):
            for k in seq(0, 16):
                a: i32
                b: i32
                a = A[i, k]
                b = B[k, j]
                C[i, j] += a * b


def candidate_from_c(c: str) -> Candidate:
    return Candidate(Schedule(), c, sha256_text(c), proc_text="")


def candidate_from_proc(p) -> Candidate:
    return candidate_from_c(rename(p, KERNEL_SYMBOL).c_code_str())


def workload(args: tuple[ArgSpec, ...], name: str = "k") -> Workload:
    return Workload("mem.py", "", "0" * 64, name, (), args)


SGEMM = workload(
    (
        ArgSpec("A", ArgRole.TENSOR, DType.F32, (N, N)),
        ArgSpec("B", ArgRole.TENSOR, DType.F32, (N, N)),
        ArgSpec("C", ArgRole.TENSOR, DType.F32, (N, N), output=True),
    ),
    "sgemm",
)
SIG = f"void {KERNEL_SYMBOL}(void *ctxt, const float *A, const float *B, float *C)"
FAST = BenchConfig(warmup_seconds=0.001, min_sample_seconds=0.001, samples=3, run_timeout=10.0)


@pytest.fixture(scope="module")
def ref() -> Candidate:
    return candidate_from_proc(sgemm.partial_eval(M=N, N=N, K=N))


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


def hand(body: str) -> Candidate:
    return candidate_from_c(f"#include <stdint.h>\n{SIG} {{\n{body}\n}}\n")


def test_exo_sgemm_matches_numpy(ref: Candidate, cache: Path) -> None:
    io = run_once(SGEMM, ref, FAST, cache)
    a = np.frombuffer(io.inputs["A"], np.float32).reshape(N, N)
    b = np.frombuffer(io.inputs["B"], np.float32).reshape(N, N)
    c0 = np.frombuffer(io.inputs["C"], np.float32).reshape(N, N)
    c1 = np.frombuffer(io.outputs["C"], np.float32).reshape(N, N)
    assert np.all(np.abs(a) <= 1.0) and np.all(c0 != 0) and len(np.unique(a)) > N
    expected = c0.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c1, expected, rtol=0, atol=1e-4)
    # The seed decides the inputs.
    other = run_once(SGEMM, ref, BenchConfig(seed=FAST.seed + 1), cache)
    assert other.inputs["A"] != io.inputs["A"]


def test_reference_and_reordered_candidate_are_ok(ref: Candidate, cache: Path) -> None:
    m_ref = evaluate_candidate(SGEMM, ref, ref, FAST, cache)
    assert m_ref.status is Status.OK, m_ref.error
    assert m_ref.max_error == 0.0
    cand = candidate_from_proc(reorder_loops(sgemm.partial_eval(M=N, N=N, K=N), "j k"))
    m = evaluate_candidate(SGEMM, ref, cand, FAST, cache)
    assert m.status is Status.OK, m.error
    assert m.fingerprint == cand.fingerprint
    t = m.timing
    assert t is not None and len(t.samples) == FAST.samples and t.inner >= 1
    assert 0 < t.min <= t.q1 <= t.median <= t.q3
    assert m.machine is not None and m.machine.compiler_version
    assert m.build_seconds > 0 and m.run_seconds > 0


def test_segfault_is_run_error(ref: Candidate, cache: Path) -> None:
    m = evaluate_candidate(SGEMM, ref, hand("*(volatile int *)0 = 1;"), FAST, cache)
    assert m.status is Status.RUN_ERROR
    assert "SIGSEGV" in m.error


def test_endless_loop_is_timeout_within_limit(ref: Candidate, cache: Path) -> None:
    cfg = BenchConfig(run_timeout=1.0, samples=3)
    evaluate_candidate(SGEMM, ref, ref, cfg, cache)  # reference outputs cached first
    m = evaluate_candidate(SGEMM, ref, hand("volatile int go = 1; while (go) {}"), cfg, cache)
    assert m.status is Status.TIMEOUT, m.error
    # The loop never ends: the run ended only because it was killed at the limit. Killing
    # and reaping take well under a second; the margin only absorbs a busy machine.
    assert cfg.run_timeout <= m.run_seconds < cfg.run_timeout + 10


def sleepy_matmul(prelude: str) -> Candidate:
    """The plain matmul, with ``prelude`` (C that may call ``nanosleep``) before it."""
    loops = "\n".join((
        f"    for (int i = 0; i < {N}; i++)",
        f"      for (int j = 0; j < {N}; j++)",
        f"        for (int k = 0; k < {N}; k++)",
        f"          C[i * {N} + j] += A[i * {N} + k] * B[k * {N} + j];",
    ))
    c = hand(f"    {prelude}\n{loops}").c_source
    return candidate_from_c(c.replace("#include <stdint.h>", "#define _POSIX_C_SOURCE 199309L\n#include <time.h>"))


def test_very_slow_kernel_stops_early_as_timeout(ref: Candidate, cache: Path) -> None:
    # 1.2 s per call: right answer, but timing it needs more than the 4 s limit allows
    # (the driver may spend half of it timing, and wants at least two calls).
    cfg = BenchConfig(run_timeout=4.0, samples=3)
    evaluate_candidate(SGEMM, ref, ref, cfg, cache)
    slow = sleepy_matmul("struct timespec ts = {1, 200000000};\n    nanosleep(&ts, 0);")
    m = evaluate_candidate(SGEMM, ref, slow, cfg, cache)
    # "too slow" comes only from the driver's own early stop, never from the kill.
    assert m.status is Status.TIMEOUT and "too slow" in m.error, m.error
    assert m.run_seconds < cfg.run_timeout  # it did not wait for the kill


def test_one_preempted_warm_up_call_does_not_decide_the_calls_per_sample(ref: Candidate, cache: Path) -> None:
    # The second warm-up call (after one verification call per input set) sleeps longer
    # than the whole warm-up: it is the last warm-up call. Timed by it, a sample would be
    # one call; the fastest warm-up call is the kernel's own time (~0.1 ms), and a sample is
    # many calls.
    cfg = BenchConfig(warmup_seconds=0.02, min_sample_seconds=0.005, samples=3, run_timeout=20.0)
    hiccup = sleepy_matmul("static int calls = 0;\n"
                           f"    if (++calls == {INPUT_SETS + 2}) {{ struct timespec ts = {{0, 60000000}}; nanosleep(&ts, 0); }}")
    m = evaluate_candidate(SGEMM, ref, hiccup, cfg, cache)
    assert m.status is Status.OK, m.error
    assert m.timing.inner >= 5 and m.timing.median < 0.01


def test_kernel_that_skips_its_work_is_wrong_result(ref: Candidate, cache: Path) -> None:
    m = evaluate_candidate(SGEMM, ref, hand("(void)A; (void)B; (void)C;"), FAST, cache)
    assert m.status is Status.WRONG_RESULT
    assert m.max_error is not None and m.max_error > 0.1
    assert "C[" in m.error


def test_kernel_with_wrong_answer_is_wrong_result(ref: Candidate, cache: Path) -> None:
    # Right everywhere except one element, which is off by 0.05 (tolerance here is ~3e-3).
    body = f"""
    for (int i = 0; i < {N}; i++)
      for (int j = 0; j < {N}; j++)
        for (int k = 0; k < {N}; k++)
          C[i * {N} + j] += A[i * {N} + k] * B[k * {N} + j];
    C[{N - 1} * {N} + 5] += 0.05f;
    """
    m = evaluate_candidate(SGEMM, ref, hand(body), FAST, cache)
    assert m.status is Status.WRONG_RESULT
    assert f"C[{N - 1}, 5]" in m.error
    assert m.max_error == pytest.approx(0.05, rel=1e-3)


def test_float_reassociation_within_tolerance_is_ok(ref: Candidate, cache: Path) -> None:
    # Summing k backwards in double changes rounding but stays well inside rtol.
    body = f"""
    for (int i = 0; i < {N}; i++)
      for (int j = 0; j < {N}; j++) {{
        double s = C[i * {N} + j];
        for (int k = {N} - 1; k >= 0; k--) s += (double)A[i * {N} + k] * B[k * {N} + j];
        C[i * {N} + j] = (float)s;
      }}
    """
    m = evaluate_candidate(SGEMM, ref, hand(body), FAST, cache)
    assert m.status is Status.OK, m.error
    assert m.max_error is not None and 0 < m.max_error < FAST.rtol


def test_broken_c_is_build_error(ref: Candidate, cache: Path) -> None:
    m = evaluate_candidate(SGEMM, ref, hand("this is not C;"), FAST, cache)
    assert m.status is Status.BUILD_ERROR
    assert "error" in m.error and m.timing is None


I8 = workload(
    (
        ArgSpec("A", ArgRole.TENSOR, DType.I8, (16, 16)),
        ArgSpec("B", ArgRole.TENSOR, DType.I8, (16, 16)),
        ArgSpec("C", ArgRole.TENSOR, DType.I32, (16, 16), output=True),
    ),
    "matmul_i8",
)


def test_integer_kernel_verified_exactly(cache: Path) -> None:
    ref = candidate_from_proc(matmul_i8)
    io = run_once(I8, ref, FAST, cache)
    a = np.frombuffer(io.inputs["A"], np.int8).reshape(16, 16).astype(np.int64)
    b = np.frombuffer(io.inputs["B"], np.int8).reshape(16, 16).astype(np.int64)
    c0 = np.frombuffer(io.inputs["C"], np.int32).reshape(16, 16)
    c1 = np.frombuffer(io.outputs["C"], np.int32).reshape(16, 16)
    np.testing.assert_array_equal(c1, c0 + a @ b)
    assert evaluate_candidate(I8, ref, ref, FAST, cache).status is Status.OK
    sig = f"void {KERNEL_SYMBOL}(void *ctxt, const int8_t *A, const int8_t *B, int32_t *C)"
    # Off by one in a single element: far inside any float tolerance, but integers are exact.
    off_by_one = candidate_from_c(
        f"#include <stdint.h>\n{sig} {{\n"
        "for (int i = 0; i < 16; i++) for (int j = 0; j < 16; j++) for (int k = 0; k < 16; k++)"
        " C[i * 16 + j] += (int32_t)A[i * 16 + k] * (int32_t)B[k * 16 + j];\n C[37] += 1;\n}\n"
    )
    m = evaluate_candidate(I8, ref, off_by_one, FAST, cache)
    assert m.status is Status.WRONG_RESULT
    assert m.max_error == 1.0 and "C[2, 5]" in m.error


@pytest.mark.parametrize("dtype", [DType.F16, DType.F32, DType.F64, DType.I8, DType.UI8, DType.I16, DType.I32])
def test_every_dtype_round_trips(dtype: DType, cache: Path) -> None:
    t = dtype.c_type
    w = workload(
        (
            ArgSpec("x", ArgRole.TENSOR, dtype, (5, 7)),
            ArgSpec("s", ArgRole.SCALAR, dtype),
            ArgSpec("y", ArgRole.TENSOR, dtype, (5, 7), output=True),
        )
    )
    c = candidate_from_c(
        f"#include <stdint.h>\nvoid {KERNEL_SYMBOL}(void *ctxt, const {t} *x, const {t} *s, {t} *y) {{\n"
        f"  for (int i = 0; i < 35; i++) y[i] = ({t})(x[i] * *s + y[i]);\n}}\n"
    )
    io = run_once(w, c, FAST, cache)
    npt = np.dtype(dtype.numpy_name)
    x = np.frombuffer(io.inputs["x"], npt)
    s = np.frombuffer(io.inputs["s"], npt)
    y0 = np.frombuffer(io.inputs["y"], npt)
    y1 = np.frombuffer(io.outputs["y"], npt)
    assert x.shape == (35,) and s.shape == (1,)
    if dtype.is_float:
        assert np.all(np.abs(x) <= 1) and np.all(y0 != 0)
        np.testing.assert_allclose(y1, x.astype(np.float64) * s[0] + y0, rtol=2e-3, atol=2e-3)
    else:
        # Narrow types wrap in C's conversions; the harness keeps wide accumulators from it.
        exact = x.astype(np.int64) * int(s[0]) + y0.astype(np.int64)
        np.testing.assert_array_equal(y1, exact.astype(npt))
        if dtype is DType.I32:  # no overflow, though inputs are wide and outputs start near the limits
            np.testing.assert_array_equal(y1.astype(np.int64), exact)
            assert np.abs(x.astype(np.int64)).max() > 64 and np.abs(y0.astype(np.int64)).max() > 2**30
    assert evaluate_candidate(w, c, c, FAST, cache).status is Status.OK


def test_remeasure_returns_one_measurement_per_candidate_in_order(ref: Candidate, cache: Path) -> None:
    fast = candidate_from_proc(reorder_loops(sgemm.partial_eval(M=N, N=N, K=N), "j k"))
    broken = hand("syntax error here")
    empty = hand("(void)A; (void)B; (void)C;")
    ms = remeasure(SGEMM, ref, [fast, ref, broken, empty], FAST, cache)
    assert [m.fingerprint for m in ms] == [fast.fingerprint, ref.fingerprint, broken.fingerprint, empty.fingerprint]
    assert [m.status for m in ms] == [Status.OK, Status.OK, Status.BUILD_ERROR, Status.WRONG_RESULT]
    assert all(len(m.timing.samples) == FAST.samples for m in ms[:2])


def test_remeasure_isolates_a_crashing_finalist(ref: Candidate, cache: Path) -> None:
    crash = hand("*(volatile int *)0 = 1;")
    ms = remeasure(SGEMM, ref, [ref, crash], FAST, cache)
    assert [m.status for m in ms] == [Status.OK, Status.RUN_ERROR]


def test_benchmarks_wait_for_the_node_lock(ref: Candidate, cache: Path) -> None:
    evaluate_candidate(SGEMM, ref, ref, FAST, cache)  # warm the build cache
    result = []
    with bench_lock(cache):
        worker = threading.Thread(target=lambda: result.append(evaluate_candidate(SGEMM, ref, ref, FAST, cache)))
        worker.start()
        worker.join(timeout=0.7)
        assert worker.is_alive() and not result  # queued behind the lock
    worker.join(timeout=20)
    assert result and result[0].status is Status.OK


def test_unwritable_cache_dir_is_an_infrastructure_error(ref: Candidate, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(InfrastructureError, match="build cache"):
        evaluate_candidate(SGEMM, ref, ref, FAST, blocker / "cache")


def test_broken_reference_is_a_search_error(cache: Path) -> None:
    good = hand("(void)A; (void)B; (void)C;")
    with pytest.raises(SearchError, match="does not compile"):
        evaluate_candidate(SGEMM, hand("not C"), good, FAST, cache)
    crashing_ref = hand("*(volatile int *)0 = 1;")
    with pytest.raises(SearchError, match="SIGSEGV"):
        evaluate_candidate(SGEMM, crashing_ref, good, FAST, cache)
    # Evaluating the reference itself reports its failure as a status instead.
    assert evaluate_candidate(SGEMM, crashing_ref, crashing_ref, FAST, cache).status is Status.RUN_ERROR


AFFINITY_CHECK = """
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) != 0 || CPU_COUNT(&set) {op} 1) abort();
"""
MATMUL = f"""
    for (int i = 0; i < {N}; i++)
      for (int j = 0; j < {N}; j++)
        for (int k = 0; k < {N}; k++)
          C[i * {N} + j] += A[i * {N} + k] * B[k * {N} + j];
"""


def test_single_threaded_kernels_are_pinned_and_openmp_ones_run_on_their_threads(ref: Candidate, cache: Path,
                                                                               monkeypatch) -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs at least two CPUs to tell pinned from free")
    head = "#define _GNU_SOURCE\n#include <sched.h>\n#include <stdlib.h>\n"
    pinned = candidate_from_c(f"{head}{SIG} {{{AFFINITY_CHECK.format(op='!=')}{MATMUL}}}\n")
    m = evaluate_candidate(SGEMM, ref, pinned, FAST, cache)
    assert m.status is Status.OK, m.error
    # An OpenMP kernel (it needs -fopenmp to link omp_get_max_threads) runs on exactly the
    # threads asked for, whatever the environment it is run from says (Ray's workers: 1).
    par = candidate_from_c(
        f"{head}#include <omp.h>\n{SIG} {{\n"
        f"    if (omp_get_max_threads() != 2) abort();\n#pragma omp parallel for\n{MATMUL}}}\n"
    )
    assert par.uses_openmp
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    m = evaluate_candidate(SGEMM, ref, par, dataclasses.replace(FAST, threads=2), cache)
    assert m.status is Status.OK, m.error
    assert evaluate_candidate(SGEMM, ref, par, dataclasses.replace(FAST, threads=3), cache).status is Status.RUN_ERROR
    unpinned_wrongly = candidate_from_c(f"{head}{SIG} {{{AFFINITY_CHECK.format(op='<=')}{MATMUL}}}\n")
    assert evaluate_candidate(SGEMM, ref, unpinned_wrongly, FAST, cache).status is Status.RUN_ERROR


def test_timing_statistics_are_robust_to_an_outlier() -> None:
    from schedsearch.evaluate.bench import timing_from_samples

    t = timing_from_samples([1.0, 1.1, 0.9, 1.05, 8.0], inner=4)
    assert (t.min, t.median, t.q1, t.q3) == (0.9, 1.05, 1.0, 1.1)
    assert t.samples == (1.0, 1.1, 0.9, 1.05, 8.0) and t.inner == 4  # recorded in measured order
    one = timing_from_samples([2.0], inner=1)
    assert one.median == one.q1 == one.q3 == 2.0 and one.spread == 0.0


def test_a_candidate_slower_than_the_cutoff_is_timed_by_its_verification_call_alone(ref: Candidate,
                                                                                     cache: Path) -> None:
    cand = candidate_from_proc(reorder_loops(sgemm.partial_eval(M=N, N=N, K=N), "j k"))
    full = evaluate_candidate(SGEMM, ref, cand, FAST, cache, cutoff=60.0)
    assert full.status is Status.OK and len(full.timing.samples) == FAST.samples
    cut = evaluate_candidate(SGEMM, ref, cand, FAST, cache, cutoff=1e-9)
    assert cut.status is Status.OK, cut.error  # still verified: a wrong result is never cut
    assert len(cut.timing.samples) == 1 and cut.timing.inner == 1 and cut.max_error is not None
    wrong = evaluate_candidate(SGEMM, ref, hand("C[0] += 1.0f;"), FAST, cache, cutoff=1e-9)
    assert wrong.status is Status.WRONG_RESULT


@pytest.mark.parametrize(("settle", "expected"), [(0.0, 9), (10.0, 3)])
def test_a_lone_kernel_stops_sampling_once_its_samples_agree(ref: Candidate, cache: Path, settle: float,
                                                             expected: int) -> None:
    config = dataclasses.replace(FAST, samples=9, settle=settle)
    m = evaluate_candidate(SGEMM, ref, ref, config, cache)
    assert m.status is Status.OK and len(m.timing.samples) == expected


@pytest.fixture
def entered(monkeypatch) -> list[int]:
    """One item for each time a timing paused the node (``evaluate.quiet``, spied on)."""
    from schedsearch.evaluate import timing

    calls: list[int] = []

    @contextlib.contextmanager
    def spy(cache_dir: Path):
        calls.append(1)
        yield 0

    monkeypatch.setattr(timing, "quiet", spy)
    return calls


def test_quiet_timing_pauses_the_node_for_the_timing_proper_only(ref: Candidate, cache: Path, entered) -> None:
    from schedsearch.core import TimingMode

    quietly = dataclasses.replace(FAST, timing=TimingMode.QUIET)
    cand = candidate_from_proc(reorder_loops(sgemm.partial_eval(M=N, N=N, K=N), "j k"))
    timed = evaluate_candidate(SGEMM, ref, cand, quietly, cache)
    assert timed.status is Status.OK and len(timed.timing.samples) == FAST.samples
    assert entered == [1] and timed.quiet is True  # warm-up and samples ran paused
    cut = evaluate_candidate(SGEMM, ref, cand, quietly, cache, cutoff=1e-9)
    wrong = evaluate_candidate(SGEMM, ref, hand("C[0] += 1.0f;"), quietly, cache)
    assert cut.status is Status.OK and wrong.status is Status.WRONG_RESULT
    assert entered == [1] and cut.quiet is None  # a one-call timing and a failed verification need no pause
    shared = evaluate_candidate(SGEMM, ref, cand, dataclasses.replace(FAST, timing=TimingMode.SHARED), cache)
    assert shared.status is Status.OK and entered == [1] and shared.quiet is False
    side_by_side = remeasure(SGEMM, ref, [ref, cand], quietly, cache)
    assert [m.status for m in side_by_side] == [Status.OK, Status.OK] and entered == [1, 1]


def test_auto_timing_tries_both_kinds_and_follows_the_evidence(ref: Candidate, tmp_path: Path, entered) -> None:
    """Auto timing starts quiet and alternates; once its evidence says the work beside a
    timing does not disturb it, most timings are shared, and the finalists are quiet all
    the same."""
    from schedsearch.core import TimingMode
    from schedsearch.evaluate import interference

    auto = dataclasses.replace(FAST, timing=TimingMode.AUTO)
    cand = candidate_from_proc(reorder_loops(sgemm.partial_eval(M=N, N=N, K=N), "j k"))
    kinds = [evaluate_candidate(SGEMM, ref, cand, auto, tmp_path).quiet for _ in range(4)]
    assert kinds == [True, False, True, False] and len(entered) == 2
    node = interference.of_node(tmp_path)
    # Evidence as of a host where the work beside a timing changes nothing: shared wins.
    for _ in range(interference.MIN_EVIDENCE):
        for kind in (True, False):
            node.record(interference.Evidence(kind, 0.01))
    assert node.verdict().disturbs is False
    later = [evaluate_candidate(SGEMM, ref, cand, auto, tmp_path).quiet for _ in range(interference.PROBE_EVERY)]
    assert later.count(True) == 1  # one probe of the other kind
    before = len(entered)
    remeasure(SGEMM, ref, [ref, cand], auto, tmp_path)
    assert len(entered) == before + 1


def test_an_unscheduled_kernel_slower_than_the_run_timeout_is_timed_by_one_call(tmp_path: Path) -> None:
    # one call of the unscheduled kernel takes 1.2 s, beyond the 1 s a candidate gets;
    # its FLOP count allows it 8 s (4 calls at the slowest rate assumed): it is verified,
    # then timed by that one call, not killed
    slow_root = hand(
        "#include <time.h>\n"
        "  for (int i = 0; i < 48; i++) for (int j = 0; j < 48; j++) for (int k = 0; k < 48; k++)\n"
        "    C[i * 48 + j] += A[i * 48 + k] * B[k * 48 + j];\n"
        "  struct timespec t = {1, 200000000}; nanosleep(&t, 0);"
    )
    slow = dataclasses.replace(SGEMM, flops=200_000_000)
    cfg = BenchConfig(run_timeout=1.0, samples=3)
    m = evaluate_candidate(slow, slow_root, slow_root, cfg, tmp_path)
    assert m.status is Status.OK, m.error
    assert m.timing is not None and len(m.timing.samples) == 1 and m.seconds >= 1.2
    # Its answer key (two input sets, each called on its magnitudes and on itself) was
    # computed just now, by the very build being measured: its first call is the timing,
    # and no call more is made (6 calls of 1.2 s would be 7.2 s).
    assert 4 * 1.2 <= m.run_seconds < 6.0, m.run_seconds
    again = evaluate_candidate(slow, slow_root, slow_root, cfg, tmp_path)  # the key from the cache
    assert again.status is Status.OK and len(again.timing.samples) == 1 and again.seconds >= 1.2
    # a candidate that slow gets the run timeout as it is
    other = evaluate_candidate(slow, slow_root, candidate_from_c(slow_root.c_source + "\n"), cfg, tmp_path)
    assert other.status is Status.TIMEOUT
