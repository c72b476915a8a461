"""Subtly wrong kernels, every one caught: real gcc, the real harness, Exo's own C edited.

Each kernel here is a real candidate's C (the 64**3 SGEMM of ``examples/matmul.py`` with
its loops reordered, or its int8 matmul) with one small thing wrong, of the kinds that
slipped through a verification that compared one call on one seed against
``rtol * max(1, max|ref|)`` over the whole output: 29 of 31 such kernels were recorded
``ok`` (issue 66). The same candidate unedited is ``ok``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from exo.stdlib.scheduling import reorder_loops

from schedsearch.core import BenchConfig, Candidate, Status
from schedsearch.evaluate import evaluate_candidate
from schedsearch.transforms import build_proc, kernel_c, load_workload, root_candidate
from tests.conftest import EXAMPLES
from tests.integration.answer_keys import appended, edited, from_c, prepended

CONFIG = BenchConfig(warmup_seconds=0.001, min_sample_seconds=0.001, samples=3, run_timeout=20.0)
SGEMM = load_workload(EXAMPLES / "matmul.py", "sgemm", {"M": 64, "N": 64, "K": 64})
I8 = load_workload(EXAMPLES / "matmul.py", "matmul_i8", {})


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("wrong-kernels")


@pytest.fixture(scope="module")
def base() -> Candidate:
    """A real candidate: the SGEMM with its j and k loops swapped (i, k, j)."""
    return from_c(kernel_c(reorder_loops(build_proc(SGEMM), "j k")))


def test_the_candidates_the_wrong_ones_are_made_from_are_right(base: Candidate, cache: Path) -> None:
    root = root_candidate(SGEMM)
    assert evaluate_candidate(SGEMM, root, base, CONFIG, cache).status is Status.OK
    i8 = root_candidate(I8)
    assert evaluate_candidate(I8, i8, i8, CONFIG, cache).status is Status.OK


#: (what is wrong, how the base candidate's C is changed, words the error must hold)
FLOAT_CASES = [
    ("one term dropped", lambda c: edited(c, "k < 64", "k < 63"), "beyond its tolerance"),
    ("an output element moved by 0.2% of itself", lambda c: appended(c, "C[0] *= 1.002f;"), "C[0, 0] is"),
    ("an output element off by far less than before", lambda c: appended(c, "C[64 * 37 + 5] += 4e-3f;"),
     "C[37, 5] is"),
    ("a write one element past the end of the output", lambda c: appended(c, "C[64 * 64] = C[0];"),
     "right after the end of C"),
    ("a write just before the output", lambda c: appended(c, "C[-1] = C[0];"), "right before the start of C"),
    ("a write a few rows past the output", lambda c: appended(c, "C[64 * 64 + 200] = 1.0f;"),
     "800 bytes after the end of C"),
    ("a const input changed after computing", lambda c: appended(c, "((float *)A)[0] *= 1.5f;"),
     "changed A[0, 0], an input it only reads"),
    ("a const input changed and used", lambda c: prepended(c, "((float *)B)[64 * 64 - 1] = 0.0f;"),
     "changed B[63, 63]"),
    ("the right answer on the first call only", lambda c: prepended(c, "static int calls = 0; if (calls++) return;"),
     "input set 2"),
]


@pytest.mark.parametrize("what, change, says", FLOAT_CASES, ids=[c[0] for c in FLOAT_CASES])
def test_a_subtly_wrong_float_kernel_is_caught(base: Candidate, cache: Path, what: str, change, says: str) -> None:
    m = evaluate_candidate(SGEMM, root_candidate(SGEMM), change(base), CONFIG, cache)
    assert m.status is Status.WRONG_RESULT, (what, m.status, m.error)
    assert says in m.error, m.error
    assert m.timing is None  # never timed


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_an_element_moved_by_two_tenths_of_a_percent_is_caught_whatever_the_seed(base: Candidate, cache: Path,
                                                                                   seed: int) -> None:
    config = BenchConfig(**{**CONFIG.to_json(), "seed": seed})
    m = evaluate_candidate(SGEMM, root_candidate(SGEMM), appended(base, "C[0] *= 1.002f;"), config, cache)
    assert m.status is Status.WRONG_RESULT and "C[0, 0] is" in m.error, m.error


def test_a_reduction_parallelized_without_a_private_accumulator_is_caught(cache: Path) -> None:
    """The k loop outermost and split between threads: every thread adds into all of C at
    once. The same loops parallel over i (each element one thread's) are right. Two
    threads, as a search allowed parallel loops times them with (``BenchConfig.threads``;
    on one, OpenMP runs the loop serially and nothing races). A race shows only when the
    threads run at the same time: on a machine whose cores other work keeps busy it may
    not (``verification.PARALLEL_CHECKS``), and the test says so."""
    config = BenchConfig(**{**CONFIG.to_json(), "threads": 2})
    root = root_candidate(SGEMM)
    kij = kernel_c(reorder_loops(reorder_loops(build_proc(SGEMM), "j k"), "i k"))
    racy = from_c(kij.replace("for (int_fast32_t k = 0;", "#pragma omp parallel for\nfor (int_fast32_t k = 0;", 1))
    assert racy.uses_openmp
    m = evaluate_candidate(SGEMM, root, racy, config, cache)
    if m.status is Status.OK and (busy := busy_cores()) > 0.3:
        pytest.skip(f"threads collide only when they run at once, and {busy:.1f} of this machine's "
                    "cores are busy with other work")
    assert m.status is Status.WRONG_RESULT, (m.status, m.error)
    ikj = kernel_c(reorder_loops(build_proc(SGEMM), "j k"))
    fine = from_c(ikj.replace("for (int_fast32_t i = 0;", "#pragma omp parallel for\nfor (int_fast32_t i = 0;", 1))
    assert evaluate_candidate(SGEMM, root, fine, config, cache).status is Status.OK


def busy_cores(seconds: float = 0.5) -> float:
    """How many cores other processes kept busy over the next ``seconds`` (``/proc/stat``)."""
    def sample() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        return sum(fields), fields[3] + fields[4]  # all, idle + iowait

    total0, idle0 = sample()
    time.sleep(seconds)
    total1, idle1 = sample()
    cores = len(os.sched_getaffinity(0))
    return cores * (1 - (idle1 - idle0) / max(1, total1 - total0))


def _int16_accumulator(cand: Candidate) -> Candidate:
    """Each element's products summed in an int16 first, then added to C."""
    c = cand.c_source
    head = c[: c.index("{", c.rindex("void schedsearch_kernel(")) + 1]
    body = """
for (int_fast32_t i = 0; i < 16; i++) {
  for (int_fast32_t j = 0; j < 16; j++) {
    int16_t acc = 0;
    for (int_fast32_t k = 0; k < 16; k++) acc += (int32_t)A[i * 16 + k] * (int32_t)B[k * 16 + j];
    C[i * 16 + j] += acc;
  }
}
}
"""
    return from_c(head + body)


I8_LOOP = "C[i * 16 + j] += a * b;"
INT_CASES = [
    # 16 products of full-range int8 values overflow an int16; at -3..3 they did not.
    ("a narrow accumulator", _int16_accumulator),
    # An int32 near its limits does not survive a round trip through float; one at -3..3 did.
    ("accumulation through float",
     lambda c: edited(c, I8_LOOP, "C[i * 16 + j] = (int32_t)((float)C[i * 16 + j] + (float)(a * b));")),
    ("one product off by one", lambda c: edited(c, I8_LOOP, "C[i * 16 + j] += a * b + (i == 3 && j == 9 && k == 0);")),
]


@pytest.mark.parametrize("what, change", INT_CASES, ids=[c[0] for c in INT_CASES])
def test_a_subtly_wrong_integer_kernel_is_caught(cache: Path, what: str, change) -> None:
    root = root_candidate(I8)
    m = evaluate_candidate(I8, root, change(root), CONFIG, cache)
    assert m.status is Status.WRONG_RESULT, (what, m.status, m.error)
    assert "C[" in m.error
