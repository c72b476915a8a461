"""The project's own regression gate: replay the schedules committed for the examples."""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO, run_cli

SCHEDULES = REPO / "schedules"


def test_schedules_are_committed_for_the_examples() -> None:
    files = sorted(SCHEDULES.glob("*.json"))
    procs = {json.loads(f.read_text())["workload"]["proc"] for f in files}
    assert {"sgemm", "matmul_i8", "matvec", "conv1d", "blur2"} <= procs


@pytest.mark.slow
def test_committed_schedules_still_apply_verify_and_keep_their_speed(tmp_path) -> None:
    # Small sizes and a generous tolerance: this catches schedules that stop applying or
    # verifying, and large slowdowns, not noise.
    junit = tmp_path / "regress.xml"
    r = run_cli("regress", str(SCHEDULES), "--workloads", str(REPO / "examples"), "--tolerance", "0.6", "--junit", str(junit), "--json", timeout=600)
    report = json.loads(r.stdout)
    failed = [(x["name"], x["reason"]) for x in report["results"] if not x["passed"]]
    assert r.returncode == 0 and not failed, failed
    assert len(report["results"]) == len(list(SCHEDULES.glob("*.json")))
    assert 'failures="0"' in junit.read_text()
