"""Where staging a window of an argument into a local buffer is worth proposing, and its window.

For a loop L whose body reduces into an argument X at indices that do not depend on L's
variable, every execution of L touches one fixed window of X. Staging that window into a
small ``DRAM_STACK`` buffer around L lets the C compiler keep the accumulators in registers
instead of reloading and storing X on every iteration of L (Exo's C has no ``restrict``).

Reads work the same way: a read-only argument read by L's body at indices that do not
depend on L's variable is re-read, window by window, on every iteration of L. Copying
("packing") that window once into a contiguous buffer makes those re-reads unit-stride
and free of cache-set conflicts (``read_windows_for_loop``).
"""

from __future__ import annotations

from dataclasses import dataclass

from exo.API_cursors import (
    AssignCursor,
    BinaryOpCursor,
    CallCursor,
    ForCursor,
    IfCursor,
    ReadCursor,
    ReduceCursor,
    UnaryMinusCursor,
    WindowExprCursor,
)

from schedsearch.transforms.walk import affine, literal

#: Largest window (in elements) proposed for staging: it must fit comfortably on the stack
#: and, ideally, in registers or L1.
MAX_WINDOW_ELEMENTS = 4096
#: A one-element window is only worth staging around a loop at least this long.
MIN_POINT_TRIP = 8


@dataclass(frozen=True, slots=True)
class StageWindow:
    """The window of ``buffer`` touched by one execution of a loop."""

    buffer: str
    window: str  # Exo window expression, e.g. "C[8 * io:8 * io + 8, 32 * jo:32 * jo + 32]"
    elements: int


def _reads(expr, env: dict[str, tuple[int, int]], out: list) -> None:
    """Collect (buffer, affine indices, env) of every tensor read in an expression."""
    if isinstance(expr, ReadCursor):
        if len(expr.idx()) > 0:
            out.append((expr.name(), [affine(e) for e in expr.idx()], env))
    elif isinstance(expr, BinaryOpCursor):
        _reads(expr.lhs(), env, out)
        _reads(expr.rhs(), env, out)
    elif isinstance(expr, UnaryMinusCursor):
        _reads(expr.arg(), env, out)


def _accesses(block, env: dict[str, tuple[int, int]], out: list, ok: list, reads: bool = False) -> None:
    """Collect (buffer, affine indices, env) of every reduction in block (every read
    when ``reads``)."""
    for stmt in block:
        if isinstance(stmt, ForCursor):
            lo, hi = literal(stmt.lo()), literal(stmt.hi())
            inner = dict(env)
            if lo is None or hi is None or hi <= lo:
                ok[0] = False
                return
            inner[stmt.name()] = (lo, hi - 1)
            _accesses(stmt.body(), inner, out, ok, reads)
        elif isinstance(stmt, IfCursor):
            # guarded bodies still touch a window we could bound, but keep it simple: skip
            ok[0] = False
            return
        elif reads and isinstance(stmt, (ReduceCursor, AssignCursor)):
            _reads(stmt.rhs(), env, out)
        elif reads and isinstance(stmt, CallCursor):
            for arg in stmt.args():
                if isinstance(arg, WindowExprCursor) and not _window_read(arg, env, out):
                    ok[0] = False
                    return
        elif not reads and isinstance(stmt, ReduceCursor):
            forms = [affine(e) for e in stmt.idx()]
            out.append((stmt.name(), forms, env))


def _window_read(window, env: dict[str, tuple[int, int]], out: list) -> bool:
    """Record a window passed to a call (an instruction's operand) as a read; an interval
    ``lo:lo + w`` becomes ``lo + t`` for a fresh variable ``t`` in ``[0, w)``. False when an
    interval's width is not constant."""
    forms: list[dict[str, int] | None] = []
    inner = dict(env)
    for n, dim in enumerate(window.idx()):
        if isinstance(dim, tuple):  # an interval (lo, hi); a point is one expression
            lo, hi = affine(dim[0]), affine(dim[1])
            if lo is None or hi is None:
                return False
            width = {k: hi.get(k, 0) - lo.get(k, 0) for k in set(lo) | set(hi)}
            if any(v for k, v in width.items() if k) or width.get("", 0) < 1:
                return False
            lane = f"${len(out)}_{n}"  # cannot clash with an Exo name
            inner[lane] = (0, width[""] - 1)
            forms.append({**lo, lane: 1})
        else:
            forms.append(affine(dim))
    out.append((window.name(), forms, inner))
    return True


def _term_text(terms: dict[str, int]) -> str:
    parts = []
    for var in sorted(terms):
        coef = terms[var]
        parts.append(var if coef == 1 else f"{coef} * {var}")
    return " + ".join(parts)


def _bound_text(outer: dict[str, int], offset: int) -> str:
    text = _term_text(outer)
    if not text:
        return str(offset)
    if offset > 0:
        return f"{text} + {offset}"
    if offset < 0:
        return f"{text} - {-offset}"
    return text


def _accesses_by_buffer(
    loop: ForCursor, buffers: set[str], reads: bool, inclusive: bool = False
) -> dict[str, list] | None:
    """Affine accesses (writes, or reads with ``reads``) inside ``loop`` to each of
    ``buffers``; None when some access is not affine (no window can be derived). With
    ``inclusive`` the loop's own variable ranges too (the accesses of a whole run of it)."""
    found: list = []
    ok = [True]
    _accesses([loop] if inclusive else loop.body(), {}, found, ok, reads=reads)
    if not ok[0]:
        return None
    by_buffer: dict[str, list] = {}
    for name, forms, env in found:
        if name in buffers:
            by_buffer.setdefault(name, []).append((forms, env))
    return by_buffer


def windows_for_loop(loop: ForCursor, buffers: set[str]) -> list[StageWindow]:
    """Windows of ``buffers`` (argument tensors) one execution of ``loop`` reduces into."""
    var = loop.name()
    by_buffer = _accesses_by_buffer(loop, buffers, reads=False)
    if by_buffer is None:
        return []
    trip = None
    lo, hi = literal(loop.lo()), literal(loop.hi())
    if lo is not None and hi is not None:
        trip = hi - lo
    result = []
    for name in sorted(by_buffer):
        window = _window(name, var, by_buffer[name])
        if window is None:
            continue
        if window.elements > MAX_WINDOW_ELEMENTS:
            continue
        if window.elements == 1 and (trip is None or trip < MIN_POINT_TRIP):
            continue
        result.append(window)
    return result


def hoisted_windows_for_loop(loop: ForCursor, buffers: set[str], levels: int) -> list[StageWindow]:
    """Windows of ``buffers`` that ``loop`` would reduce into once moved outward over the
    ``levels`` loops enclosing it (a perfect nest): the crossed loops' variables then range
    inside it. Windows of one element, or of more than ``MAX_WINDOW_ELEMENTS``, are left out."""
    outer = loop
    for _ in range(levels):
        outer = outer.parent()
        if not isinstance(outer, ForCursor):
            return []
    # the accesses as seen from outside the outermost crossed loop, which is then in scope
    by_buffer = _accesses_by_buffer(outer, buffers, reads=False, inclusive=True)
    if by_buffer is None:
        return []
    result = []
    for name in sorted(by_buffer):
        window = _window(name, loop.name(), by_buffer[name])
        if window is not None and 1 < window.elements <= MAX_WINDOW_ELEMENTS:
            result.append(window)
    return result


def read_windows_for_loop(
    loop: ForCursor, buffers: set[str], min_elements: int, max_elements: int, invariant: str | None = None
) -> list[StageWindow]:
    """Windows of ``buffers`` (read-only argument tensors) read by one iteration of
    ``loop`` that do not depend on the variable ``invariant``. By default that is the
    loop's own variable: every iteration re-reads the same window. With the variable of an
    enclosing loop, it is the window that loop would re-read once moved inside ``loop``.
    Windows of fewer than ``min_elements`` or more than ``max_elements`` elements are left
    out."""
    lo, hi = literal(loop.lo()), literal(loop.hi())
    if lo is None or hi is None or (invariant is None and hi - lo < 2):
        return []
    by_buffer = _accesses_by_buffer(loop, buffers, reads=True)
    if by_buffer is None:
        return []
    result = []
    for name in sorted(by_buffer):
        # the loop's own variable stays symbolic: this is the window of one iteration
        window = _window(name, invariant or loop.name(), by_buffer[name])
        if window is not None and min_elements <= window.elements <= max_elements:
            result.append(window)
    return result


def _window(name: str, var: str, accesses: list) -> StageWindow | None:
    dims: list[tuple[dict[str, int], int, int]] | None = None
    for forms, env in accesses:
        current = []
        for form in forms:
            if form is None or form.get(var, 0) != 0:
                return None
            outer = {k: v for k, v in form.items() if k and k not in env}
            low = high = form.get("", 0)
            for k, coef in form.items():
                if k and k in env:
                    a, b = env[k]
                    low += min(coef * a, coef * b)
                    high += max(coef * a, coef * b)
            current.append((outer, low, high))
        if dims is None:
            dims = current
            continue
        if len(dims) != len(current):
            return None
        merged = []
        for (o1, l1, h1), (o2, l2, h2) in zip(dims, current, strict=True):
            if o1 != o2:
                return None
            merged.append((o1, min(l1, l2), max(h1, h2)))
        dims = merged
    if not dims:
        return None
    texts = []
    elements = 1
    for outer, low, high in dims:
        width = high - low + 1
        elements *= width
        if width == 1:
            texts.append(_bound_text(outer, low))
        else:
            texts.append(f"{_bound_text(outer, low)}:{_bound_text(outer, high + 1)}")
    return StageWindow(name, f"{name}[{', '.join(texts)}]", elements)
