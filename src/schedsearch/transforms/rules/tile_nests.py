"""The loop nests a register tile applies to, and the tile shapes a target's registers hold."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

from exo.API_cursors import BinaryOpCursor, ReadCursor, ReduceCursor

from schedsearch.targets import Target
from schedsearch.transforms.rules.base import ProcView
from schedsearch.transforms.walk import LoopInfo, affine

#: At most this many rows / vectors: beyond them unrolled kernels grow without gaining.
MAX_ROWS, MAX_VECTORS = 12, 4


def tile_shapes(t: Target) -> tuple[tuple[int, int], ...]:
    """Every (rows, vectors) register tile that fits ``t``'s registers, fewest loads per FMA first.

    Each reduction step of an R x V tile issues V loads, R broadcasts and R*V FMAs, and holds
    R*V accumulators, V operand vectors and one broadcast in registers.
    """
    fits = [
        (r, v)
        for r in range(1, MAX_ROWS + 1)
        for v in range(1, MAX_VECTORS + 1)
        if r * v + v + 1 <= t.registers and r * v >= t.registers // 4
    ]
    fits.sort(key=lambda rv: ((rv[0] + rv[1]) / (rv[0] * rv[1]), -rv[0] * rv[1], rv[1]))
    return tuple(fits)


def tile_nests(view: ProcView) -> Iterator[tuple[LoopInfo, LoopInfo]]:
    """Loops ``(a, b)``: ``a`` and ``b`` from 0, constant, ``b`` the whole body of ``a``."""
    for a in view.loops:
        if not a.only_child or a.trip is None or a.lo != 0:
            continue
        assert a.child is not None  # set whenever only_child is
        b = view.loop(a.child)
        if b.only_child and b.trip is not None and b.lo == 0:
            yield a, b


@dataclass(frozen=True, slots=True)
class VectorNest:
    """A reduction nest ``a, b, k1..kn`` whose body is ``out[.., a, b] += bcast[..] * vec[..]``.

    ``out`` is indexed by ``b`` last, by ``a`` in one other dimension, and in any others by
    variables of enclosing loops (a batch, an image row: ``y[o, h, i]``); ``vec`` is
    contiguous along ``b`` (its last index is ``b`` plus reduction variables, as in a
    convolution's ``x[c, i + r]``) and does not depend on ``a``; ``bcast`` does not depend on
    ``b``: one element per row and reduction step.
    """

    out: str
    bcast: str
    vec: str
    dtype: str  # Exo's spelling of the element type shared by all three
    index: tuple[str, ...]  # the output's index variables, in order (``a`` and ``b`` among them)
    reductions: tuple[str, ...]  # patterns of k1..kn, outermost first


def _plain(expr) -> str | None:
    form = affine(expr)
    if form is None or form.get("", 0) != 0:
        return None
    terms = [(k, v) for k, v in form.items() if k]
    return terms[0][0] if len(terms) == 1 and terms[0][1] == 1 else None


def _vars(expr) -> set[str] | None:
    form = affine(expr)
    return None if form is None else {k for k in form if k}


def _is_vec(read, a: str, b: str, ks: set[str]) -> bool:
    """Contiguous along ``b``: the last index is ``b`` (coefficient 1) plus reduction
    variables and constants; no index mentions ``a``; only the last mentions ``b``."""
    *lead, last = read.idx()
    form = affine(last)
    if form is None or form.get(b) != 1 or not {k for k in form if k} - {b} <= ks:
        return False
    for e in lead:
        names = _vars(e)
        if names is None or a in names or b in names:
            return False
    return True


def _is_bcast(read, a: str, b: str) -> bool:
    """One element per row: affine indices that never mention ``b``."""
    for e in read.idx():
        names = _vars(e)
        if names is None or b in names:
            return False
    return True


def reduction_chain(view: ProcView, b: LoopInfo) -> list[LoopInfo] | None:
    """Loops k1..kn under ``b``: a perfect chain of constant loops ending in one statement."""
    chain = []
    info = view.loop(b.child) if b.child else None
    while info is not None:
        if info.trip is None or info.lo != 0:
            return None
        chain.append(info)
        if info.statements == 1 and info.only_child is None:
            return chain
        info = view.loop(info.child) if info.only_child and info.child else None
    return None


def vector_nest(view: ProcView, a: LoopInfo, b: LoopInfo) -> VectorNest | None:
    """The nest under ``a, b`` when vector instructions can compute it (one element type)."""
    chain = reduction_chain(view, b)
    if not chain:
        return None
    body = list(view.proc.find_loop(chain[-1].pattern).body())
    if len(body) != 1 or not isinstance(body[0], ReduceCursor):
        return None
    stmt = body[0]
    ks = {k.name for k in chain}
    idx = [_plain(e) for e in stmt.idx()]
    # b indexes the last (contiguous) dimension, a exactly one other; the rest are fixed by
    # enclosing loops (a batch, an image row)
    if len(idx) < 2 or idx[-1] != b.name or idx.count(a.name) != 1 or b.name in idx[:-1]:
        return None
    if any(v is None or v in ks for v in idx):
        return None
    rhs = stmt.rhs()
    if not isinstance(rhs, BinaryOpCursor) or rhs.op() != "*":
        return None
    reads = [rhs.lhs(), rhs.rhs()]
    if not all(isinstance(r, ReadCursor) and len(r.idx()) >= 1 for r in reads):
        return None
    vec = next((r for r in reads if _is_vec(r, a.name, b.name, ks)), None)
    bcast = next((r for r in reads if r is not vec and _is_bcast(r, a.name, b.name)), None)
    if vec is None or bcast is None:
        return None
    names = (stmt.name(), bcast.name(), vec.name())
    types = view.tensor_types
    if len(set(names)) != 3 or not set(names) <= types.keys():
        return None
    kinds = {types[n] for n in names}
    # One element type throughout: a widening product (i8 * i8 -> i32) has no FMA.
    if len(kinds) != 1:
        return None
    return VectorNest(
        *names,
        dtype=kinds.pop().name.lower(),
        index=tuple(cast("list[str]", idx)),
        reductions=tuple(k.pattern for k in chain),
    )


def scalar_nest(view: ProcView, a: LoopInfo, b: LoopInfo) -> tuple[LoopInfo, str, tuple[str, ...]] | None:
    """(k, buffer, index variables) when ``b``'s body is one loop ``k`` holding one reduction
    into an argument tensor indexed by exactly ``a`` and ``b`` (any order), never by ``k``:
    the nest gcc's vectoriser gets as a staged, unrolled tile."""
    if b.child is None:
        return None
    k = view.loop(b.child)
    if k.trip is None or k.statements != 1:
        return None
    body = list(view.proc.find_loop(k.pattern).body())
    if len(body) != 1 or not isinstance(body[0], ReduceCursor):
        return None
    stmt = body[0]
    if stmt.name() not in view.arg_tensors:
        return None
    dims = []
    for expr in stmt.idx():
        form = affine(expr)
        if form is None or form.get("", 0) != 0:
            return None
        terms = [(var, coef) for var, coef in form.items() if var]
        if len(terms) != 1 or terms[0][1] != 1 or terms[0][0] == k.name:
            return None
        dims.append(terms[0][0])
    if sorted(dims) != sorted((a.name, b.name)):
        return None
    return k, stmt.name(), tuple(dims)
