"""``--float relaxed`` for real: candidates are compiled with the relaxed flags and really
compute differently (a division by 3 becomes a multiplication by its reciprocal), the
reference they are verified against stays strict, and the mode travels through the CLI, the
store, exports and ``regress``."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from schedsearch.core import BenchConfig, FloatMode, Status
from schedsearch.evaluate import evaluate_candidate, run_once
from schedsearch.evaluate.reference import reference_config
from schedsearch.targets import SCALAR, build_flags
from schedsearch.transforms import load_workload, root_candidate
from tests.conftest import EXAMPLES, run_cli

FAST = dict(warmup_seconds=0.001, min_sample_seconds=0.001, samples=3)


def _config(mode: FloatMode) -> BenchConfig:
    base = BenchConfig(**FAST)
    return dataclasses.replace(base, float_mode=mode, cflags=build_flags(base.cflags, SCALAR, mode))


def test_relaxed_candidates_divide_by_reciprocals_and_are_checked_against_strict_division(tmp_path: Path) -> None:
    workload = load_workload(str(EXAMPLES / "blur.py"), "blur2", {"H": 16, "W": 16})
    root = root_candidate(workload)
    strict, relaxed = _config(FloatMode.STRICT), _config(FloatMode.RELAXED)
    assert "-freciprocal-math" in relaxed.cflags
    assert "-freciprocal-math" not in reference_config(relaxed).cflags

    exact = np.frombuffer(run_once(workload, root, strict, tmp_path).outputs["out"], dtype=np.float32)
    fast = np.frombuffer(run_once(workload, root, relaxed, tmp_path).outputs["out"], dtype=np.float32)
    differ = np.count_nonzero(exact != fast)
    # The flag took effect: many results differ in their last bits, none by more than that.
    assert differ > exact.size // 10, differ
    np.testing.assert_allclose(fast, exact, rtol=0, atol=1e-6 * np.abs(exact).max())

    # The unscheduled proc measured under the relaxed mode is checked against strict outputs.
    m = evaluate_candidate(workload, root, root, relaxed, tmp_path)
    assert m.status is Status.OK, m.error


@pytest.mark.slow
@pytest.mark.serial  # regress compares the speedup with the recorded one: run alone
def test_the_float_mode_travels_through_run_show_export_and_regress(tmp_path: Path) -> None:
    db = tmp_path / "f.db"
    r = run_cli("run", str(EXAMPLES / "blur.py"), "--size", "H=16,W=16", "--workers", "0", "--float", "relaxed",
                "--max-candidates", "3", "--budget", "120", "--cost-model", "off",
                "--no-warm-start", "--db", str(db), "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    sid = str(out["search_id"])
    shown = run_cli("show", sid, "--db", str(db), cwd=tmp_path)
    assert shown.returncode == 0 and "relaxed float" in shown.stdout, shown.stderr  # the report is the result

    c_file = tmp_path / "best.c"
    assert run_cli("export", sid, "--db", str(db), "--format", "c", "-o", str(c_file), cwd=tmp_path).returncode == 0
    assert "-freciprocal-math" in c_file.read_text().splitlines()[0]
    sched = tmp_path / "best.json"
    e = run_cli("export", sid, "--db", str(db), "--format", "json", "-o", str(sched), cwd=tmp_path)
    assert e.returncode == 0, e.stderr
    assert json.loads(sched.read_text())["float_mode"] == "relaxed"

    # regress builds it as it was recorded (relaxed, and for the widest target as `run`'s
    # default auto), so the machine fingerprint it compares is the recorded one
    g = run_cli("regress", str(sched), "--workloads", str(EXAMPLES), "--json", cwd=tmp_path)
    assert g.returncode == 0, g.stdout + g.stderr
    case = json.loads(g.stdout)["results"][0]
    assert case["passed"] and not case["machine_differs"], case
