"""Replaying schedules: JSON round trips, errors naming the step, determinism across
processes, and the exported standalone script."""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from schedsearch.core import KERNEL_SYMBOL, Rewrite, RewriteKind, Schedule, Workload
from schedsearch.errors import ReplayError
from schedsearch.transforms.script import source_literal
from schedsearch.transforms import (
    build_proc,
    fingerprint,
    kernel_c,
    load_workload,
    proc_text,
    schedule_script,
    user_c,
)

ROOT = Path(__file__).resolve().parents[2]
MATMUL = ROOT / "examples" / "matmul.py"

TILE = Rewrite.make(RewriteKind.TILE, "i #0", inner="j #0", fa=8, fb=32, ao="io", ai="ii", bo="jo", bi="ji")
HOIST = Rewrite.make(RewriteKind.HOIST, "k #0", levels=2)
STAGE = Rewrite.make(
    RewriteKind.STAGE_MEM, "k #0", buffer="C", name="C_stage", window="C[8 * io:8 * io + 8, 32 * jo:32 * jo + 32]"
)
UNROLL = Rewrite.make(RewriteKind.UNROLL, "ii #0")
SPLIT_K = Rewrite.make(RewriteKind.SPLIT, "k #0", factor=16, outer="ko", inner="ki", tail="perfect")
SCHEDULE = Schedule((TILE, HOIST, STAGE, UNROLL, SPLIT_K, Rewrite.make(RewriteKind.SIMPLIFY, "proc")))


@pytest.fixture(scope="module")
def workload() -> Workload:
    return load_workload(MATMUL, "sgemm", {"M": 64, "N": 64, "K": 64})


def test_schedule_round_trips_through_json_and_replays_identically(workload):
    text = SCHEDULE.dumps()
    again = Schedule.loads(text)
    assert again == SCHEDULE
    assert Schedule.from_json(json.loads(json.dumps(SCHEDULE.to_json()))) == SCHEDULE
    assert kernel_c(build_proc(workload, again)) == kernel_c(build_proc(workload, SCHEDULE))


def test_replay_error_names_the_failing_step(workload):
    bad = Schedule((TILE, Rewrite.make(RewriteKind.UNROLL, "nosuchloop #0"), HOIST))
    with pytest.raises(ReplayError) as info:
        build_proc(workload, bad)
    assert info.value.step == 1
    assert "step 1 (unroll nosuchloop #0)" in str(info.value)
    assert info.value.reason and info.value.reason in str(info.value)


def test_replay_error_for_an_illegal_step(workload):
    # a perfect split by a factor that does not divide the loop: Exo refuses
    bad = Schedule((Rewrite.make(RewriteKind.SPLIT, "i #0", factor=7, outer="io", inner="ii", tail="perfect"),))
    with pytest.raises(ReplayError) as info:
        build_proc(workload, bad)
    assert info.value.step == 0
    assert "cannot perfectly divide" in info.value.reason


def test_user_c_differs_from_kernel_c_only_by_the_name(workload):
    proc = build_proc(workload, SCHEDULE)
    mine = user_c(workload, SCHEDULE)
    assert "void sgemm( void *ctxt" in mine
    assert re.sub(r"\bsgemm\b", KERNEL_SYMBOL, mine) == kernel_c(proc)
    # the same text as Exo's str(proc), apart from yapf's layout
    assert re.sub(r"\s", "", proc_text(proc)) == re.sub(r"\s", "", str(proc))


_CHILD = textwrap.dedent(
    """
    import json, sys
    from schedsearch.core import Schedule, Workload
    from schedsearch.transforms import build_proc, fingerprint, kernel_c
    data = json.load(open(sys.argv[1]))
    workload = Workload.from_json(data["workload"])
    schedule = Schedule.loads(data["schedule"])
    print(fingerprint(kernel_c(build_proc(workload, schedule))))
    """
)


def test_replay_is_byte_identical_across_processes_without_the_file(workload, tmp_path):
    # The child never sees the workload file: the path points nowhere, only the text travels.
    detached = dataclasses.replace(workload, path=str(tmp_path / "gone" / "matmul.py"))
    payload = tmp_path / "job.json"
    payload.write_text(json.dumps({"workload": detached.to_json(), "schedule": SCHEDULE.dumps()}))
    expected = fingerprint(kernel_c(build_proc(workload, SCHEDULE)))
    outputs = [
        subprocess.run(
            [sys.executable, "-c", _CHILD, str(payload)], capture_output=True, text=True, check=True, timeout=120
        ).stdout.strip()
        for _ in range(2)
    ]
    assert outputs == [expected, expected]


def test_schedule_script_reproduces_the_candidate_c(workload, tmp_path):
    script = schedule_script(workload, SCHEDULE, cc="gcc", cflags=("-O3", "-march=native"))
    assert not re.search(r"^(import|from) schedsearch", script, re.M)  # plain Exo calls only
    assert "partial_eval(M=64, N=64, K=64)" in script
    assert "CFLAGS = '-O3 -march=native'" in script and "TARGET = 'scalar'" in script
    assert f"WORKLOAD_SHA256 = {workload.source_sha256!r}" in script
    for op in ("divide_loop", "reorder_loops", "stage_mem", "set_memory", "unroll_loop", "simplify"):
        assert f"p = {op}(" in script
    # The workload is embedded: the script runs alone, from a folder without the workload.
    path = tmp_path / "alone" / "schedule.py"
    path.parent.mkdir()
    path.write_text(script)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, check=True, timeout=120, cwd=elsewhere
    )
    printed = result.stdout.removesuffix("\n")  # print() adds one newline
    exported = re.sub(r"\bsgemm\b", KERNEL_SYMBOL, printed)
    assert fingerprint(exported) == fingerprint(kernel_c(build_proc(workload, SCHEDULE)))


def test_an_edited_embedded_workload_is_refused(workload, tmp_path):
    script = schedule_script(workload, Schedule())
    path = tmp_path / "schedule.py"
    path.write_text(script.replace("C[i, j] += A[i, k] * B[k, j]", "C[i, j] += A[i, k] * B[k, j] * 2.0"))
    result = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode != 0 and "does not match its sha256" in result.stderr


def test_source_literal_reads_back_exactly():
    for text in ("plain\n", "a '\'\'' b", "x = '\\n'\n", 'both \'\'\' and """', "ends with \\"):
        literal = source_literal(text)
        assert ast.literal_eval(literal) == text, literal


def test_a_fault_in_lowering_is_never_counted_as_illegal(monkeypatch) -> None:
    """Exo's errors mean "illegal"; an error in our own lowering is a bug that surfaces."""
    from schedsearch.transforms import replay as replay_mod
    from schedsearch.transforms import try_apply

    workload = load_workload(MATMUL, "sgemm", {"M": 8, "N": 8, "K": 8})
    proc = build_proc(workload)
    broken = Rewrite.make(RewriteKind.SPLIT, "i #0", factor="eight", outer="io", inner="ii", tail="perfect")

    def bad_lower(rewrite):
        raise ValueError("a bug in a rule")

    monkeypatch.setattr(replay_mod, "lower", bad_lower)
    with pytest.raises(ValueError, match="a bug in a rule"):
        try_apply(proc, broken)
    monkeypatch.undo()
    # From a schedule file, the same kind of fault is a malformed step, named as such.
    with pytest.raises(ReplayError, match="step 0 `split i #0`: factor must be a positive integer"):
        build_proc(workload, Schedule((broken,)))


def test_an_assertion_inside_exo_declines_the_rewrite_and_one_of_ours_is_a_bug(workload, monkeypatch):
    """Exo 1.0.0 asserts where an analysis meets a case it does not handle: that rewrite is
    declined (the expansion goes on), in a replay too; an assertion outside Exo propagates."""
    from exo.rewrite.range_analysis import index_range_analysis
    from exo.stdlib import scheduling

    from schedsearch.transforms.replay import rejected_by_exo, replay, try_apply

    root, simplify = build_proc(workload), Rewrite.make(RewriteKind.SIMPLIFY, "proc")
    assert try_apply(root, simplify) is not None
    monkeypatch.setattr(scheduling, "simplify", lambda proc: index_range_analysis("not an index"))
    assert try_apply(root, simplify) is None
    with pytest.raises(ReplayError, match="does not apply"):
        replay(root, (simplify,))

    # a stand-in installed in Exo (exo_patches) that fails is a fault of ours, not Exo declining
    from types import SimpleNamespace

    from exo.backend import LoopIR_compiler
    from exo.core.LoopIR import LoopIR, T
    from exo.core.prelude import null_srcinfo

    from schedsearch.transforms import exo_patches

    # with the patches off (SCHEDSEARCH_EXO_PATCHES=off) the assertion is Exo's own
    patched = exo_patches.install() is exo_patches.State.INSTALLED
    with pytest.raises(AssertionError) as again:
        LoopIR_compiler.lift_to_cir(LoopIR.Const(1.0, T.f32, null_srcinfo()), SimpleNamespace(env={}))
    assert LoopIR_compiler.lift_to_cir.__module__.startswith("schedsearch.transforms.exo_patches") is patched
    assert rejected_by_exo(again.value) is not patched

    def ours(proc):
        raise AssertionError("a fault of our own")

    monkeypatch.setattr(scheduling, "simplify", ours)
    with pytest.raises(AssertionError, match="of our own") as info:
        try_apply(root, simplify)
    assert not rejected_by_exo(info.value)
