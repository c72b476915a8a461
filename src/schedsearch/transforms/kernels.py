"""Composite rewrite kinds that build a GEMM-style register micro-kernel and pack its panels.

A fast matmul needs several plain steps at once (tile, move the reduction outward, stage
the output tile, unroll the rows); most intermediate states are slower than the simple
loop interchange, so a greedy search rarely walks through them. ``MicroKernel`` makes the
whole register-blocking move one rewrite; ``Pack`` copies a re-read input panel into a
contiguous buffer. Both lower to ordinary Exo scheduling calls, so an exported schedule
shows every step.
"""

from __future__ import annotations

from collections.abc import Iterator

from exo.API_cursors import ReduceCursor

from schedsearch.core import ExpandOptions, Rewrite, RewriteKind
from schedsearch.transforms.calls import ExoCall, Loop, Memory, Nest
from schedsearch.transforms.staging import read_windows_for_loop
from schedsearch.transforms.walk import LoopInfo, affine, fresh_name, written_buffers

#: (rows, columns, rows per group) of the register tile. Columns are one or two AVX2
#: vectors of f32; rows are unrolled in groups so that gcc keeps the accumulators plus
#: one group of broadcasts in the 16 ymm registers (8x8 in groups of 4 measured best).
MICRO_SHAPES = ((8, 8, 4), (8, 8, 8), (4, 16, 4))
#: Output-tile loop orders: rows of tiles outermost, or columns of tiles outermost (the
#: latter lets ``Pack`` copy the input column panel once per column of tiles).
MICRO_ORDERS = ("rows", "cols")
#: Panels smaller than this are not worth a copy; larger ones (256 KiB of f32: a 512 x 64
#: AVX-512 column panel) would not stay in L2.
MIN_PACK_ELEMENTS = 64
MAX_PACK_ELEMENTS = 65536


def fresh_names(view, *bases: str) -> list[str]:
    used = set(view.names)
    out = []
    for base in bases:
        name = fresh_name(used, base)
        used.add(name)
        out.append(name)
    return out


def reduction_nests(view) -> Iterator[tuple[LoopInfo, LoopInfo, LoopInfo]]:
    """Loops ``(a, b, k)``: a perfect nest of constant loops, ``a`` and ``b`` from 0, whose
    innermost ``k`` holds a single statement (the candidates for a register tile)."""
    for a in view.loops:
        if not a.only_child or a.trip is None or a.lo != 0:
            continue
        b = view.loop(a.child)
        if not b.only_child or b.trip is None or b.lo != 0:
            continue
        k = view.loop(b.child)
        if k.trip is not None and k.statements == 1:
            yield a, b, k


def _reduction_dims(view, k_info) -> tuple[str, tuple[str, ...]] | None:
    """(buffer, index variables) when the k loop's body is one reduction into an argument
    tensor indexed by plain loop variables that do not include k."""
    cursor = view.proc.find_loop(k_info.pattern)
    body = list(cursor.body())
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
        if len(terms) != 1 or terms[0][1] != 1 or terms[0][0] == k_info.name:
            return None
        dims.append(terms[0][0])
    return stmt.name(), tuple(dims)


class MicroKernel:
    """Register-block a reduction nest ``a, b, k`` into an ``R x C`` micro-kernel, in one step.

    Tiles ``a`` by R and ``b`` by C, moves ``k`` above the tile rows, stages the output
    tile in a ``DRAM_STACK`` buffer around ``k``, puts the columns above the rows, splits
    the rows into groups of G and unrolls them. gcc then vectorises the column loop with
    the accumulators in registers.

    ``micro_kernel i #0 inner=j #0 red=k #0 rows=8 cols=8 group=4 order=cols ...``::

        for i in seq(0, 64):                  for jo in seq(0, 8):
            for j in seq(0, 64):                  for io in seq(0, 8):
                for k in seq(0, 64):                  C_stage: f32[8, 8] @ DRAM_STACK
                    C[i, j] += A[i, k] * B[k, j]      (load C_stage from C[8*io:, 8*jo:])
                                              ->      for k in seq(0, 64):
                                                          for ji in seq(0, 8):
                                                              C_stage[0, ji] += A[8*io, k] * B[k, 8*jo+ji]
                                                              ... rows 1 to 3
                                                          for ji in seq(0, 8):
                                                              ... rows 4 to 7
                                                      (store C_stage back)
    """

    kind = RewriteKind.MICRO_KERNEL

    def propose(self, view, options: ExpandOptions) -> list[Rewrite]:
        out = []
        for a, b, k in reduction_nests(view):
            found = _reduction_dims(view, k)
            if found is None or sorted(found[1]) != sorted((a.name, b.name)):
                continue
            buffer, dims = found
            bases = (f"{a.name}o", f"{a.name}i", f"{b.name}o", f"{b.name}i", f"{a.name}io", f"{a.name}ii")
            ao, ai, bo, bi, aio, aii, stage = fresh_names(view, *bases, f"{buffer}_stage")
            names = {"ao": ao, "ai": ai, "bo": bo, "bi": bi, "aio": aio, "aii": aii, "name": stage}
            for rows, cols, group in MICRO_SHAPES:
                if a.trip % rows or b.trip % cols or rows >= a.trip or cols >= b.trip or rows % group:
                    continue
                # the output tile indexed by the tile loops, e.g. C[8 * io:8 * io + 8, 8 * jo:8 * jo + 8]
                extent = {a.name: (rows, ao), b.name: (cols, bo)}
                parts = [f"{extent[d][0]} * {extent[d][1]}:{extent[d][0]} * {extent[d][1]} + {extent[d][0]}" for d in dims]
                window = f"{buffer}[{', '.join(parts)}]"
                shape = dict(rows=rows, cols=cols, group=group, window=window, **names)
                for order in MICRO_ORDERS:
                    target = {"inner": b.pattern, "red": k.pattern, "order": order}
                    out.append(Rewrite.make(self.kind, a.pattern, **target, **shape))
        return out

    def lower(self, rewrite: Rewrite) -> list[ExoCall]:
        def arg(name: str) -> str:
            return str(rewrite.arg(name))

        rows, group, red = int(rewrite.arg("rows")), int(rewrite.arg("group")), arg("red")
        calls = [
            ExoCall("divide_loop", (rewrite.target, rows, (arg("ao"), arg("ai"))), (("perfect", True),)),
            ExoCall("divide_loop", (arg("inner"), int(rewrite.arg("cols")), (arg("bo"), arg("bi"))), (("perfect", True),)),
            ExoCall("reorder_loops", (Nest(f"{arg('ai')} {arg('bo')}"),)),
            ExoCall("reorder_loops", (Loop(red, up=1),)),
            ExoCall("reorder_loops", (Loop(red, up=1),)),
        ]
        if rewrite.arg("order") == "cols":
            calls.append(ExoCall("reorder_loops", (Nest(f"{arg('ao')} {arg('bo')}"),)))
        calls += [
            ExoCall("stage_mem", (Loop(red), arg("window"), arg("name"))),
            ExoCall("set_memory", (arg("name"), Memory("DRAM_STACK"))),
            ExoCall("simplify"),
        ]
        if group < rows:
            calls += [
                ExoCall("divide_loop", (arg("ai"), group, (arg("aio"), arg("aii"))), (("perfect", True),)),
                ExoCall("reorder_loops", (Loop(arg("bi"), up=1),)),
                ExoCall("unroll_loop", (arg("aii"),)),
                ExoCall("unroll_loop", (arg("aio"),)),
            ]
        else:
            calls += [ExoCall("reorder_loops", (Loop(arg("bi"), up=1),)), ExoCall("unroll_loop", (arg("ai"),))]
        return calls + [ExoCall("simplify")]


class Pack:
    """Copy a read-only input panel that a loop re-reads on every iteration into a buffer.

    ``pack io #0 buffer=B window=B[0:64, 8 * jo:8 * jo + 8] name=B_pack``::

        for jo in seq(0, 8):                     for jo in seq(0, 8):
            for io in seq(0, 8):                     B_pack: f32[64, 8] @ DRAM
                for k in seq(0, 64):      ->         (copy B[0:64, 8*jo:8*jo+8] into B_pack)
                    ... B[k, 8 * jo + ji]            for io in seq(0, 8):
                                                         for k in seq(0, 64):
                                                             ... B_pack[k, ji]

    The panel's rows become contiguous: no cache-set conflicts from the large row stride.
    With ``interchange=True`` the loop is first swapped with its only child (``io jo`` ->
    ``jo io`` above) so that the panel the child selects is re-read by the loop.
    """

    kind = RewriteKind.PACK

    def propose(self, view, options: ExpandOptions) -> list[Rewrite]:
        read_only = set(view.arg_tensors) - written_buffers(view.proc)
        if not read_only:
            return []
        out = []
        for info in view.loops:
            cursor = view.proc.find_loop(info.pattern)
            direct = read_windows_for_loop(cursor, read_only, MIN_PACK_ELEMENTS, MAX_PACK_ELEMENTS)
            for window in direct:
                out.append(self._make(view, info.pattern, window, interchange=False))
            if not info.only_child or info.trip is None or info.trip < 2:
                continue
            child = view.proc.find_loop(info.child)
            swapped = read_windows_for_loop(
                child, read_only, MIN_PACK_ELEMENTS, MAX_PACK_ELEMENTS, invariant=info.name
            )
            for window in swapped:
                if window not in direct:
                    out.append(self._make(view, info.pattern, window, interchange=True))
        return out

    def _make(self, view, target: str, window, interchange: bool) -> Rewrite:
        name = fresh_name(set(view.names), f"{window.buffer}_pack")
        extra = {"interchange": True} if interchange else {}
        return Rewrite.make(self.kind, target, buffer=window.buffer, window=window.window, name=name, **extra)

    def lower(self, rewrite: Rewrite) -> list[ExoCall]:
        window, name = str(rewrite.arg("window")), str(rewrite.arg("name"))
        calls = []
        if rewrite.arg("interchange", False):
            calls.append(ExoCall("reorder_loops", (Loop(rewrite.target),)))
        return calls + [ExoCall("stage_mem", (Loop(rewrite.target), window, name)), ExoCall("simplify")]
