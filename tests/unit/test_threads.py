"""Kernels on several threads (``--threads N``): the space, the timing environment, and
the thread count recorded with the search, its schedule files and exports."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from schedsearch.app.settings import SearchSettings
from schedsearch.core import BenchConfig, ReuseScope, Rewrite, RewriteKind, Schedule, SearchConfig
from schedsearch.errors import ScheduleFileError
from schedsearch.evaluate import bench
from schedsearch.schedule_file import read_schedule_file, write_schedule_file

ROOT = Path(__file__).resolve().parents[2]
MATMUL = ROOT / "examples" / "matmul.py"


def test_threads_open_parallel_loops_and_reach_the_stored_config() -> None:
    one = SearchSettings(target="scalar").config()
    two = SearchSettings(target="scalar", threads=2).config()
    assert not one.expand.allow_parallel and one.bench.threads == 1
    assert two.expand.allow_parallel and two.bench.threads == 2
    with pytest.raises(ValueError, match="threads must be a whole number >= 1"):
        SearchSettings(threads=0)


def test_a_parallel_kernel_runs_on_exactly_the_threads_asked_for_whatever_its_worker_says(monkeypatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # what Ray puts in every worker's environment
    monkeypatch.setenv("OMP_PLACES", "threads")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    env = bench.openmp_env(2)
    assert env["OMP_NUM_THREADS"] == "2" and env["OMP_PROC_BIND"] == "close"
    assert env["OMP_PLACES"] == "{2},{3}"  # the last cores: the one-thread kernel's is the last
    # More threads than cores: not bound to places (a worker's own places are dropped too).
    assert "OMP_PLACES" not in bench.openmp_env(8) and bench.openmp_env(8)["OMP_NUM_THREADS"] == "8"


def test_run_kernels_gives_the_openmp_environment_to_unpinned_runs_only(monkeypatch, tmp_path) -> None:
    seen: list[dict | None] = []
    monkeypatch.setattr(bench, "run_child", lambda argv, timeout, gate=None, env=None: seen.append(env))
    config = BenchConfig(threads=3)
    for pin in (True, False):
        bench.run_kernels(tmp_path / "d", tmp_path / "r", [tmp_path / "k"], config, pin=pin, scale=1.0)
    assert seen[0] is None
    assert seen[1] is not None and seen[1]["OMP_NUM_THREADS"] == "3"


def test_measurements_on_other_threads_are_not_reused() -> None:
    one, two = SearchConfig(), SearchConfig(bench=BenchConfig(threads=2))
    scope = ReuseScope.of(two, "m", "r")
    assert scope.threads == 2
    assert scope.admits(1, two, "m", "r") and not scope.admits(1, one, "m", "r")


def _file(path: Path, **extra: object) -> Path:
    path.write_text(json.dumps({
        "format": "schedsearch-schedule", "version": 1,
        "workload": {"file": str(MATMUL), "proc": "sgemm", "sizes": {"M": 8, "N": 8, "K": 8}},
        "steps": [{"kind": "parallelize", "target": "i #0", "args": {}}], **extra,
    }))
    return path


def test_a_schedule_files_threads_are_read_written_and_checked(tmp_path: Path) -> None:
    assert read_schedule_file(_file(tmp_path / "old.json")).threads == 1  # files before threads: one
    two = read_schedule_file(_file(tmp_path / "two.json", threads=2))
    assert two.threads == 2
    write_schedule_file(tmp_path / "again.json", two)
    assert json.loads((tmp_path / "again.json").read_text())["threads"] == 2
    with pytest.raises(ScheduleFileError, match="its threads 0 is not a number of threads"):
        read_schedule_file(_file(tmp_path / "bad.json", threads=0))


def test_an_exported_script_says_how_its_parallel_loops_were_run() -> None:
    from schedsearch.transforms import load_workload, schedule_script

    workload = load_workload(str(MATMUL), "sgemm", {"M": 8, "N": 8, "K": 8})
    parallel = Schedule((Rewrite(RewriteKind.PARALLELIZE, "i #0", ()),))
    text = schedule_script(workload, parallel, cflags=("-O3",), threads=2)
    assert "THREADS = 2" in text and "-O3 -fopenmp" in text and "OMP_NUM_THREADS=2" in text
    serial = schedule_script(workload, Schedule(()), cflags=("-O3",), threads=2)
    assert "THREADS = 1" in serial and "-fopenmp" not in serial
