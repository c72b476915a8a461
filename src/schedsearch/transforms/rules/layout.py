"""Layout moves: an operand of a reduction copied into a panel in the order a tile reads it.

A register tile streams one operand of ``out[a, b] += x * y`` along the column loop ``b``;
when that operand is not contiguous along ``b`` (the second ``A`` of ``A @ A^T``, a
convolution's weights read along output channels) no tile applies. ``Panel`` copies the
operand once per nest into a new buffer whose last dimension is ``b`` and whose leading
ones are the reduction loops, outermost first — ``A[j, k]`` becomes ``A_panel[k, j]`` — so
that the product reads ``A_panel`` contiguously. The copy is O(operand) against the
product's O(operand x rows) and the search may schedule it further like any other nest.

In Exo: bind the operand to a scalar, expand it over ``b`` and the reduction loops, lift
the buffer out of the nest, split the copy off out of every loop of the nest and drop the
rows loop around the copy (Exo checks the copy does not depend on it). A two-dimensional
copy is a transpose: reading its source along rows writes the panel along columns, so one
of the two strides a whole row per element. It is done in square blocks (``block``), small
enough that a block's rows of both buffers stay in L1 while it is copied.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from math import prod
from typing import cast

from exo.API_cursors import BinaryOpCursor, ReadCursor, ReduceCursor

from schedsearch.transforms.calls import After, ExoCall, Loop, Nest, Stmt
from schedsearch.transforms.rules.base import ProcView
from schedsearch.transforms.rules.tile_nests import reduction_chain, tile_nests
from schedsearch.transforms.walk import affine

#: Largest panel, in elements (the copy lives on the heap).
MAX_PANEL_ELEMENTS = 1 << 22

#: Side of the square blocks a two-dimensional copy is done in, largest first: the first
#: that divides both of its loops is taken.
PANEL_BLOCKS = (8, 4)


class Side(StrEnum):
    """Which operand of the product ``x * y`` a panel holds."""

    LHS = "lhs"
    RHS = "rhs"


@dataclass(frozen=True, slots=True)
class Panel:
    """Operand ``side`` of the product under the innermost reduction loop ``loop`` copied
    into ``name``, whose dimensions are ``dims`` (loop variable, extent), outermost first:
    the reduction loops, then the column loop. A two-dimensional copy with ``block`` set is
    done in ``block`` x ``block`` squares over loops named ``loops`` (the columns' outer and
    inner loop, then the reduction's)."""

    loop: str
    side: Side
    name: str
    dims: tuple[tuple[str, int], ...]
    block: int | None = None
    loops: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.block is not None and (len(self.dims) != 2 or len(self.loops) != 4 or self.block < 2):
            raise ValueError("a panel copied in blocks has two dims, a block of at least 2 and four loop names")

    def encode_dims(self) -> str:
        """``"k 48 j 64"``: the dims as a step argument."""
        return " ".join(f"{var} {extent}" for var, extent in self.dims)

    @staticmethod
    def decode_dims(text: str) -> tuple[tuple[str, int], ...]:
        words = text.split()
        if len(words) % 2 or not all(w.isdigit() for w in words[1::2]):
            raise ValueError(f"panel_dims must be pairs of a loop variable and an extent, not {text!r}")
        return tuple((words[i], int(words[i + 1])) for i in range(0, len(words), 2))

    def calls(self) -> list[ExoCall]:
        """The Exo calls that make the panel, on the proc where ``loop`` is the nest's innermost loop."""
        levels = len(self.dims) + 1  # the reduction loops, the columns and the rows
        calls = [ExoCall("bind_expr", (Stmt(self.loop, (0, "rhs", self.side.value)), self.name))]
        # each expand_dim adds the outermost dimension: the column loop's goes first
        calls += [ExoCall("expand_dim", (self.name, extent, var)) for var, extent in reversed(self.dims)]
        calls += [
            ExoCall("lift_alloc", (self.name,), (("n_lifts", levels),)),
            ExoCall("fission", (After(f"{self.name} = _"),), (("n_lifts", levels),)),
            # the copy's nest comes first, so ``loop`` now names its innermost loop
            ExoCall("remove_loop", (Loop(self.loop, up=len(self.dims)),)),
        ]
        if self.block is not None:
            bo, bi, ko, ki = self.loops
            perfect = (("perfect", True),)
            calls += [
                ExoCall("divide_loop", (Loop(self.loop, up=1), self.block, (bo, bi)), perfect),
                ExoCall("divide_loop", (self.loop, self.block, (ko, ki)), perfect),
                ExoCall("reorder_loops", (Nest(f"{bi} {ko}"),)),
            ]
        return calls


def _streams_along(read, a: str, b: str, allowed: set[str]) -> bool:
    """Whether ``read`` is worth a panel for a tile over rows ``a`` and columns ``b``: it
    depends on ``b`` but not on ``a``, only through affine indices of ``allowed`` variables,
    and is not already contiguous along ``b``."""
    found = [affine(e) for e in read.idx()]
    forms = [f for f in found if f is not None]
    if len(forms) != len(found):
        return False
    names = set().union(*({k for k in f if k} for f in forms))
    if a in names or b not in names or not names <= allowed:
        return False
    last = forms[-1]
    contiguous = last.get(b) == 1 and all(b not in f for f in forms[:-1])
    return not contiguous


def panel_candidates(view: ProcView) -> Iterator[Panel]:
    """Panels that make an operand of a reduction nest contiguous along its column loop:
    for every nest ``a, b, k1..kn`` whose body is ``out += x * y``, each operand that
    depends on ``b`` (and on the reductions or enclosing loops) but not on ``a`` and is not
    contiguous along ``b``."""
    for a, b in tile_nests(view):
        chain = reduction_chain(view, b)
        if not chain:
            continue
        body = list(view.proc.find_loop(chain[-1].pattern).body())
        if len(body) != 1 or not isinstance(body[0], ReduceCursor):
            continue
        rhs = body[0].rhs()
        if not isinstance(rhs, BinaryOpCursor) or rhs.op() != "*":
            continue
        # tile_nests and reduction_chain keep loops of constant trip count only
        dims = cast("tuple[tuple[str, int], ...]", tuple((k.name, k.trip) for k in chain) + ((b.name, b.trip),))
        if prod(extent for _, extent in dims) > MAX_PANEL_ELEMENTS:
            continue
        outer = {info.name for info in view.loops if info.depth < a.depth}
        allowed = outer | {b.name} | {k.name for k in chain}
        for side, read in ((Side.LHS, rhs.lhs()), (Side.RHS, rhs.rhs())):
            if isinstance(read, ReadCursor) and _streams_along(read, a.name, b.name, allowed):
                name, *loops = view.fresh(
                    f"{read.name()}_panel",
                    *(f"{var}p{part}" for var in (b.name, chain[-1].name) for part in ("o", "i")),
                )
                block = _block(dims)
                yield Panel(chain[-1].pattern, side, name, dims, block, tuple(loops) if block else ())


def _block(dims: tuple[tuple[str, int], ...]) -> int | None:
    """The block a copy over ``dims`` is done in: the largest of ``PANEL_BLOCKS`` that
    divides both loops of a two-dimensional copy (and leaves more than one block), else None."""
    if len(dims) != 2:
        return None
    return next((f for f in PANEL_BLOCKS if all(n % f == 0 and n > f for _, n in dims)), None)
