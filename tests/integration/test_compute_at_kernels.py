"""compute_at candidates through real gcc: every strip height (with a remainder the strips
do not divide), the sliding window, a local line buffer and an argument written in place
compute the same outputs as the unscheduled proc."""

from __future__ import annotations

from pathlib import Path

import pytest

from schedsearch.core import BenchConfig, RewriteKind, Status
from schedsearch.evaluate import evaluate_candidate
from schedsearch.transforms import Expander, load_workload, root_candidate

BLUR = Path(__file__).resolve().parents[2] / "examples" / "blur.py"
CONFIG = BenchConfig(samples=3, min_sample_seconds=0.001, warmup_seconds=0.0)

#: A 5-tap vertical filter whose stages reduce over their taps.
STENCIL = '''
from __future__ import annotations
from exo import proc
from exo.libs.memories import DRAM

@proc
def rows5(H: size, W: size, inp: f32[H + 4, W + 4], w: f32[5], out: f32[H, W]):
    assert H >= 1
    assert W >= 1
    tmp: f32[H + 4, W] @ DRAM
    for y in seq(0, H + 4):
        for x in seq(0, W):
            tmp[y, x] = 0.0
            for k in seq(0, 5):
                tmp[y, x] += w[k] * inp[y, x + k]
    for y in seq(0, H):
        for x in seq(0, W):
            out[y, x] = 0.0
            for k in seq(0, 5):
                out[y, x] += w[k] * tmp[y + k, x]
'''


def compute_at_children(workload):
    root = root_candidate(workload)
    children = Expander(workload).expand(root).children
    return root, [c for c in children if c.schedule.steps[-1].kind is RewriteKind.COMPUTE_AT]


@pytest.mark.parametrize("proc", ["blur2", "blur2_local"])
@pytest.mark.parametrize("sizes", [{"H": 21, "W": 20}, {"H": 37, "W": 12}])
def test_every_compute_at_of_a_blur_matches_the_reference(proc, sizes, tmp_path):
    workload = load_workload(BLUR, proc, sizes)
    root, children = compute_at_children(workload)
    modes = {(c.schedule.steps[-1].arg("mode"), c.schedule.steps[-1].arg("rows")) for c in children}
    # H=21: 4- and 8-row strips leave 1 and 5 rows; H=37: 16-row strips leave 5
    assert ("slide", None) in modes and any(sizes["H"] % int(rows or 1) for _, rows in modes)
    for candidate in children:
        result = evaluate_candidate(workload, root, candidate, CONFIG, tmp_path)
        assert result.status is Status.OK, (candidate.schedule.steps[-1].describe(), result.error)
        assert result.max_error is not None and result.max_error <= 1e-5


def test_every_compute_at_of_a_stencil_with_reductions_matches_the_reference(tmp_path):
    path = tmp_path / "rows5.py"
    path.write_text(STENCIL)
    workload = load_workload(path, "rows5", {"H": 37, "W": 12})
    root, children = compute_at_children(workload)
    assert len(children) == 2  # the sliding window through a 5-row buffer, 16-row strips
    for candidate in children:
        result = evaluate_candidate(workload, root, candidate, CONFIG, tmp_path)
        assert result.status is Status.OK, (candidate.schedule.steps[-1].describe(), result.error)
        assert result.max_error is not None and result.max_error <= 1e-5


def test_a_sliding_window_inside_strips_matches_the_reference(tmp_path):
    workload = load_workload(BLUR, "blur2_local", {"H": 37, "W": 12})
    root, children = compute_at_children(workload)
    strips = next(c for c in children if c.schedule.steps[-1].arg("mode") == "strip")
    grandchildren = Expander(workload).expand(strips).children
    inner = [c for c in grandchildren if c.schedule.steps[-1].kind is RewriteKind.COMPUTE_AT]
    assert {c.schedule.steps[-1].arg("mode") for c in inner} >= {"slide"}
    for candidate in inner:
        result = evaluate_candidate(workload, root, candidate, CONFIG, tmp_path)
        assert result.status is Status.OK, ([s.describe() for s in candidate.schedule.steps], result.error)
