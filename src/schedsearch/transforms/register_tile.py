"""A register tile written in a target's vector instructions, as one rewrite.

Left to itself, gcc's vectoriser keeps at most about eight accumulators in registers
before it spills. A register tile of R rows x V vectors needs R*V accumulators, V vectors
of the streamed operand and one broadcast, which only explicit instructions get right.
``RegisterTile`` builds such a tile with Exo's own instructions for the search's target
(``targets.Target``: AVX-512, AVX2, NEON): the output tile lives in the target's vector
memory, each reduction step loads the column vectors once, broadcasts one element per row
and issues one fused multiply-add per accumulator.

The tile shapes come from the target's table, not from a list per CPU: every R x V with
``R*V + V + 1`` registers that fit, ranked by loads per FMA. A 16-register AVX2 core gets
4x3 and 6x2 vectors (4x24, 6x16 f32); a 32-register AVX-512 core gets 6x4 (6x64 f32), 9x3
and others. Rows need not divide the loop: the remaining rows form a cut tail that gets
the same kernel with fewer rows. Columns must be a multiple of the lanes dividing the loop.

``simd_kernel`` steps of schedule files written before targets existed replay as AVX2
register tiles.
"""

from __future__ import annotations

from dataclasses import dataclass

from exo.API_cursors import BinaryOpCursor, ReadCursor, ReduceCursor

from schedsearch.core import ExpandOptions, Rewrite, RewriteKind
from schedsearch.transforms.calls import After, ExoCall, Instr, Loop, Memory, Nest, Stmt, Within
from schedsearch.transforms.kernels import fresh_names, reduction_nests
from schedsearch.targets import AVX2, Role, Target, target
from schedsearch.transforms.walk import affine

#: Tile shapes offered per nest and target (the best few by loads per FMA).
SHAPES_PER_TARGET = 5
#: At most this many rows / vectors: beyond them unrolled kernels grow without gaining.
MAX_ROWS, MAX_VECTORS = 12, 4
ORDERS = ("rows", "cols")
#: Roles a register tile needs, in the order ``replace_all`` is given them.
ROLES = (Role.LOAD, Role.STORE, Role.BROADCAST, Role.FMA)
#: Names each kernel needs, in the order of the ``names`` argument.
NAME_BASES = ("o", "i", "o", "i", "v", "l")  # rows out/in, columns out/in, vector, lane


def tile_shapes(t: Target) -> tuple[tuple[int, int], ...]:
    """Every (rows, vectors) register tile that fits ``t``'s registers, fewest loads per FMA first.

    Each reduction step of an R x V tile issues V loads, R broadcasts and R*V FMAs, and holds
    R*V accumulators, V operand vectors and one broadcast in registers.
    """
    fits = [
        (r, v) for r in range(1, MAX_ROWS + 1) for v in range(1, MAX_VECTORS + 1)
        if r * v + v + 1 <= t.registers and r * v >= t.registers // 4
    ]
    fits.sort(key=lambda rv: ((rv[0] + rv[1]) / (rv[0] * rv[1]), -rv[0] * rv[1], rv[1]))
    return tuple(fits)


def step_target(rewrite: Rewrite) -> Target:
    """The target a register-tile step is written for (``simd_kernel`` steps: AVX2)."""
    name = rewrite.arg("isa")
    return target(str(name)) if name is not None else AVX2


@dataclass(frozen=True, slots=True)
class _Nest:
    """A reduction nest ``a, b, k`` whose body is ``out[a, b] += bcast[.., ..] * vec[k, b]``."""

    out: str
    bcast: str  # indexed by the rows and the reduction variable: one element per row
    vec: str  # indexed by [reduction, columns]: contiguous along the columns
    dtype: str  # Exo's spelling of the element type shared by all three


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
    kinds = {types[n] for n in names}
    # One element type throughout: a widening product (i8 * i8 -> i32) has no FMA.
    if len(kinds) != 1:
        return None
    return _Nest(*names, dtype=kinds.pop().name.lower())


class RegisterTile:
    """Register-block ``a, b, k`` into an R x C tile of the target's vector registers.

    ``register_tile i #0 isa=avx512 inner=j #0 red=k #0 rows=6 cols=64 order=cols ...``::

        for i in seq(0, 512):                  for jo in seq(0, 8):
            for j in seq(0, 512):                  for io in seq(0, 85):
                for k in seq(0, 512):                  C_reg: f32[6, 4, 16] @ AVX512
                    C[i, j] += A[i, k] * B[k, j]       (mm512_loadu_ps the C tile)
                                               ->      for k in seq(0, 512):
                                                           mm512_loadu_ps(B_vec[0, 0:16], B[k, 64 * jo:...])
                                                           ... 4 column vectors
                                                           mm512_set1_ps(A_vec, A[6 * io, k:k + 1])
                                                           mm512_fmadd_ps(A_vec, B_vec[0, 0:16], C_reg[0, 0, 0:16])
                                                           ... 24 FMAs in all
                                                       (mm512_storeu_ps the C tile)
                                               for jo in ...: (the last 2 rows: a 2x64 kernel)
    """

    kind = RewriteKind.REGISTER_TILE
    #: Steps of this kind decoded from older schedule files lower the same way.
    aliases = (RewriteKind.SIMD_KERNEL,)

    def propose(self, view, options: ExpandOptions) -> list[Rewrite]:
        t = target(options.target)
        if not t.is_vector:
            return []
        out = []
        for a, b, k in reduction_nests(view):
            nest = _nest(view, a, b, k)
            ops = t.vector(nest.dtype) if nest is not None else None
            if nest is None or ops is None or not ops.has(*ROLES):
                continue
            fresh = fresh_names(view, *_bases(a.name, b.name, nest), *_bases(a.name + "_t", b.name + "_t", nest, "_t"))
            names, tail_names = fresh[: len(fresh) // 2], fresh[len(fresh) // 2 :]
            shapes = [
                (rows, vectors * ops.lanes) for rows, vectors in tile_shapes(t)
                if b.trip % (vectors * ops.lanes) == 0 and rows <= a.trip and (options.allow_tails or a.trip % rows == 0)
            ]
            for rows, cols in shapes[:SHAPES_PER_TARGET]:
                for order in ORDERS:
                    out.append(
                        Rewrite.make(
                            self.kind, a.pattern, isa=t.name.value, inner=b.pattern, red=k.pattern, rows=rows,
                            cols=cols, order=order, trip=a.trip, out=nest.out, bcast=nest.bcast, vec=nest.vec,
                            dtype=nest.dtype, names=" ".join(names), tail_names=" ".join(tail_names),
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
    t = step_target(rewrite)
    ops = t.vector(str(rewrite.arg("dtype", "f32")))
    if ops is None or t.memory is None or t.module is None:
        raise ValueError(f"target {t.name} has no {rewrite.arg('dtype', 'f32')} vector instructions")
    lanes = ops.lanes
    memory = Memory(t.memory, t.memory_module)
    cols, order = int(rewrite.arg("cols")), str(rewrite.arg("order"))
    out, vec_buf, bcast_buf = str(rewrite.arg("out")), str(rewrite.arg("vec")), str(rewrite.arg("bcast"))
    vectors = cols // lanes
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
        ExoCall("divide_loop", (bi, lanes, (bv, bl)), (("perfect", True),)),
        ExoCall("divide_loop", (Stmt(red, ("prev", 0)), lanes, (bv, bl)), (("perfect", True),)),
        ExoCall("divide_loop", (Stmt(red, ("next", 0)), lanes, (bv, bl)), (("perfect", True),)),
        ExoCall("divide_dim", (reg, 1, lanes)),
        ExoCall("simplify"),
        ExoCall("set_memory", (reg, memory)),
        # the column vectors of the streamed operand: loaded once per reduction step
        ExoCall("bind_expr", (Within(red, f"{vec_buf}[_]"), vec)),
        ExoCall("expand_dim", (vec, lanes, bl)),
        ExoCall("expand_dim", (vec, vectors, bv)),
        ExoCall("lift_alloc", (vec,), (("n_lifts", 3),)),
        ExoCall("fission", (After(f"{vec} = _"),), (("n_lifts", 3),)),
        ExoCall("remove_loop", (Stmt(red, (1,)),)),
        ExoCall("set_memory", (vec, memory)),
        # one broadcast element per row
        ExoCall("bind_expr", (Within(red, f"{bcast_buf}[_]"), bcast)),
        ExoCall("expand_dim", (bcast, lanes, bl)),
        ExoCall("lift_alloc", (bcast,), (("n_lifts", 2),)),
        ExoCall("fission", (After(f"{bcast} = _"),), (("n_lifts", 2),)),
        ExoCall("remove_loop", (Stmt(red, (2, 1)),)),
        ExoCall("set_memory", (bcast, memory)),
        ExoCall("simplify"),
        ExoCall("replace_all", (tuple(Instr(str(ops.get(r)), t.module) for r in ROLES),)),
        # straight-line code: the vector loads, the FMAs of a row, then the rows
        ExoCall("unroll_loop", (Stmt(red, (1,)),)),
        ExoCall("unroll_loop", (Stmt(red, (1 + vectors, 2)),)),
        ExoCall("unroll_loop", (Stmt(red, (1 + vectors,)),)),
        ExoCall("simplify"),
    ]
    return calls
