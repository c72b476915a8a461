"""Which loops ``vectorize`` can turn into vector instructions, and how: the plan of a step.

A loop over ``v`` vectorises when every buffer access in its body either walks the last
dimension with stride 1 in ``v`` (a vector load or store) or does not depend on ``v`` (a
broadcast), and every operation has an instruction on the target. Two shapes qualify:

- ``map``: every statement writes ``out[..., v]``. The body may hold inner loops (conv1d's
  ``for r``); the lane loop moves inside them, so an output accumulates in a register.
- ``reduce``: an innermost loop whose one statement reduces into a location that does not
  depend on ``v`` (matvec's ``y[i] += A[i, j] * x[j]`` over ``j``): the sum goes into a
  vector of partial sums, added up once after the loop.

The plan (``vector_steps.Plan``) is computed here from cursors when proposing; the rewrite
carries it as plain text (``Plan.args``), so lowering it needs no proc.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from exo.API_cursors import (
    AllocCursor,
    AssignCursor,
    BinaryOpCursor,
    ForCursor,
    IfCursor,
    LiteralCursor,
    ReadCursor,
    ReduceCursor,
)
from exo.core.memory import DRAM

from schedsearch.targets import Role, Target, VectorOps
from schedsearch.transforms.vector_steps import Bind, Plan
from schedsearch.transforms.walk import affine, fresh_name, literal

#: Binary operations and the instruction each becomes.
OP_ROLES = {"+": Role.ADD, "-": Role.SUB, "*": Role.MUL, "/": Role.DIV}
#: Each instruction's form in a masked tail. ZERO and ACC have none (a masked tail
#: broadcasts a zero constant instead of zeroing).
MASKED = {
    Role.LOAD: Role.MASKED_LOAD,
    Role.STORE: Role.MASKED_STORE,
    Role.BROADCAST: Role.MASKED_BROADCAST,
    Role.FMA: Role.MASKED_FMA,
    Role.ADD: Role.MASKED_ADD,
    Role.SUB: Role.MASKED_SUB,
    Role.MUL: Role.MASKED_MUL,
    Role.DIV: Role.MASKED_DIV,
}

Form = dict[str, int]  # an affine index expression (walk.affine)


class Unsupported(Exception):
    """The body cannot be vectorised on this target (caught here, never raised out)."""


def index_text(form: Form) -> str:
    """An affine form as Exo index text: ``{"x": 1, "": 2}`` -> ``x + 2``."""
    terms = [(v if c == 1 else f"{c} * {v}") for v, c in sorted(form.items()) if v and c]
    constant = form.get("", 0)
    text = " + ".join(terms)
    if constant:
        text = f"{text} + {constant}" if text else str(constant)
    return text or "0"


def _forms(cursor) -> list[Form]:
    forms = [affine(e) for e in cursor.idx()]
    if any(f is None for f in forms):
        raise Unsupported("index")
    return forms  # type: ignore[return-value]


@dataclass
class _Planner:
    """Walks one loop body, recording binds, instructions and the outputs it stages."""

    var: str  # the loop variable
    buffers: dict[str, tuple[str, bool]]  # name -> (dtype, lives in plain memory)
    ops: VectorOps
    masked: bool
    used: set[str]
    staged: dict[str, list[Form]] = field(default_factory=dict)
    roles: list[tuple[Role, Role | None]] = field(default_factory=list)
    pending: list[tuple[str, str, str]] = field(default_factory=list)  # the current leaf's binds
    fold: bool | None = None  # the current leaf is folded into a reduction (True: commuted first)
    contiguous: bool = False

    def fresh(self, base: str) -> str:
        name = fresh_name(self.used, base)
        self.used.add(name)
        return name

    def use(self, role: Role, tail: Role | None = None) -> None:
        self.roles.append((role, (tail or MASKED.get(role)) if self.masked else None))

    def buffer(self, name: str) -> None:
        dtype, plain = self.buffers.get(name, ("", False))
        if dtype != self.ops.dtype or not plain:
            raise Unsupported(name)

    def access(self, cursor) -> str:
        """``vec`` (stride 1 in the loop variable) or ``inv`` (independent of it)."""
        self.buffer(cursor.name())
        steps = [f.get(self.var, 0) for f in _forms(cursor)]
        if not any(steps):
            return "inv"
        if steps[-1] == 1 and not any(steps[:-1]):
            self.contiguous = True
            return "vec"
        raise Unsupported("stride")

    def bind(self, path: str, base: str, kind: str = "v") -> None:
        self.pending.append((path, self.fresh(base), kind))

    def const(self, path: str, operand: bool) -> None:
        """A literal or scalar: bound into a one-element buffer and broadcast from there (a
        masked tail loads it per lane instead), then bound as a vector if it is an operand."""
        self.bind(path, "c", "c")
        if operand:
            self.bind(path, "c_vec", "b")
        self.use(Role.BROADCAST, Role.MASKED_LOAD)

    def operand(self, expr, path: str) -> None:
        """Make the expression at ``path`` a vector, binding it where needed."""
        if isinstance(expr, ReadCursor) and expr.name() in self.staged:
            self.same_as_staged(expr)
        elif isinstance(expr, ReadCursor) and len(expr.idx()) == 0:
            self.buffer(expr.name())
            self.const(path, operand=True)
        elif isinstance(expr, ReadCursor):
            contiguous = self.access(expr) == "vec"
            self.bind(path, f"{expr.name()}_vec", "v" if contiguous else "b")
            self.use(Role.LOAD if contiguous else Role.BROADCAST)
        elif _is_number(expr):
            self.const(path, operand=True)
        elif isinstance(expr, BinaryOpCursor) and expr.op() in OP_ROLES:
            self.operand(expr.lhs(), path + "l")
            self.operand(expr.rhs(), path + "r")
            self.bind(path, "t_vec", "o")
            self.use(OP_ROLES[expr.op()])
        else:
            raise Unsupported("expression")

    def same_as_staged(self, read) -> None:
        if _forms(read) != self.staged[read.name()]:
            raise Unsupported("another element of an output")

    def reduction(self, rhs) -> None:
        """``acc += rhs``: one FMA for a product, else a vector add of the bound operand."""
        if isinstance(rhs, BinaryOpCursor) and rhs.op() == "*" and self.ops.has(Role.FMA):
            self.operand(rhs.lhs(), "l")
            self.operand(rhs.rhs(), "r")
            self.use(Role.FMA)
            return
        if isinstance(rhs, ReadCursor) and rhs.name() in self.staged:
            self.same_as_staged(rhs)
        else:
            self.operand(rhs, "")
        self.use(Role.ACC)

    def own(self, expr, stmt) -> bool:
        """Whether ``expr`` reads the very element ``stmt`` writes."""
        return isinstance(expr, ReadCursor) and expr.name() == stmt.name() and _forms(expr) == _forms(stmt)

    def leaf(self, stmt) -> None:
        """Plan one statement ``s = e`` / ``s += e`` of a map body (``s`` is staged)."""
        rhs = stmt.rhs()
        if isinstance(stmt, AssignCursor) and isinstance(rhs, BinaryOpCursor) and rhs.op() == "+":
            for side, other, commuted in ((rhs.lhs(), rhs.rhs(), False), (rhs.rhs(), rhs.lhs(), True)):
                if self.own(side, stmt) and not self.own(other, stmt):
                    self.fold = commuted  # s = s + e -> s += e
                    self.reduction(other)
                    return
        operands = [rhs.lhs(), rhs.rhs()] if isinstance(rhs, BinaryOpCursor) else [rhs]
        if any(self.own(e, stmt) for e in operands):
            raise Unsupported("an instruction writing an operand it reads")  # Exo refuses aliased arguments
        if isinstance(stmt, ReduceCursor):
            self.reduction(rhs)
        elif isinstance(rhs, ReadCursor) and rhs.name() not in self.staged and len(rhs.idx()):
            self.use(Role.LOAD if self.access(rhs) == "vec" else Role.BROADCAST)
        elif _is_number(rhs) and rhs.value() == 0 and not self.masked:
            self.use(Role.ZERO)
        elif _is_number(rhs) or (isinstance(rhs, ReadCursor) and rhs.name() not in self.staged):
            if isinstance(rhs, ReadCursor):
                self.buffer(rhs.name())
            self.const("", operand=False)
        elif isinstance(rhs, BinaryOpCursor) and rhs.op() in OP_ROLES:
            self.operand(rhs.lhs(), "l")
            self.operand(rhs.rhs(), "r")
            self.use(OP_ROLES[rhs.op()])
        else:
            raise Unsupported("a copy between vectors")

    def instructions(self) -> tuple[Role, ...]:
        """Every instruction used, unmasked ones first, each once; all must exist."""
        main = [r for r, _ in self.roles]
        tail = [m for _, m in self.roles if m is not None]
        if self.masked and len(tail) < len(main):
            raise Unsupported("an instruction without a masked form")
        roles = tuple(dict.fromkeys(main + tail))
        if not self.ops.has(*roles):
            raise Unsupported("an instruction the target lacks")
        return roles


def _is_number(expr) -> bool:
    return isinstance(expr, LiteralCursor) and type(expr.value()) in (int, float)


def _all_stmts(block):
    for stmt in block:
        yield stmt
        if isinstance(stmt, (ForCursor, IfCursor)):
            yield from _all_stmts(stmt.body())
        if isinstance(stmt, IfCursor) and stmt.orelse():
            yield from _all_stmts(stmt.orelse())


def buffers_of(proc) -> dict[str, tuple[str, bool]]:
    """Numeric buffers (arguments and allocations) -> (Exo type name, in plain memory).
    A name declared twice with different types or memories is left out."""
    found: dict[str, tuple[str, bool]] = {}
    clash: set[str] = set()
    decls = [a for a in proc.args() if a.type().is_numeric()]
    decls += [s for s in _all_stmts(proc.body()) if isinstance(s, AllocCursor)]
    for decl in decls:
        value = (decl.type().name.lower(), issubclass(decl.mem(), DRAM))
        if found.setdefault(decl.name(), value) != value:
            clash.add(decl.name())
    return {k: v for k, v in found.items() if k not in clash}


def _tree(block, path: tuple[int, ...], leaves: list, inner: set[str]) -> list:
    """The body as nested lists (a leaf is its path); every statement must be an assignment,
    a reduction or a loop with constant bounds."""
    out: list = []
    for index, stmt in enumerate(block):
        here = path + (index,)
        if isinstance(stmt, (AssignCursor, ReduceCursor)):
            leaves.append((here, stmt))
            out.append(here)
        elif isinstance(stmt, ForCursor) and literal(stmt.lo()) is not None and literal(stmt.hi()) is not None:
            inner.add(stmt.name())
            out.append(_tree(stmt.body(), here, leaves, inner))
        else:
            raise Unsupported("statement")
    return out


def _reads(stmt, name: str) -> bool:
    stack = [stmt.rhs()] if isinstance(stmt, (AssignCursor, ReduceCursor)) else []
    while stack:
        e = stack.pop()
        if isinstance(e, ReadCursor) and e.name() == name:
            return True
        if isinstance(e, BinaryOpCursor):
            stack += [e.lhs(), e.rhs()]
    return False


def needs_load(block, name: str) -> bool:
    """Whether Exo's ``stage_mem`` of one element of ``name`` around ``block`` loads it
    first. It does not when an assignment writes it before anything reads it (Exo visits
    each top-level statement's reads before its writes)."""
    read = shadow = False
    for top in block:
        stmts = list(_all_stmts([top]))
        read = read or any(_reads(s, name) for s in stmts)
        for s in stmts:
            if isinstance(s, ReduceCursor) and s.name() == name:
                read = True
            elif isinstance(s, AssignCursor) and s.name() == name and not read:
                shadow = True
    return read and not shadow


def _shape(tree: list, binds: dict[tuple[int, ...], str]) -> str:
    return "".join("(" + _shape(n, binds) + ")" if isinstance(n, list) else binds[n] + "s" for n in tree)


def plan_loop(
    proc, pattern: str, t: Target, masked: bool, used: set[str], buffers: dict[str, tuple[str, bool]] | None = None
) -> Plan | None:
    """The plan vectorising loop ``pattern`` on ``t`` (with a masked tail if ``masked``), or
    None. New buffer names avoid ``used``; ``buffers`` is ``buffers_of(proc)`` if known."""
    loop = proc.find_loop(pattern)
    leaves: list[tuple[tuple[int, ...], Any]] = []
    inner: set[str] = set()
    try:
        tree = _tree(loop.body(), (), leaves, inner)
        buffers = buffers_of(proc) if buffers is None else buffers
        ops = t.vector(buffers.get(leaves[0][1].name(), ("", False))[0]) if leaves else None
        if ops is None:
            return None
        planner = _Planner(loop.name(), buffers, ops, masked, set(used))
        first = leaves[0][1]
        if not any(f.get(planner.var, 0) for f in _forms(first)):
            if masked:
                return None  # a masked FMA leaves the other lanes undefined: partial sums would be lost
            return _reduce_plan(planner, tree, first)
        return _map_plan(planner, loop, tree, leaves, inner)
    except Unsupported:
        return None


def _bind_list(planned: list[tuple[tuple[int, ...], list]]) -> tuple[Bind, ...]:
    """Binds in the order they run: later leaves first, so that the statements a bind
    inserts before its leaf never move a leaf still to be bound."""
    binds = []
    for path, pending in reversed(planned):
        for j, (expr, name, kind) in enumerate(pending):
            binds.append(Bind(path[:-1] + (path[-1] + 2 * j,), expr, name, kind))  # an alloc and an assignment each
    return tuple(binds)


def _bound(planned: list[tuple[tuple[int, ...], list]]) -> dict[tuple[int, ...], str]:
    """Per leaf, the statements its binds insert before it: ``c`` sets a constant, ``b``
    broadcasts, ``s`` computes a vector."""
    return {path: "".join(kind if kind in ("b", "c") else "s" for _, _, kind in pending) for path, pending in planned}


def _map_plan(planner: _Planner, loop, tree: list, leaves: list, inner: set[str]) -> Plan:
    for _, stmt in leaves:
        forms = _forms(stmt)
        if planner.access(stmt) != "vec" or any(k in inner for f in forms for k in f):
            raise Unsupported("an output not indexed by the loop alone")
        if planner.staged.setdefault(stmt.name(), forms) != forms:
            raise Unsupported("two elements of one output")
    stages = []
    loads = 0
    for name, forms in planner.staged.items():
        stages.append((f"{name}[{', '.join(index_text(f) for f in forms)}]", planner.fresh(f"{name}_vec")))
        if needs_load(loop.body(), name):
            loads += 1
            planner.use(Role.LOAD)
        planner.use(Role.STORE)
    planned: list[tuple[tuple[int, ...], list[Any]]] = []
    folds: list[tuple[tuple[int, ...], bool]] = []
    for path, stmt in leaves:
        planner.pending, planner.fold = [], None
        planner.leaf(stmt)
        planned.append((path, planner.pending))
        if planner.fold is not None:
            folds.append((path, planner.fold))
    body = "s" * loads + _shape(tree, _bound(planned)) + "s" * len(stages)
    roles = planner.instructions()
    return Plan("map", planner.ops.dtype, _bind_list(planned), tuple(stages), body, roles, tuple(folds))


def _reduce_plan(planner: _Planner, tree: list, stmt) -> Plan:
    forms = _forms(stmt)
    if tree != [(0,)] or not isinstance(stmt, ReduceCursor) or _reads(stmt, stmt.name()):
        raise Unsupported("not a single reduction")
    planner.buffer(stmt.name())
    window = stmt.name() + (f"[{', '.join(index_text(f) for f in forms)}]" if forms else "")
    stages = ((window, planner.fresh(f"{stmt.name()}_acc")),)
    planner.reduction(stmt.rhs())
    if not planner.contiguous:
        raise Unsupported("nothing contiguous to load")
    # zero the partial sums; add them up with one instruction, or spill them to add in C
    planner.use(Role.ZERO)
    planner.use(Role.REDUCE if planner.ops.has(Role.REDUCE) else Role.STORE)
    planned: list[tuple[tuple[int, ...], list[Any]]] = [((0,), planner.pending)]
    body = _shape(tree, _bound(planned))
    return Plan("reduce", planner.ops.dtype, _bind_list(planned), stages, body, planner.instructions())
