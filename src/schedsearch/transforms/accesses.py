"""Which buffers a block of statements reads and writes, with affine index forms.

``compute_at`` needs to know, for a producer and a consumer loop, every write and every
read of every buffer: which rows a producer iteration writes, which rows a consumer
iteration reads, and that nothing else touches them. Anything this walker does not
understand (a call, a window statement, a window expression) makes it give up (None), so
a rule built on it stays conservative.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from exo.API_cursors import (
    AllocCursor,
    AssignCursor,
    BinaryOpCursor,
    ExternFunctionCursor,
    ForCursor,
    IfCursor,
    LiteralCursor,
    PassCursor,
    ReadConfigCursor,
    ReadCursor,
    ReduceCursor,
    UnaryMinusCursor,
)

from schedsearch.transforms.walk import affine, literal

#: Loop variable -> (first, last) value of the loops around an access inside the block;
#: None when a bound is not a constant.
Ranges = dict[str, tuple[int, int] | None]


@dataclass(frozen=True, slots=True)
class Access:
    """One read or write of ``name``: the affine form of each index (None: not affine) and
    the ranges of the block's loops around it."""

    name: str
    index: tuple[dict[str, int] | None, ...]
    ranges: Ranges


Accesses = list[Access]


@dataclass(slots=True)
class BodyAccesses:
    """The tensor reads and writes of a block; ``reduces`` is set by any ``+=``."""

    writes: Accesses = field(default_factory=list)
    reads: Accesses = field(default_factory=list)
    reduces: bool = False

    @property
    def write_names(self) -> set[str]:
        return {a.name for a in self.writes}

    @property
    def read_names(self) -> set[str]:
        return {a.name for a in self.reads}


def _expr(expr, out: Accesses, ranges: Ranges) -> bool:
    if isinstance(expr, ReadCursor):
        # a read with no indices is a scalar or a loop variable: not a tensor access, but a
        # scalar buffer still counts (its name is what matters to the callers)
        out.append(Access(expr.name(), tuple(affine(e) for e in expr.idx()), ranges))
        return True
    if isinstance(expr, (LiteralCursor, ReadConfigCursor)):
        return True
    if isinstance(expr, BinaryOpCursor):
        return _expr(expr.lhs(), out, ranges) and _expr(expr.rhs(), out, ranges)
    if isinstance(expr, UnaryMinusCursor):
        return _expr(expr.arg(), out, ranges)
    if isinstance(expr, ExternFunctionCursor):
        return all(_expr(arg, out, ranges) for arg in expr.args())
    return False  # windows, strides: not followed


def _block(stmts: Iterable, acc: BodyAccesses, ranges: Ranges) -> bool:
    for stmt in stmts:
        if isinstance(stmt, ForCursor):
            lo, hi = literal(stmt.lo()), literal(stmt.hi())
            span = (lo, hi - 1) if lo is not None and hi is not None and hi > lo else None
            if not _block(stmt.body(), acc, {**ranges, stmt.name(): span}):
                return False
        elif isinstance(stmt, IfCursor):
            if not _block(stmt.body(), acc, ranges) or (stmt.orelse() and not _block(stmt.orelse(), acc, ranges)):
                return False
        elif isinstance(stmt, (AssignCursor, ReduceCursor)):
            acc.writes.append(Access(stmt.name(), tuple(affine(e) for e in stmt.idx()), ranges))
            acc.reduces = acc.reduces or isinstance(stmt, ReduceCursor)
            if not _expr(stmt.rhs(), acc.reads, ranges):
                return False
        elif not isinstance(stmt, (AllocCursor, PassCursor)):
            return False  # calls, window statements, config writes: effects not modelled
    return True


def accesses(stmts: Iterable) -> BodyAccesses | None:
    """Every tensor read and write in ``stmts`` (recursively), or None when some statement
    or expression is not understood."""
    acc = BodyAccesses()
    return acc if _block(stmts, acc, {}) else None


def uses_outside(stmt, buffer: str) -> bool:
    """Whether a statement after ``stmt`` in its block may touch ``buffer`` (True when one
    is not understood)."""
    rest = []
    nxt = stmt.next()
    while nxt:  # an InvalidCursor (falsy) after the last statement
        rest.append(nxt)
        nxt = nxt.next()
    acc = accesses(rest)
    return acc is None or buffer in acc.read_names | acc.write_names
