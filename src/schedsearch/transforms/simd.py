"""A register micro-kernel written in AVX2 instructions, as one rewrite.

``MicroKernel`` leaves the vector code to gcc, whose vectoriser keeps at most about eight
accumulators in the 16 ymm registers before it spills. A 6x16 f32 tile needs twelve
accumulators plus two vectors of the streamed operand and one broadcast: fifteen
registers, which only explicit instructions get right. ``SimdKernel`` builds such a tile
with Exo's own AVX2 instructions (``exo.platforms.x86``): the output tile lives in
``AVX2`` memory (``__m256`` values), each reduction step loads the column vectors once,
broadcasts one element per row and issues one ``_mm256_fmadd_ps`` per accumulator.

Rows need not divide the loop: the remaining rows form a cut tail that gets the same
kernel with fewer rows. Columns must be a multiple of 8 dividing the loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from exo.API_cursors import BinaryOpCursor, ExoType, ReadCursor, ReduceCursor

from schedsearch.core import ExpandOptions, Rewrite, RewriteKind
from schedsearch.transforms.calls import After, ExoCall, Instr, Loop, Memory, Nest, Stmt, Within
from schedsearch.transforms.kernels import fresh_names, reduction_nests
from schedsearch.transforms.walk import affine

#: Lanes of one AVX2 register of f32.
LANES = 8
#: (rows, columns) of the register tile, best first on a 16-register AVX2 core: rows x
#: columns / 8 accumulators plus columns / 8 operand vectors and one broadcast must fit
#: in 16 registers. 6x16 (12 accumulators) is the classic AVX2 SGEMM kernel.
SIMD_SHAPES = ((6, 16), (4, 24), (8, 8), (4, 16), (3, 32))
ORDERS = ("rows", "cols")
INSTRUCTIONS = ("mm256_loadu_ps", "mm256_storeu_ps", "mm256_broadcast_ss", "mm256_fmadd_ps")
#: Names each kernel needs, in the order of the ``names`` argument.
NAME_BASES = ("o", "i", "o", "i", "v", "l")  # rows out/in, columns out/in, vector, lane


@dataclass(frozen=True, slots=True)
class _Nest:
    """A reduction nest ``a, b, k`` whose body is ``out[a, b] += bcast[.., ..] * vec[k, b]``."""

    out: str
    bcast: str  # indexed by the rows and the reduction variable: one element per row
    vec: str  # indexed by [reduction, columns]: contiguous along the columns


def _plain(expr) -> str | None:
    form = affine(expr)
    if form is None or form.get("", 0) != 0:
        return None
    terms = [(k, v) for k, v in form.items() if k]
    return terms[0][0] if len(terms) == 1 and terms[0][1] == 1 else None


def _nest(view, a, b, k) -> _Nest | None:
    body = list(view.proc.find_loop(k.pattern).body())
    if len(body) != 1 or not isinstance(body[0], ReduceCursor):
        return None
    stmt = body[0]
    if [_plain(e) for e in stmt.idx()] != [a.name, b.name]:
        return None
    rhs = stmt.rhs()
    if not isinstance(rhs, BinaryOpCursor) or rhs.op() != "*":
        return None
    reads = [rhs.lhs(), rhs.rhs()]
    if not all(isinstance(r, ReadCursor) and len(r.idx()) == 2 for r in reads):
        return None
    vec = next((r for r in reads if [_plain(e) for e in r.idx()] == [k.name, b.name]), None)
    bcast = next((r for r in reads if sorted(_plain(e) or "" for e in r.idx()) == sorted((a.name, k.name))), None)
    if vec is None or bcast is None:
        return None
    names = (stmt.name(), bcast.name(), vec.name())
    if len(set(names)) != 3 or not set(names) <= view.arg_tensors:
        return None
    types = {arg.name(): arg.type() for arg in view.proc.args()}
    if any(types[n] != ExoType.F32 for n in names):
        return None
    return _Nest(*names)


class SimdKernel:
    """Register-block ``a, b, k`` into an R x C tile of AVX2 registers, in one step.

    ``simd_kernel i #0 inner=j #0 red=k #0 rows=6 cols=16 order=cols ...``::

        for i in seq(0, 512):                  for jo in seq(0, 32):
            for j in seq(0, 512):                  for io in seq(0, 85):
                for k in seq(0, 512):                  C_reg: f32[6, 2, 8] @ AVX2
                    C[i, j] += A[i, k] * B[k, j]       (mm256_loadu_ps the C tile)
                                               ->      for k in seq(0, 512):
                                                           mm256_loadu_ps(b_vec[0, 0:8], B[k, 16 * jo:...])
                                                           mm256_loadu_ps(b_vec[1, 0:8], ...)
                                                           mm256_broadcast_ss(a_vec, A[6 * io, k:k + 1])
                                                           mm256_fmadd_ps(C_reg[0, 0, 0:8], a_vec, b_vec[0, 0:8])
                                                           ... 12 fmadds in all
                                                       (mm256_storeu_ps the C tile)
                                               for jo in ...: (the last 2 rows: a 2x16 kernel)
    """

    kind = RewriteKind.SIMD_KERNEL

    def propose(self, view, options: ExpandOptions) -> list[Rewrite]:
        if "avx2" not in options.isa:
            return []
        out = []
        for a, b, k in reduction_nests(view):
            nest = _nest(view, a, b, k)
            if nest is None:
                continue
            fresh = fresh_names(view, *_bases(a.name, b.name, nest), *_bases(a.name + "_t", b.name + "_t", nest, "_t"))
            names, tail_names = fresh[: len(fresh) // 2], fresh[len(fresh) // 2 :]
            for rows, cols in SIMD_SHAPES:
                if cols % LANES or b.trip % cols or rows > a.trip:
                    continue
                if a.trip % rows and not options.allow_tails:
                    continue
                for order in ORDERS:
                    out.append(
                        Rewrite.make(
                            self.kind, a.pattern, inner=b.pattern, red=k.pattern, rows=rows, cols=cols,
                            order=order, trip=a.trip, out=nest.out, bcast=nest.bcast, vec=nest.vec,
                            names=" ".join(names), tail_names=" ".join(tail_names),
                        )
                    )
        return out

    def lower(self, rewrite: Rewrite) -> list[ExoCall]:
        def arg(name: str) -> str:
            return str(rewrite.arg(name))

        rows, trip = int(rewrite.arg("rows")), int(rewrite.arg("trip", 0))
        red = arg("red")
        name, _, count = red.partition("#")
        calls = _kernel(rewrite, rewrite.target, red, rows, arg("names").split(), base=None, cut=bool(trip % rows))
        if trip % rows:
            # The cut tail's rows loop is the only one left with the main kernel's row
            # name; its reduction loop is the next one named like the main one.
            ai = arg("names").split()[1]
            tail_red = f"{name.strip()} #{int(count or 0) + 1}"
            start = trip // rows * rows
            calls += _kernel(rewrite, f"{ai} #0", tail_red, trip % rows, arg("tail_names").split(), base=start)
        return calls


def _bases(a: str, b: str, nest: _Nest, suffix: str = "") -> list[str]:
    """The names one kernel introduces, before making them fresh."""
    bases = [a + NAME_BASES[0], a + NAME_BASES[1]] + [b + x for x in NAME_BASES[2:]]
    return bases + [f"{nest.out}_reg{suffix}", f"{nest.vec}_vec{suffix}", f"{nest.bcast}_vec{suffix}"]


def _kernel(
    rewrite: Rewrite, rows_loop: str, red: str, rows: int, names: list[str], base: int | None, cut: bool = False
) -> list[ExoCall]:
    """The calls for one kernel on the nest whose rows loop is ``rows_loop``; ``base`` is the
    first row of a tail nest (None for the main nest, whose rows start at 0); ``cut`` splits
    the rows with a cut tail left for a second kernel."""
    ao, ai, bo, bi, bv, bl, reg, vec, bcast = names
    cols, order = int(rewrite.arg("cols")), str(rewrite.arg("order"))
    out, vec_buf, bcast_buf = str(rewrite.arg("out")), str(rewrite.arg("vec")), str(rewrite.arg("bcast"))
    vectors = cols // LANES
    calls = []
    if cut:
        calls += [ExoCall("divide_loop", (rows_loop, rows, (ao, ai)), (("tail", "cut"),)), ExoCall("simplify")]
    else:
        calls.append(ExoCall("divide_loop", (rows_loop, rows, (ao, ai)), (("perfect", True),)))
    calls += [
        ExoCall("divide_loop", (str(rewrite.arg("inner")), cols, (bo, bi)), (("perfect", True),)),
        ExoCall("reorder_loops", (Nest(f"{ai} {bo}"),)),
        ExoCall("reorder_loops", (Loop(red, up=1),)),
        ExoCall("reorder_loops", (Loop(red, up=1),)),
    ]
    if order == "cols":
        calls.append(ExoCall("reorder_loops", (Nest(f"{ao} {bo}"),)))
    first = f"{rows} * {ao}" if base is None else f"{base} + {rows} * {ao}"
    window = f"{out}[{first}:{first} + {rows}, {cols} * {bo}:{cols} * {bo} + {cols}]"
    calls += [
        ExoCall("stage_mem", (Loop(red), window, reg)),
        ExoCall("simplify"),
        # columns -> vectors x lanes, in the compute loop and the tile's load and store loops
        ExoCall("divide_loop", (bi, LANES, (bv, bl)), (("perfect", True),)),
        ExoCall("divide_loop", (Stmt(red, ("prev", 0)), LANES, (bv, bl)), (("perfect", True),)),
        ExoCall("divide_loop", (Stmt(red, ("next", 0)), LANES, (bv, bl)), (("perfect", True),)),
        ExoCall("divide_dim", (reg, 1, LANES)),
        ExoCall("simplify"),
        ExoCall("set_memory", (reg, Memory("AVX2"))),
        # the column vectors of the streamed operand: loaded once per reduction step
        ExoCall("bind_expr", (Within(red, f"{vec_buf}[_]"), vec)),
        ExoCall("expand_dim", (vec, LANES, bl)),
        ExoCall("expand_dim", (vec, vectors, bv)),
        ExoCall("lift_alloc", (vec,), (("n_lifts", 3),)),
        ExoCall("fission", (After(f"{vec} = _"),), (("n_lifts", 3),)),
        ExoCall("remove_loop", (Stmt(red, (1,)),)),
        ExoCall("set_memory", (vec, Memory("AVX2"))),
        # one broadcast element per row
        ExoCall("bind_expr", (Within(red, f"{bcast_buf}[_]"), bcast)),
        ExoCall("expand_dim", (bcast, LANES, bl)),
        ExoCall("lift_alloc", (bcast,), (("n_lifts", 2),)),
        ExoCall("fission", (After(f"{bcast} = _"),), (("n_lifts", 2),)),
        ExoCall("remove_loop", (Stmt(red, (2, 1)),)),
        ExoCall("set_memory", (bcast, Memory("AVX2"))),
        ExoCall("simplify"),
        ExoCall("replace_all", (tuple(Instr(n) for n in INSTRUCTIONS),)),
        # straight-line code: the vector loads, the fmadds of a row, then the rows
        ExoCall("unroll_loop", (Stmt(red, (1,)),)),
        ExoCall("unroll_loop", (Stmt(red, (1 + vectors, 2)),)),
        ExoCall("unroll_loop", (Stmt(red, (1 + vectors,)),)),
        ExoCall("simplify"),
    ]
    return calls
