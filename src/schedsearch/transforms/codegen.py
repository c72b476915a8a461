"""C source, canonical fingerprints, FLOP counts and printouts of procs."""

from __future__ import annotations

import hashlib

from exo.API_cursors import (
    AllocCursor,
    AssignCursor,
    BinaryOpCursor,
    ExternFunctionCursor,
    ForCursor,
    IfCursor,
    PassCursor,
    ReduceCursor,
    UnaryMinusCursor,
    WindowStmtCursor,
)
from exo.stdlib.scheduling import rename

from schedsearch.core import KERNEL_SYMBOL
from schedsearch.transforms.walk import literal

_ARITHMETIC = frozenset({"+", "-", "*", "/"})


def kernel_c(proc) -> str:
    """C of ``proc`` with the function renamed to ``core.KERNEL_SYMBOL``.

    Two schedules that generate the same code get the same text, whatever the user's name.
    """
    return rename(proc, KERNEL_SYMBOL).c_code_str()


def fingerprint(c_source: str) -> str:
    """Hex sha256 of a (kernel-renamed) C source."""
    return hashlib.sha256(c_source.encode("utf-8")).hexdigest()


def proc_text(proc) -> str:
    """Exo's own printout of the proc, as ``str(proc)`` gives it but without the yapf pass.

    ``str(proc)`` reformats the text with yapf, which cost more than half of the time of
    expanding a node (about 0.1 s per child of a staged SGEMM); Exo's printer alone takes
    well under a millisecond. The private printer is used when present, str() otherwise.
    """
    try:
        from exo.core.LoopIR_pprint import PrintEnv, _print_proc
    except ImportError:  # a future Exo may move it: keep working, only slower
        return str(proc)
    return "\n".join(_print_proc(proc.INTERNAL_proc(), PrintEnv(), ""))


def _expr_ops(expr) -> int:
    if isinstance(expr, BinaryOpCursor):
        own = 1 if expr.op() in _ARITHMETIC else 0
        return own + _expr_ops(expr.lhs()) + _expr_ops(expr.rhs())
    if isinstance(expr, UnaryMinusCursor):
        return _expr_ops(expr.arg())
    if isinstance(expr, ExternFunctionCursor):
        return 1 + sum(_expr_ops(a) for a in expr.args())
    # reads (their index arithmetic is addressing, not work) and literals
    return 0


def _block_ops(block) -> int | None:
    total = 0
    for stmt in block:
        if isinstance(stmt, ForCursor):
            lo, hi = literal(stmt.lo()), literal(stmt.hi())
            inner = _block_ops(stmt.body())
            if lo is None or hi is None or inner is None:
                return None
            total += max(0, hi - lo) * inner
        elif isinstance(stmt, ReduceCursor):
            total += 1 + _expr_ops(stmt.rhs())
        elif isinstance(stmt, AssignCursor):
            total += _expr_ops(stmt.rhs())
        elif isinstance(stmt, (AllocCursor, PassCursor, WindowStmtCursor)):
            continue
        else:
            # guards, calls, config writes: the work done is not known statically
            return None
    return total


def count_flops(proc) -> int | None:
    """Arithmetic operations (+, -, *, / and the + of each ``+=``) per call, summed over
    constant-bound loops; None when a loop bound, guard or call makes it unknowable."""
    return _block_ops(proc.body())


def loop_nest_text(proc) -> str:
    """An indented outline of the loop nest, e.g. ``for i in 0..64`` lines with statements
    summarised as ``C[...] +=``."""
    lines: list[str] = []

    def bound(expr) -> str:
        value = literal(expr)
        return str(value) if value is not None else "?"

    def walk(block, depth: int) -> None:
        pad = "  " * depth
        for stmt in block:
            if isinstance(stmt, ForCursor):
                lines.append(f"{pad}for {stmt.name()} in {bound(stmt.lo())}..{bound(stmt.hi())}")
                walk(stmt.body(), depth + 1)
            elif isinstance(stmt, IfCursor):
                lines.append(f"{pad}if ...")
                walk(stmt.body(), depth + 1)
            elif isinstance(stmt, ReduceCursor):
                lines.append(f"{pad}{stmt.name()}[...] +=")
            elif isinstance(stmt, AssignCursor):
                lines.append(f"{pad}{stmt.name()}[...] =")
            elif isinstance(stmt, AllocCursor):
                lines.append(f"{pad}alloc {stmt.name()} @ {stmt.mem().name()}")
            else:
                lines.append(f"{pad}{type(stmt).__name__.removesuffix('Cursor').lower()}")

    walk(proc.body(), 0)
    return "\n".join(lines)
