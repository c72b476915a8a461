"""A compiler that crashes on one candidate's C blames that candidate, not the machine.

gcc reports an internal compiler error in cc1 with "terminated program cc1", the words it
also uses for a compiler killed from outside. A wrapper passed as ``cc`` plays a gcc that
crashes on every C file holding a marker and is gcc otherwise: the candidate with the
marker is a ``build_error`` carrying the compiler's message, and the search goes on; only
when the unscheduled proc crashes the compiler too is it the machine's fault.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

import pytest
from exo import proc
from exo.stdlib.scheduling import rename, reorder_loops

from schedsearch.core import KERNEL_SYMBOL, ArgRole, ArgSpec, BenchConfig, Candidate, DType, Schedule, Status, Workload
from schedsearch.core import sha256_text
from schedsearch.errors import InfrastructureError
from schedsearch.evaluate import evaluate_candidate, remeasure
from schedsearch.evaluate.build import build_kernel
from tests.conftest import run_cli

N = 16
#: gcc, except that a C file holding the marker makes cc1 crash, as gcc reports that.
ICE_CC = """#!/bin/sh
for arg in "$@"; do
  case "$arg" in
    *.c) if grep -q '{marker}' "$arg" 2>/dev/null; then
           echo "$arg: In function 'schedsearch_kernel':" >&2
           echo "$arg:12:1: internal compiler error: Segmentation fault" >&2
           echo "Please submit a full bug report, with preprocessed source (by using -freport-bug)." >&2
           echo "gcc: internal compiler error: Segmentation fault signal terminated program cc1" >&2
           exit 4
         fi;;
  esac
done
exec gcc "$@"
"""
FAST = dict(warmup_seconds=0.001, min_sample_seconds=0.001, samples=3, run_timeout=10.0)


@proc
def sgemm(M: size, N: size, K: size, A: f32[M, K], B: f32[K, N], C: f32[M, N]):
    for i in seq(0, M):
        for j in seq(0, N):
            for k in seq(0, K):
                C[i, j] += A[i, k] * B[k, j]


WORKLOAD = Workload("mem.py", "", "0" * 64, "sgemm", (), (
    ArgSpec("A", ArgRole.TENSOR, DType.F32, (N, N)),
    ArgSpec("B", ArgRole.TENSOR, DType.F32, (N, N)),
    ArgSpec("C", ArgRole.TENSOR, DType.F32, (N, N), output=True),
), flops=2 * N**3)


def candidate(p, note: str = "") -> Candidate:
    c = rename(p, KERNEL_SYMBOL).c_code_str() + note
    return Candidate(Schedule(), c, sha256_text(c), proc_text="")


ROOT = candidate(sgemm.partial_eval(M=N, N=N, K=N))
GOOD = candidate(reorder_loops(sgemm.partial_eval(M=N, N=N, K=N), "j k"))
CRASHER = candidate(reorder_loops(sgemm.partial_eval(M=N, N=N, K=N), "j k"), "/* crash-cc1-here */\n")


def wrapper(tmp_path: Path, marker: str) -> BenchConfig:
    cc = tmp_path / "ice-cc.sh"
    cc.write_text(ICE_CC.format(marker=marker))
    cc.chmod(0o755)
    return BenchConfig(cc=str(cc), **FAST)


def test_an_internal_compiler_error_on_one_candidate_is_its_build_error(tmp_path: Path) -> None:
    config = wrapper(tmp_path, "crash-cc1-here")
    assert evaluate_candidate(WORKLOAD, ROOT, ROOT, config, tmp_path).status is Status.OK
    m = evaluate_candidate(WORKLOAD, ROOT, CRASHER, config, tmp_path)
    assert m.status is Status.BUILD_ERROR, m.error
    assert "internal compiler error: Segmentation fault" in m.error and "terminated program cc1" in m.error
    assert "the unscheduled proc builds" in m.error
    # The next candidate builds and runs as ever; so do finalists beside the crasher.
    assert evaluate_candidate(WORKLOAD, ROOT, GOOD, config, tmp_path).status is Status.OK
    side = remeasure(WORKLOAD, ROOT, [GOOD, CRASHER], config, tmp_path)
    assert [x.status for x in side] == [Status.OK, Status.BUILD_ERROR]


def test_a_crash_that_recurs_on_the_unscheduled_proc_is_the_machines(tmp_path: Path) -> None:
    config = wrapper(tmp_path, "schedsearch_kernel")  # in every kernel's C
    with pytest.raises(InfrastructureError, match="terminated program cc1"):
        evaluate_candidate(WORKLOAD, ROOT, GOOD, config, tmp_path)
    with pytest.raises(InfrastructureError, match="terminated program cc1"):
        evaluate_candidate(WORKLOAD, ROOT, ROOT, config, tmp_path)


def test_settling_costs_nothing_when_nothing_is_suspect(tmp_path: Path, monkeypatch) -> None:
    """Builds that succeed or fail with a plain compile error never build anything else."""
    from schedsearch.evaluate import build

    fresh: list[bool] = []
    real = build.build_kernel

    def spy(*args, **kwargs):
        fresh.append(kwargs.get("fresh", False))
        return real(*args, **kwargs)

    from schedsearch.evaluate import pipeline, reference

    monkeypatch.setattr(pipeline, "build_kernel", spy)
    monkeypatch.setattr(reference, "build_kernel", spy)
    monkeypatch.setattr(build, "build_kernel", spy)
    config = BenchConfig(**FAST)
    broken = Candidate(Schedule(), "this is not C;\n", sha256_text("this is not C;\n"), proc_text="")
    assert evaluate_candidate(WORKLOAD, ROOT, GOOD, config, tmp_path).status is Status.OK
    assert evaluate_candidate(WORKLOAD, ROOT, broken, config, tmp_path).status is Status.BUILD_ERROR
    assert fresh and not any(fresh)
    assert not build_kernel("this is not C;\n", config, tmp_path).fault


KERNEL = '''from __future__ import annotations

from exo import *


@proc
def kern(N: size, x: f32[N]):
    for i in seq(0, N):
        x[i] = 0.0
'''


@pytest.mark.slow
def test_a_search_goes_on_past_candidates_that_crash_the_compiler(tmp_path: Path) -> None:
    """Every split of the loop (its C names the loop ``ii``) crashes cc1; the root and the
    unroll build. The search completes; the crashers are build errors with gcc's message."""
    kern = tmp_path / "kern.py"
    kern.write_text(KERNEL)
    config = wrapper(tmp_path, "int_fast32_t ii")
    db = tmp_path / "r.db"
    r = run_cli("run", str(kern), "--size", "N=64", "--workers", "0", "--max-candidates", "6", "--budget", "120",
                "--cost-model", "off", "--no-warm-start", "--db", str(db), "--cc", config.cc, "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["search_id"] == 1
    with contextlib.closing(sqlite3.connect(db)) as conn:
        status, failure = conn.execute("SELECT status, failure FROM searches WHERE id = 1").fetchone()
        rows = conn.execute("SELECT status, error, c_source FROM candidates").fetchall()
    assert status == "completed" and not failure, failure
    crashed = [(s, e) for s, e, c in rows if "int_fast32_t ii" in c and s != "pending"]
    assert crashed and all(s == "build_error" and "internal compiler error" in e for s, e in crashed), crashed
    assert any(s == "ok" for s, _, c in rows if "int_fast32_t ii" not in c)
