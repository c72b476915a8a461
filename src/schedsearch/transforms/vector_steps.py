"""The Exo scheduling calls ``vectorize`` lowers to, built from a plan of plain data.

Every function returns ``ExoCall`` data: the search runs the calls and ``schedsearch export``
prints them. Loops are named by pattern (``"xi #2"``: the third loop named ``xi`` in Exo's
pre-order); the functions order their calls so that the loops still to be handled keep
their numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

from schedsearch.targets import Role, VectorOps
from schedsearch.transforms.calls import ExoCall, Loop, Memory, Stmt, Within

#: Where a constant lives before it is broadcast: on the stack, not malloc'd per iteration.
STACK = Memory("DRAM_STACK")


@dataclass(frozen=True, slots=True)
class Bind:
    """One ``bind_expr``: the expression at ``expr`` ("" the right-hand side, then "l"/"r"
    into binary operations) of the statement at ``leaf`` (indices from the loop's body, as
    they are when this bind runs) becomes the new buffer ``name``. ``kind`` is ``v`` for a
    vector loaded from memory, ``b`` for a broadcast (the same in every lane), ``o`` for an
    operation's result, ``c`` for a one-element buffer holding a constant (a literal or a
    scalar) to broadcast."""

    leaf: tuple[int, ...]
    expr: str
    name: str
    kind: str = "v"

    @property
    def const(self) -> bool:
        return self.kind == "c"

    def encode(self) -> str:
        return f"{'.'.join(map(str, self.leaf))}/{self.expr}={self.name}" + (
            "" if self.kind == "v" else f":{self.kind}"
        )

    @staticmethod
    def decode(token: str) -> Bind:
        where, _, rest = token.partition("=")
        leaf, _, expr = where.partition("/")
        name, _, kind = rest.partition(":")
        return Bind(tuple(int(i) for i in leaf.split(".")), expr, name, kind or "v")


@dataclass(frozen=True, slots=True)
class Plan:
    """How to vectorise one loop, as plain data.

    ``stages`` are (window, buffer) pairs: each output element staged in a vector around the
    loop body (map), or the reduction target accumulated in a vector (reduce). ``body`` is
    the shape of the lane loop's body after binding and staging, allocations left out: ``s``
    a statement, ``b`` a broadcast, ``c`` one setting a constant, ``(...)`` a loop and its body. ``roles`` are
    the instructions used, masked ones included for a masked tail. ``folds`` are statements
    ``s = s + e`` (``s = e + s`` if marked commuted) first rewritten as ``s += e``, so that
    no instruction writes an operand it reads.
    """

    mode: str
    dtype: str
    binds: tuple[Bind, ...]
    stages: tuple[tuple[str, str], ...]
    body: str
    roles: tuple[Role, ...]
    folds: tuple[tuple[tuple[int, ...], bool], ...] = ()

    def args(self) -> dict[str, str]:
        """The plan as rewrite arguments (no ``#`` in them: they shape the result)."""
        args = {
            "mode": self.mode,
            "dtype": self.dtype,
            "binds": " ".join(b.encode() for b in self.binds),
            "stages": ";".join(f"{w}>{n}" for w, n in self.stages),
            "body": self.body,
            "ops": ",".join(r.value for r in self.roles),
        }
        if self.folds:
            args["folds"] = " ".join(
                ".".join(map(str, leaf)) + ("/c" if commuted else "") for leaf, commuted in self.folds
            )
        return args

    @staticmethod
    def from_args(arg) -> Plan:
        """The plan back from a rewrite's ``arg`` accessor."""
        binds = tuple(Bind.decode(t) for t in str(arg("binds", "")).split())
        stages = tuple((s.partition(">")[0], s.partition(">")[2]) for s in str(arg("stages", "")).split(";") if s)
        roles = tuple(Role(r) for r in str(arg("ops")).split(","))
        folds = tuple(
            (tuple(int(i) for i in t.partition("/")[0].split(".")), t.endswith("/c"))
            for t in str(arg("folds", "")).split()
        )
        return Plan(str(arg("mode")), str(arg("dtype")), binds, stages, str(arg("body")), roles, folds)


def binds(loop: str, plan: Plan) -> list[ExoCall]:
    """Fold ``s = s + e`` into ``s += e``, then bind every operand (and inner operation) to
    a buffer of its own, still scalar."""
    calls = []
    for leaf, commuted in plan.folds:
        if commuted:
            calls.append(ExoCall("commute_expr", ((Stmt(loop, leaf + ("rhs",)),),)))
        calls.append(ExoCall("fold_into_reduce", (Stmt(loop, leaf),)))
    for b in plan.binds:
        steps = b.leaf + ("rhs",) + tuple("lhs" if c == "l" else "rhs" for c in b.expr)
        calls.append(ExoCall("bind_expr", (Stmt(loop, steps), b.name)))
        if b.kind in ("o", "c"):  # an expression with a literal in it has Exo's generic type R
            calls.append(ExoCall("set_precision", (b.name, plan.dtype)))
    return calls


def masked_tail(cut: str | Stmt, lanes: int, outer: str, inner: str) -> list[ExoCall]:
    """The cut remainder loop as one full-width step whose lanes past the end are guarded:
    ``for vm in seq(0, lanes): if vm < rem: ...``, the form of Exo's masked instructions."""
    return [
        ExoCall("divide_loop", (cut, lanes, (outer, inner)), (("tail", "guard"),)),
        ExoCall("simplify"),
        ExoCall("unroll_loop", (outer,)),  # one iteration
        ExoCall("simplify"),
    ]


def _sum_lanes(outer: str, lane: str, n: int, window: str, buf: str, lanes: int, memory: Memory) -> list[ExoCall]:
    """Reassociate a sum into one partial sum per lane (Exo's stdlib ``parallelize_reduction``,
    step by step): the lane loop is ``lane #n``, the only child of ``outer``.

    ``for a: for b: T += e``  ->  ``buf[b] = 0 (each b); for a: for b: buf[b] += e; T += buf[b] (each b)``
    """
    return [
        ExoCall("reorder_loops", (Loop(outer),)),  # for b: for a: T += e
        ExoCall("stage_mem", (Loop(outer), window, buf), (("accum", True),)),
        ExoCall("expand_dim", (buf, lanes, lane)),
        ExoCall("set_memory", (buf, memory)),
        ExoCall("lift_alloc", (buf,)),
        ExoCall("fission", (Stmt(f"{lane} #{n}", (0, "after")),)),  # the zeroing ...
        ExoCall("fission", (Stmt(f"{lane} #{n + 1}", (0, "after")),)),  # ... the sums, and the final add
        ExoCall("reorder_loops", (Loop(f"{lane} #{n + 1}"),)),
    ]


def partial_sums(plan: Plan, names: list[str], lanes: int, accs: int, vector: Memory, ops: VectorOps) -> list[ExoCall]:
    """Accumulate the reduction in ``accs`` vectors of partial sums and add them into the
    target once. Several accumulators let consecutive FMAs overlap instead of each waiting
    for the previous one's result; at the end they are added lane by lane (``acc`` adds when
    the target has them, else in C after storing them), then across the lanes (one
    horizontal-add instruction, else in C).

    ``for vo: for vi: y += e``  ->  ``acc = 0; for vo: for vk: for vl: acc[vk, vl] += e; y += sum of acc``
    """
    vo, vi, vk, vl, total, spilled, part = names
    window, acc = plan.stages[0]
    calls = _sum_lanes(vo, vi, 0, window, acc, lanes * accs, vector)
    # each of the three vi loops -> accumulator vk, lane vl (the first vi left each time)
    calls += [ExoCall("divide_loop", (vi, lanes, (vk, vl)), (("perfect", True),))] * 3
    calls += [ExoCall("divide_dim", (acc, 0, lanes)), ExoCall("simplify")]
    # the total is a scalar: a horizontal add's result is a scalar parameter (it takes no
    # y[i]), and a local lets gcc keep the running total in a register
    calls.append(ExoCall("stage_mem", (Loop(f"{vk} #2"), window, total)))
    if Role.REDUCE in plan.roles:
        if accs > 1 and ops.has(Role.ACC):
            calls += _sum_lanes(f"{vk} #2", vl, 2, total, part, lanes, vector)
        return calls
    # no horizontal add: store the accumulators on the stack and add them up in C, lane by
    # lane first (gcc vectorises that), so only the last vector's lanes form a serial chain
    calls += [
        ExoCall("bind_expr", (Within(f"{vk} #2", f"{acc}[_]"), spilled)),
        ExoCall("expand_dim", (spilled, lanes, vl)),
        ExoCall("expand_dim", (spilled, accs, vk)),
        ExoCall("set_memory", (spilled, STACK)),
        ExoCall("lift_alloc", (spilled,), (("n_lifts", 2),)),
        ExoCall("fission", (Stmt(f"{vk} #2", (0, 0, "after")),), (("n_lifts", 2),)),
    ]
    return calls + (_sum_lanes(f"{vk} #3", vl, 3, total, part, lanes, STACK) if accs > 1 else [])


def lane_loops(
    plan: Plan, lane: str, k: int, lanes: int, vector: Memory, guarded: bool = False, shared: int = 0
) -> list[ExoCall]:
    """Make lane loop ``lane #k`` vector code: each bound scalar becomes a vector of
    ``lanes`` lifted out of it, then every statement gets a lane loop of its own, innermost:
    one instruction each. ``guarded``: the body sits in an ``if`` (a masked tail).
    ``shared``: lift the vectors out of that many more loops (a reduction's accumulators
    reuse them)."""
    loop = f"{lane} #{k}"
    allocs = [(n, 1, "s") for _, n in plan.stages] if plan.mode == "map" else []
    allocs += [(b.name, len(b.leaf), b.kind) for b in plan.binds]
    calls = []
    for buffer, depth, kind in allocs:
        alloc = Within(loop, f"{buffer} : _")
        if kind == "c" and not guarded:
            # one element, broadcast; a guarded tail cannot share it (Exo's fission check
            # rejects a shared scalar written under a lane-dependent guard), so it keeps a
            # copy per lane and loads it with a masked load instead
            calls += [ExoCall("expand_dim", (alloc, 1, "0")), ExoCall("set_memory", (alloc, STACK))]
        else:
            calls += [
                ExoCall("expand_dim", (alloc, lanes, lane)),
                ExoCall("set_memory", (alloc, STACK if kind == "c" else vector)),
            ]
        calls.append(ExoCall("lift_alloc", (alloc,), (("n_lifts", depth + guarded + shared),)))
    return calls + _split(lane, k, parse(plan.body), guarded)


def vector_groups(plan: Plan, lane: str, names: tuple[str, str], lanes: int) -> list[ExoCall]:
    """Cut lane loops of several vectors' width (left by ``lane_loops``) into vectors:
    ``for vi in seq(0, 2 * lanes)`` -> ``for vk in seq(0, 2): for vl in seq(0, lanes)``, and
    every vector buffer ``[2 * lanes]`` -> ``[2, lanes]``. Broadcasts are repeated per vector
    (Exo cannot prove a shared one may move across the inner loops); gcc merges the copies."""
    vectors = [n for _, n in plan.stages] + [b.name for b in plan.binds if b.kind != "c"]
    calls = [ExoCall("divide_loop", (lane, lanes, names), (("perfect", True),))] * vector_statements(plan)
    return calls + [ExoCall("divide_dim", (v, 0, lanes)) for v in vectors] + [ExoCall("simplify")]


def vector_statements(plan: Plan) -> int:
    """How many statements of the body ``lane_loops`` leaves in lane loops of their own
    (all but the constants, which it sets once)."""
    return sum(1 for ch in plan.body if ch in "sb")


def parse(shape: str) -> list:
    """``"s(sc)b"`` -> ``["s", ["s", "c"], "b"]``."""
    stack: list[list] = [[]]
    for ch in shape:
        if ch == "(":
            stack.append([])
        elif ch == ")":
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(ch)
    return stack[0]


def _split(lane: str, k: int, nodes: list, guarded: bool) -> list[ExoCall]:
    """Give each statement of lane loop ``lane #k`` its own lane loop, moved inside inner
    loops. Statements are split off one at a time from the front: Exo accepts splitting off
    a write of a shared constant only when it is alone (it does not depend on the lane).
    Inner loops are then handled from the last one back, so the lane loops still to be
    handled keep their numbers (``lane #k``, ``#k+1``, ... in Exo's pre-order)."""
    inside = (0,) if guarded else ()
    calls = [
        ExoCall("fission", (Stmt(f"{lane} #{k + j}", inside + (0, "after")),), (("n_lifts", 1 + guarded),))
        for j in range(len(nodes) - 1)
    ]
    for j in reversed(range(len(nodes))):
        here = f"{lane} #{k + j}"
        if nodes[j] == "c" and not guarded:
            # the constant is the same in every lane: set it once (a tail sets it per lane)
            calls.append(ExoCall("remove_loop", (Loop(here),)))
        elif isinstance(nodes[j], list):
            if guarded:  # the inner loop goes above the guard first: for r: if vm < n: ...
                calls.append(ExoCall("lift_scope", (Stmt(here, (0, 0)),)))
            calls.append(ExoCall("reorder_loops", (Loop(here),)))
            calls += _split(lane, k + j, nodes[j], guarded)
    return calls
