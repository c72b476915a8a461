"""The project's own regression gate: replay the schedules committed for the examples."""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO, run_cli

SCHEDULES = REPO / "schedules"


def test_schedules_are_committed_for_the_examples() -> None:
    files = sorted(SCHEDULES.glob("*.json"))
    procs = {json.loads(f.read_text())["workload"]["proc"] for f in files}
    assert {"sgemm", "matvec", "conv1d", "conv1d_mc"} <= procs


@pytest.mark.slow
@pytest.mark.serial  # compares speeds: run alone (scripts/test.sh)
def test_committed_schedules_still_apply_verify_and_keep_their_speed(tmp_path) -> None:
    # Small sizes and a generous tolerance: this catches schedules that stop applying or
    # verifying, and large slowdowns, not noise.
    junit = tmp_path / "regress.xml"
    r = run_cli("regress", str(SCHEDULES), "--workloads", str(REPO / "examples"), "--tolerance", "0.6", "--junit", str(junit), "--json", timeout=600)
    report = json.loads(r.stdout)
    # a schedule for instructions this CPU lacks (conv1d_mc's is AVX-512) is skipped, not failed
    failed = [(x["name"], x["reason"]) for x in report["results"] if not x["passed"] and not x["skipped"]]
    assert r.returncode == 0 and not failed, failed
    assert len(report["results"]) == len(list(SCHEDULES.glob("*.json")))
    assert 'failures="0"' in junit.read_text()
