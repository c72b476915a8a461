"""Every instruction a target table names exists in Exo and does what its role says.

The semantics are read from the body of each ``@instr`` proc as Exo prints it (``for i in
seq(0, lanes): dst[i] += lhs[i] * rhs[i]`` is a lane-by-lane multiply-add), together with the
memory and shape of its arguments: a table that names the wrong form (a by-lane multiply, a
scalar broadcast, a load into the wrong memory) fails here, before any code is generated.
"""

from __future__ import annotations

import importlib
import re

import pytest

from schedsearch.targets import TARGETS, Role, Target, VectorOps

ARG = re.compile(r"(\w+): \[(\w+)\]\[(\w+)\] @ (\w+)")
LOOP = re.compile(r"^\s*for (\w+) in seq\(0, (\d+)\):$", re.M)

#: Role -> (statement pattern, memory of each named operand: "reg" or "mem").
#: ``{v}`` is the loop variable; operands are captured by name.
SEMANTICS: dict[Role, tuple[str, dict[str, str]]] = {
    Role.LOAD: (r"(?P<dst>\w+)\[{v}\] = (?P<src>\w+)\[{v}\]", {"dst": "reg", "src": "mem"}),
    Role.STORE: (r"(?P<dst>\w+)\[{v}\] = (?P<src>\w+)\[{v}\]", {"dst": "mem", "src": "reg"}),
    Role.BROADCAST: (r"(?P<dst>\w+)\[{v}\] = (?P<src>\w+)\[0\]", {"dst": "reg", "src": "mem"}),
    Role.FMA: (
        r"(?P<acc>\w+)\[{v}\] \+= (?P<x>\w+)\[{v}\] \* (?P<y>\w+)\[{v}\]", {"acc": "reg", "x": "reg", "y": "reg"}
    ),
    Role.ADD: (r"(?P<out>\w+)\[{v}\] = (?P<x>\w+)\[{v}\] \+ (?P<y>\w+)\[{v}\]", {"out": "reg", "x": "reg", "y": "reg"}),
    Role.MUL: (r"(?P<out>\w+)\[{v}\] = (?P<x>\w+)\[{v}\] \* (?P<y>\w+)\[{v}\]", {"out": "reg", "x": "reg", "y": "reg"}),
    Role.SUB: (r"(?P<out>\w+)\[{v}\] = (?P<x>\w+)\[{v}\] - (?P<y>\w+)\[{v}\]", {"out": "reg", "x": "reg", "y": "reg"}),
    Role.DIV: (r"(?P<out>\w+)\[{v}\] = (?P<x>\w+)\[{v}\] / (?P<y>\w+)\[{v}\]", {"out": "reg", "x": "reg", "y": "reg"}),
    Role.ACC: (r"(?P<acc>\w+)\[{v}\] \+= (?P<x>\w+)\[{v}\]", {"acc": "reg", "x": "reg"}),
    # a scalar (no window: not in ARG) plus every lane of a register
    Role.REDUCE: (r"\w+ \+= (?P<x>\w+)\[{v}\]", {"x": "reg"}),
    Role.ZERO: (r"(?P<dst>\w+)\[{v}\] = 0(?:\.0)?", {"dst": "reg"}),
}
#: Masked roles: the plain role's statement under a guard on the lane.
MASKED = {
    Role.MASKED_LOAD: Role.LOAD, Role.MASKED_STORE: Role.STORE, Role.MASKED_FMA: Role.FMA,
    Role.MASKED_BROADCAST: Role.BROADCAST, Role.MASKED_ADD: Role.ADD, Role.MASKED_SUB: Role.SUB,
    Role.MASKED_MUL: Role.MUL, Role.MASKED_DIV: Role.DIV,
}

ENTRIES = [
    (t, ops, role, name)
    for t in TARGETS
    for ops in t.ops
    for role, name in ops.instructions
]


def _instr(t: Target, name: str):
    assert t.module is not None
    instr = getattr(importlib.import_module(t.module), name, None)
    assert instr is not None, f"{t.module} has no {name}"
    return instr


def _body(text: str, role: Role) -> tuple[str, int, str]:
    """(loop variable, trip count, the loop's statement) of a one-loop instruction body."""
    loops = LOOP.findall(text)
    assert len(loops) == 1, text
    v, trip = loops[0]
    lines = [ln.strip() for ln in text.split(f"for {v} in seq(0, {trip}):", 1)[1].strip().splitlines()]
    if role in MASKED:
        assert re.fullmatch(rf"if {v} < \w+:", lines[0]), f"not guarded by the lane: {text}"
        lines = lines[1:]
    assert len(lines) == 1, text
    return v, int(trip), lines[0]


@pytest.mark.parametrize(
    "t,ops,role,name", ENTRIES, ids=[f"{t.name.value}-{ops.dtype}-{role.value}" for t, ops, role, _ in ENTRIES]
)
def test_a_table_instruction_plays_its_role(t: Target, ops: VectorOps, role: Role, name: str):
    text = str(_instr(t, name))
    args = {a: (dtype, size, memory) for a, dtype, size, memory in ARG.findall(text.split("#", 1)[0])}
    v, trip, stmt = _body(text, role)
    assert trip == ops.lanes, f"{name} works on {trip} lanes, the table says {ops.lanes}"
    pattern, memories = SEMANTICS[MASKED.get(role, role)]
    found = re.fullmatch(pattern.format(v=v), stmt)
    assert found, f"{name} is `{stmt}`, not a {role.value}"
    for operand, where in memories.items():
        dtype, size, memory = args[found[operand]]
        assert dtype == ops.dtype, f"{name}: {operand} is {dtype}"
        assert (memory == t.memory) == (where == "reg"), f"{name}: {operand} lives in {memory}"
        if where == "reg":
            assert size == str(ops.lanes), f"{name}: {operand} has {size} lanes"
    if role in (Role.BROADCAST, Role.MASKED_BROADCAST):
        # one element in memory, as a [T][1] window: the register tile passes A[i, k:k+1]
        assert args[found["src"]][1] == "1", f"{name} does not read a one-element window"
    if role is Role.FMA:
        assert found["acc"] not in (found["x"], found["y"]), f"{name} does not accumulate into its own operand"
