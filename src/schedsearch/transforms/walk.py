"""Cursor walkers: the loops, nests and writes of a proc, described by stable patterns.

Exo 1.0.0 has no AST query API; everything here walks ``proc.body()`` with cursors. The
results are plain records holding Exo pattern strings (``"j #1"``: the second loop named
``j`` in pre-order, the order Exo's ``find`` uses) — never cursors, which are only valid
for the proc they came from. ``proc.find_loop(pattern)`` turns a pattern back into a cursor.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from exo.API_cursors import (
    AllocCursor,
    AssignCursor,
    BinaryOpCursor,
    CallCursor,
    ForCursor,
    IfCursor,
    LiteralCursor,
    ReadCursor,
    ReduceCursor,
    UnaryMinusCursor,
    WindowExprCursor,
    WindowStmtCursor,
)


@dataclass(frozen=True, slots=True)
class LoopInfo:
    """One loop of a proc.

    ``pattern`` finds it again (``"name #n"``); ``lo``/``hi`` are set when the bounds are
    literals; ``chain`` counts the enclosing loops that form a perfect nest down to this one
    (each one's body is exactly the next loop); ``only_child`` names the loop that is this
    loop's whole body, if any; ``statements`` counts every statement inside the body.
    """

    name: str
    pattern: str
    depth: int  # number of enclosing loops
    lo: int | None
    hi: int | None
    chain: int
    only_child: str | None
    statements: int
    child: str | None  # pattern of the only_child loop
    next_sibling: str | None  # pattern of the loop right after this one in the same block

    @property
    def trip(self) -> int | None:
        """Constant trip count, or None when the bounds are not literals."""
        if self.lo is None or self.hi is None:
            return None
        return max(0, self.hi - self.lo)


@dataclass(frozen=True, slots=True)
class WriteInfo:
    """An assignment (``=``) or reduction (``+=``) statement and the loops around it."""

    buffer: str
    reduce: bool
    loops: tuple[str, ...]  # patterns of enclosing loops, outermost first


_FOLD = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a // b if b else None,
    "%": lambda a, b: a % b if b else None,
}


def literal(expr) -> int | None:
    """The value of an integer constant expression cursor (``64``, ``64 + 2``), else None.

    Binding sizes with partial_eval leaves expressions such as ``1024 + 8`` in shapes and
    loop bounds; folding them lets those be allocated, split and unrolled like literals.
    """
    if isinstance(expr, LiteralCursor):
        value = expr.value()
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        return None
    if isinstance(expr, BinaryOpCursor) and expr.op() in _FOLD:
        lhs, rhs = literal(expr.lhs()), literal(expr.rhs())
        if lhs is not None and rhs is not None:
            return _FOLD[expr.op()](lhs, rhs)
    return None


def count_statements(block) -> int:
    """Statements in a block, counted recursively (a loop counts itself and its body)."""
    total = 0
    for stmt in block:
        total += 1
        if isinstance(stmt, ForCursor):
            total += count_statements(stmt.body())
        elif isinstance(stmt, IfCursor):
            total += count_statements(stmt.body())
            orelse = stmt.orelse()
            if orelse:
                total += count_statements(orelse)
    return total


def _children(stmt) -> Iterator:
    if isinstance(stmt, ForCursor):
        yield from stmt.body()
    elif isinstance(stmt, IfCursor):
        yield from stmt.body()
        orelse = stmt.orelse()
        if orelse:
            yield from orelse


def statements(proc) -> Iterator[tuple[Any, tuple[tuple[Any, str], ...]]]:  # Exo cursors
    """Every statement in pre-order with its enclosing loops as ``(ForCursor, pattern)``."""
    counts: dict[str, int] = {}

    def walk(block, enclosing: tuple) -> Iterator[tuple[object, tuple]]:
        for stmt in block:
            yield stmt, enclosing
            inner = enclosing
            if isinstance(stmt, ForCursor):
                n = counts.get(stmt.name(), 0)
                counts[stmt.name()] = n + 1
                inner = enclosing + ((stmt, f"{stmt.name()} #{n}"),)
            yield from walk(list(_children(stmt)), inner)

    yield from walk(proc.body(), ())


def loops(proc) -> list[LoopInfo]:
    """Every loop of the proc in pre-order."""
    found = [(stmt, enc) for stmt, enc in statements(proc) if isinstance(stmt, ForCursor)]
    # "name #n" numbers loops of one name in pre-order, the order of Exo's own find.
    counts: dict[str, int] = {}
    patterns = []
    for stmt, _ in found:
        n = counts.get(stmt.name(), 0)
        counts[stmt.name()] = n + 1
        patterns.append(f"{stmt.name()} #{n}")
    result = []
    for index, (stmt, enclosing) in enumerate(found):
        chain = 0
        child = stmt
        for parent, _ in reversed(enclosing):
            if len(parent.body()) != 1 or parent.body()[0] != child:
                break
            chain += 1
            child = parent
        body = stmt.body()
        only_child = body[0].name() if len(body) == 1 and isinstance(body[0], ForCursor) else None
        nxt = _next_stmt(stmt)
        next_pattern = None
        if isinstance(nxt, ForCursor):
            next_pattern = next((patterns[i] for i, (s, _) in enumerate(found) if s == nxt), None)
        result.append(
            LoopInfo(
                name=stmt.name(),
                pattern=patterns[index],
                depth=len(enclosing),
                lo=literal(stmt.lo()),
                hi=literal(stmt.hi()),
                chain=chain,
                only_child=only_child,
                statements=count_statements(body),
                next_sibling=next_pattern,
                child=patterns[index + 1] if only_child else None,
            )
        )
    return result


def loop_work(proc) -> tuple[dict[str, int | None], int | None]:
    """Executed leaf statements inside each loop (by pattern), and in the whole proc.

    A leaf statement (not a loop or an ``if``) counts once per iteration of every loop
    around it; ``None`` where a trip count is not a literal (the work cannot be known).
    """
    work: dict[str, int | None] = {}
    total: int | None = 0
    for stmt, enclosing in statements(proc):
        if isinstance(stmt, (ForCursor, IfCursor)):
            continue
        count: int | None = 1
        for loop, _ in enclosing:
            lo, hi = literal(loop.lo()), literal(loop.hi())
            count = None if count is None or lo is None or hi is None else count * max(0, hi - lo)
        total = None if total is None or count is None else total + count
        for _, pattern in enclosing:
            before = work.get(pattern, 0)
            work[pattern] = None if before is None or count is None else before + count
    return work, total


def _next_stmt(stmt):
    nxt = stmt.next()  # an InvalidCursor (falsy) after the last statement of a block
    return nxt if nxt else None


def writes(proc) -> list[WriteInfo]:
    """Every assignment and reduction in pre-order, with its enclosing loop patterns."""
    return [
        WriteInfo(stmt.name(), isinstance(stmt, ReduceCursor), tuple(p for _, p in enclosing))
        for stmt, enclosing in statements(proc)
        if isinstance(stmt, (AssignCursor, ReduceCursor))
    ]


def written_buffers(proc) -> set[str]:
    """Names of buffers the proc assigns or reduces into, passes to a call parameter the
    callee writes, or aliases with a window statement (conservatively treated as written)."""
    names: set[str] = set()
    for stmt, _ in statements(proc):
        if isinstance(stmt, (AssignCursor, ReduceCursor)):
            names.add(stmt.name())
        elif isinstance(stmt, CallCursor):
            callee = stmt.subproc()
            written = written_buffers(callee)
            for arg, param in zip(stmt.args(), callee.args(), strict=False):
                if param.name() in written:
                    names.update(_read_names(arg))
        elif isinstance(stmt, WindowStmtCursor):
            names.update(_read_names(stmt.winexpr()))
    return names


def _read_names(expr) -> set[str]:
    if isinstance(expr, (ReadCursor, WindowExprCursor)):
        return {expr.name()}
    return set()


def all_names(proc) -> set[str]:
    """Every loop variable, allocation and argument name in the proc (for fresh names)."""
    names = {arg.name() for arg in proc.args()}
    for stmt, _ in statements(proc):
        if isinstance(stmt, (ForCursor, AllocCursor)):
            names.add(stmt.name())
    return names


def fresh_name(used: set[str], base: str) -> str:
    """``base`` if unused, else ``base2``, ``base3``, ... (deterministic)."""
    if base not in used:
        return base
    n = 2
    while f"{base}{n}" in used:
        n += 1
    return f"{base}{n}"


def affine(expr) -> dict[str, int] | None:
    """An index expression as ``{var: coefficient, "": constant}``, or None if not affine."""
    value = literal(expr)
    if value is not None:
        return {"": value}
    if isinstance(expr, ReadCursor):
        if len(expr.idx()) != 0:
            return None
        return {expr.name(): 1}
    if isinstance(expr, UnaryMinusCursor):
        inner = affine(expr.arg())
        return None if inner is None else {k: -v for k, v in inner.items()}
    if isinstance(expr, BinaryOpCursor):
        lhs, rhs = affine(expr.lhs()), affine(expr.rhs())
        if lhs is None or rhs is None:
            return None
        op = expr.op()
        if op in ("+", "-"):
            sign = 1 if op == "+" else -1
            out = dict(lhs)
            for k, v in rhs.items():
                out[k] = out.get(k, 0) + sign * v
            return {k: v for k, v in out.items() if v != 0 or k == ""}
        if op == "*":
            if set(lhs) == {""}:
                lhs, rhs = rhs, lhs
            if set(rhs) != {""}:
                return None
            factor = rhs[""]
            return {k: v * factor for k, v in lhs.items() if v * factor != 0 or k == ""}
    return None
