"""``schedsearch.tune()``, ``apply()``, ``resume()`` and ``load_schedule()`` with real Exo,
gcc and SQLite; the same search from the CLI and from Python; exported scripts that run
from anywhere."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from exo import DRAM, proc

import schedsearch
from schedsearch.core import SearchStatus, Status
from schedsearch.numbers import within_noise
from schedsearch.errors import NoScheduleError, ReplayError
from schedsearch.explore import SearchTree
from schedsearch.targets import schedule_target
from tests.conftest import EXAMPLES, run_cli

MATMUL = EXAMPLES / "matmul.py"
SIZES = {"M": 32, "N": 32, "K": 32}
#: The root and its first children in proposal order (two reorders, a tile): with the cost
#: model off every run measures the same candidates, and one reorder is the clear winner
#: (4-10x faster than the others). The scalar target keeps the root's expansion quick.
QUICK = {"max_candidates": 4, "cost_model": "off", "seed": 0, "budget": 240, "workers": 0, "target": "scalar"}


@proc
def saxpy(N: size, x: f32[N] @ DRAM, y: f32[N] @ DRAM):
    for i in seq(0, N):
        y[i] += 2.0 * x[i]


@pytest.fixture(scope="module")
def tuned_object(tmp_path_factory: pytest.TempPathFactory) -> tuple[schedsearch.TuneResult, Path]:
    """One search of the proc object above (in this process, no Ray), shared below."""
    db = tmp_path_factory.mktemp("api-object") / "tune.db"
    events = []
    result = schedsearch.tune(saxpy, {"N": 256}, db=str(db), max_candidates=4, budget=120, cost_model="off",
                              on_progress=events.append)
    kinds = [e.kind.value for e in events]
    assert kinds[0] == "started" and kinds[-1] == "finished" and "baseline" in kinds
    return result, db


@pytest.fixture(scope="module")
def tuned_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[schedsearch.TuneResult, Path]:
    """One search of SGEMM 32^3 from its file, with the settings the CLI test repeats."""
    db = tmp_path_factory.mktemp("api-file") / "tune.db"
    return schedsearch.tune(str(MATMUL), SIZES, proc="sgemm", db=str(db), **QUICK), db


def test_tune_a_proc_object(tuned_object: tuple[schedsearch.TuneResult, Path]) -> None:
    result, db = tuned_object
    assert result.status is SearchStatus.COMPLETED and result.search_id == 1
    assert result.workload.proc == "saxpy" and result.workload.sizes == (("N", 256),)
    assert result.speedup is not None and result.speedup > 0 and result.seconds is not None and result.seconds > 0
    assert result.gflops == pytest.approx(result.workload.flops / result.seconds / 1e9)
    assert result.c_code == result.proc.c_code_str() and "void saxpy(" in result.c_code.replace("void saxpy (", "void saxpy(")
    assert result.schedule == result.best.schedule and result.db == str(db)
    tree = result.tree
    assert isinstance(tree, SearchTree) and tree.search.id == result.search_id
    assert sum(r.status is not Status.PENDING for r in tree) == 4  # max_candidates, the root included
    assert str(result).startswith(f"search 1 of saxpy[N=256] (completed, target {result.target})")


def test_apply_gives_the_best_known_proc_or_says_how_to_tune(tuned_object: tuple[schedsearch.TuneResult, Path],
                                                             tmp_path: Path) -> None:
    result, db = tuned_object
    assert schedsearch.apply(saxpy, {"N": 256}, db=str(db)).c_code_str() == result.c_code
    assert schedsearch.apply(saxpy, {"N": 256}, db=str(db), target=result.target).c_code_str() == result.c_code
    with pytest.raises(NoScheduleError, match=r"no schedule known for saxpy\[N=128\] on this machine in .*; "
                                              r"tune it first: schedsearch.tune\(saxpy, \{'N': 128\}, db="):
        schedsearch.apply(saxpy, {"N": 128}, db=str(db))
    other = "scalar" if result.target != "scalar" else "avx2"
    with pytest.raises(NoScheduleError, match=f"for target {other} on this machine"):
        schedsearch.apply(saxpy, {"N": 256}, db=str(db), target=other)
    with pytest.raises(NoScheduleError, match="there is no database .*nothing.db; tune it first"):
        schedsearch.apply(saxpy, {"N": 256}, db=str(tmp_path / "nothing.db"))
    assert not (tmp_path / "nothing.db").exists()


def test_a_saved_schedule_replays_to_the_same_c(tuned_object: tuple[schedsearch.TuneResult, Path],
                                                tmp_path: Path) -> None:
    result, _ = tuned_object
    path = result.save(tmp_path / "saxpy.json")
    loaded = schedsearch.load_schedule(path)
    assert loaded.proc == "saxpy" and loaded.sizes == {"N": 256} and loaded.schedule == result.schedule
    assert loaded.apply(saxpy).c_code_str() == result.c_code


def test_a_proc_objects_export_needs_trust_and_then_runs_anywhere(tuned_object: tuple[schedsearch.TuneResult, Path],
                                                                  tmp_path: Path) -> None:
    result, db = tuned_object
    refused = run_cli("export", str(result.search_id), "--format", "py", "--db", str(db))
    assert refused.returncode == 2 and "captured from a proc object" in refused.stderr, refused.stderr
    assert "--trust-db-source" in refused.stderr and "Traceback" not in refused.stderr
    script = tmp_path / "saxpy_schedule.py"
    r = run_cli("export", str(result.search_id), "--format", "py", "-o", str(script), "--db", str(db),
                "--trust-db-source")
    assert r.returncode == 0, r.stderr
    assert _run_script(script, tmp_path) == result.c_code


def test_tune_a_file_and_load_its_exported_schedule(tuned_file: tuple[schedsearch.TuneResult, Path],
                                                    tmp_path: Path) -> None:
    result, db = tuned_file
    assert result.workload.path == str(MATMUL) and result.workload.proc == "sgemm"
    assert result.speedup is not None and result.speedup > 1
    assert schedsearch.apply(str(MATMUL), SIZES, db=str(db), proc="sgemm").c_code_str() == result.c_code
    sched = tmp_path / "sgemm.json"
    r = run_cli("export", str(result.search_id), "--format", "json", "-o", str(sched), "--db", str(db))
    assert r.returncode == 0, r.stderr
    loaded = schedsearch.load_schedule(sched)
    assert loaded.apply(str(MATMUL)).c_code_str() == result.c_code  # the recorded proc and sizes
    # a step that no longer applies is named
    data = json.loads(sched.read_text())
    data["steps"][0]["target"] = "no_such_loop #0"
    sched.write_text(json.dumps(data))
    with pytest.raises(ReplayError, match="step 0"):
        schedsearch.load_schedule(sched).apply(str(MATMUL))


def test_an_exported_script_runs_from_another_directory(tuned_file: tuple[schedsearch.TuneResult, Path],
                                                        tmp_path: Path) -> None:
    result, db = tuned_file
    made = tmp_path / "made"
    made.mkdir()
    r = run_cli("export", str(result.search_id), "--format", "py", "-o", "best.py", "--db", str(db), cwd=made)
    assert r.returncode == 0, r.stderr
    c = run_cli("export", str(result.search_id), "--format", "c", "--db", str(db))
    assert c.returncode == 0, c.stderr
    header, exported_c = c.stdout.split("\n", 1)
    flags = re.search(r"built and measured with: \S+ (.*) \*/", header).group(1)
    moved = tmp_path / "moved" / "best.py"
    moved.parent.mkdir()
    shutil.move(made / "best.py", moved)
    text = moved.read_text()
    # it names the flags it was built with and the instruction set its steps need
    assert f"CFLAGS = {flags!r}" in text and f"TARGET = {schedule_target(result.schedule)!r}" in text
    assert not re.search(r"^(import|from) schedsearch", text, re.M)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert _run_script(moved, elsewhere) == exported_c == result.c_code


def test_the_cli_and_the_api_find_the_same(tuned_file: tuple[schedsearch.TuneResult, Path], tmp_path: Path) -> None:
    result, _ = tuned_file
    db = tmp_path / "cli.db"
    r = run_cli("run", str(MATMUL), "--proc", "sgemm", "--size", "M=32,N=32,K=32", "--workers", "0",
                "--max-candidates", "4", "--cost-model", "off", "--seed", "0", "--budget", "240", "--target", "scalar",
                "--db", str(db), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    # Which of two near-tied candidates leads, whether a new best ends the run without
    # progress (``since_best``) and how many were timed beside other work (new bests are
    # timed again quietly) depend on timing noise; every other count is exact.
    by_fp = {n.fingerprint: n for n in result.tree}
    cli_best = by_fp[out["best"]["fingerprint"]]
    # the CLI's best is the API's, or a near-tie of it in the API's own measurements
    assert (cli_best.fingerprint == result.best.fingerprint or within_noise(cli_best.timing, result.best.timing)
            or cli_best.seconds <= 1.1 * result.best.seconds)
    noisy = {"since_best", "timed_beside"}
    exact = {k for k in out["candidates"] if k not in noisy}
    assert {k: out["candidates"][k] for k in exact} == {k: getattr(result.search.counters, k) for k in exact}
    assert all(0 <= out["candidates"][k] <= out["candidates"]["evaluated"] for k in noisy)
    cli_tree = json.loads(run_cli("tree", str(out["search_id"]), "--db", str(db), "--json").stdout)
    measured = [n["fingerprint"] for n in cli_tree if n["status"] != "pending"]
    assert measured == [r.fingerprint for r in result.tree if r.status is not Status.PENDING]


def test_resume_continues_a_search_from_python(tmp_path: Path) -> None:
    db = tmp_path / "resume.db"  # a Path is as good as a string
    first = schedsearch.tune(str(MATMUL), SIZES, proc="sgemm", db=db, **dict(QUICK, max_candidates=2))
    assert first.search.counters.evaluated == 2
    with pytest.raises(schedsearch.SchedsearchError, match="already completed; add budget=SECONDS"):
        schedsearch.resume(first.search_id, db=db)
    again = schedsearch.resume(first.search_id, db=db, max_candidates=2)
    assert again.search_id == first.search_id and again.search.counters.evaluated == 4


def _run_script(script: Path, cwd: Path) -> str:
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=cwd)
    assert run.returncode == 0, run.stderr
    return run.stdout.removesuffix("\n")  # print() adds one newline
