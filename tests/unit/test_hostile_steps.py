"""Steps read from a database or a schedule file with hostile text in any string: replaying
one fails with ``ReplayError`` (one sentence) or applies, and an exported script either is
refused as malformed or keeps the text as data (real Exo)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from schedsearch.core import Rewrite, RewriteKind, Schedule, Workload
from schedsearch.errors import ReplayError
from schedsearch.transforms import build_proc, load_workload, propose, schedule_script
from schedsearch.transforms.replay import MALFORMED

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = ('x"""\n__import__("os").system("touch /tmp/never")\n#*/ /*', "j #0\\\n__import__('os')")


@pytest.fixture(scope="module")
def workload() -> Workload:
    return load_workload(ROOT / "examples" / "matmul.py", "sgemm", {"M": 16, "N": 16, "K": 16})


def steps(workload: Workload) -> list[Rewrite]:
    """One proposal of each kind at the root, and the steps of a hand-written schedule."""
    firsts: dict[RewriteKind, Rewrite] = {}
    for step in propose(build_proc(workload)):
        firsts.setdefault(step.kind, step)
    stage = Rewrite.make(RewriteKind.STAGE_MEM, "k #0", buffer="C", name="C_stage", window="C[i, j]")
    return [*firsts.values(), stage]


def variants(step: Rewrite) -> list[Rewrite]:
    """``step`` with hostile text in its target, then in each of its string arguments."""
    out = [Rewrite(step.kind, text, step.args) for text in HOSTILE]
    for i, (name, value) in enumerate(step.args):
        if isinstance(value, str) and not isinstance(value, bool):
            out += [Rewrite(step.kind, step.target, (*step.args[:i], (name, text), *step.args[i + 1:]))
                    for text in HOSTILE]
    return out


def test_hostile_strings_in_any_step_are_refused_or_stay_data(workload: Workload) -> None:
    tried = 0
    for step in steps(workload):
        for bad in variants(step):
            tried += 1
            try:
                build_proc(workload, Schedule((bad,)))
            except ReplayError as e:
                assert str(e).startswith("step 0 ")
            try:
                script = schedule_script(workload, Schedule((bad,)))
            except MALFORMED:
                continue
            tree = ast.parse(script)
            assert not any(isinstance(n, ast.Name) and n.id == "__import__" for n in ast.walk(tree)), bad
    assert tried > 20
