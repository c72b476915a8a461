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
from schedsearch.transforms.kernels import fresh_names
from schedsearch.targets import AVX2, Role, Target, chain, target
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
    """A reduction nest ``a, b, k1..kn`` whose body is ``out[.., a, b] += bcast[..] * vec[..]``.

    ``out`` is indexed by ``b`` last, by ``a`` in one other dimension, and in any others by
    variables of enclosing loops (a batch, an image row: ``y[o, h, i]``); ``vec`` is contiguous along ``b`` (its last index is ``b`` plus
    reduction variables, as in a convolution's ``x[c, i + r]``) and does not depend on
    ``a``; ``bcast`` does not depend on ``b``: one element per row and reduction step.
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


def _reduction_chain(view, b) -> list | None:
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


def _nest(view, a, b) -> _Nest | None:
    chain = _reduction_chain(view, b)
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
    if len(set(names)) != 3 or not set(names) <= view.arg_tensors:
        return None
    types = {arg.name(): arg.type() for arg in view.proc.args()}
    kinds = {types[n] for n in names}
    # One element type throughout: a widening product (i8 * i8 -> i32) has no FMA.
    if len(kinds) != 1:
        return None
    return _Nest(*names, dtype=kinds.pop().name.lower(), index=tuple(idx), reductions=tuple(k.pattern for k in chain))


def _tile_nests(view):
    """Loops ``(a, b)``: ``a`` and ``b`` from 0, constant, ``b`` the whole body of ``a``."""
    for a in view.loops:
        if not a.only_child or a.trip is None or a.lo != 0:
            continue
        b = view.loop(a.child)
        if b.only_child and b.trip is not None and b.lo == 0:
            yield a, b


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
        for a, b in _tile_nests(view):
            nest = _nest(view, a, b)
            # the widest instructions for the element type: f64 on an AVX-512 CPU is AVX2's
            home = next((c for c in chain(t) if (o := c.vector(nest.dtype)) and o.has(*ROLES)), None) if nest else None
            if nest is None or home is None:
                continue
            ops = home.vector(nest.dtype)
            assert ops is not None
            fresh = fresh_names(view, *_bases(a.name, b.name, nest), *_bases(a.name + "_t", b.name + "_t", nest, "_t"))
            names, tail_names = fresh[: len(fresh) // 2], fresh[len(fresh) // 2 :]
            shapes = [
                (rows, vectors * ops.lanes) for rows, vectors in tile_shapes(home)
                if b.trip % (vectors * ops.lanes) == 0 and rows <= a.trip and (options.allow_tails or a.trip % rows == 0)
            ]
            for rows, cols in shapes[:SHAPES_PER_TARGET]:
                for order in ORDERS:
                    out.append(
                        Rewrite.make(
                            self.kind, a.pattern, isa=home.name.value, inner=b.pattern, red=nest.reductions[0],
                            rows=rows, cols=cols, order=order, trip=a.trip, out=nest.out, bcast=nest.bcast,
                            vec=nest.vec, dtype=nest.dtype, names=" ".join(names), tail_names=" ".join(tail_names),
                            **_shape_args(nest),
                        )
                    )
        return out

    def lower(self, rewrite: Rewrite) -> list[ExoCall]:
        def arg(name: str) -> str:
            return str(rewrite.arg(name))

        rows, trip = int(rewrite.arg("rows")), int(rewrite.arg("trip", 0))
        reds = [arg("red")] + _patterns(str(rewrite.arg("reds", "")))
        calls = _kernel(rewrite, rewrite.target, reds, rows, arg("names").split(), base=None, cut=bool(trip % rows))
        if trip % rows:
            # The cut tail's rows loop is the only one left with the main kernel's row
            # name; its reduction loops are the next ones named like the main kernel's.
            ai = arg("names").split()[1]
            start = trip // rows * rows
            tail = [_next_pattern(r) for r in reds]
            calls += _kernel(rewrite, f"{ai} #0", tail, trip % rows, arg("tail_names").split(), base=start)
        return calls


def _shape_args(nest: _Nest) -> dict[str, str]:
    """Arguments only nests other than a plain ``C[a, b] += A * B`` need (older files lack them)."""
    extra = {}
    if len(nest.reductions) > 1:
        extra["reds"] = " ".join(nest.reductions[1:])  # the inner reduction loops, outermost first
    if len(nest.index) > 2:
        extra["index"] = " ".join(nest.index)  # the output's index variables, in order
    return extra


def _loop_name(pattern: str) -> str:
    return pattern.split()[0]


def _next_pattern(pattern: str) -> str:
    """The same loop name's next occurrence: the cut tail's copy of a loop."""
    name, _, count = pattern.partition("#")
    return f"{name.strip()} #{int(count or 0) + 1}"


def _bases(a: str, b: str, nest: _Nest, suffix: str = "") -> list[str]:
    """The names one kernel introduces, before making them fresh."""
    bases = [a + NAME_BASES[0], a + NAME_BASES[1]] + [b + x for x in NAME_BASES[2:]]
    return bases + [f"{nest.out}_reg{suffix}", f"{nest.vec}_vec{suffix}", f"{nest.bcast}_vec{suffix}"]


def _patterns(text: str) -> list[str]:
    """``"c #0 r #0"`` -> ``["c #0", "r #0"]``."""
    words = text.split()
    return [f"{words[i]} {words[i + 1]}" for i in range(0, len(words) - 1, 2)]


def _kernel(
    rewrite: Rewrite, rows_loop: str, reds: list[str], rows: int, names: list[str], base: int | None, cut: bool = False
) -> list[ExoCall]:
    """The calls for one kernel on the nest whose rows loop is ``rows_loop`` and whose
    reduction loops are ``reds`` (outermost first); ``base`` is the first row of a tail nest
    (None for the main nest, whose rows start at 0); ``cut`` splits the rows with a cut tail
    left for a second kernel. The output tile is staged around the outermost reduction loop;
    the vectors and broadcasts are loaded in the innermost."""
    ao, ai, bo, bi, bv, bl, reg, vec, bcast = names
    red, inner = reds[0], reds[-1]
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
    ]
    for k in reds:  # each reduction loop moves above the tile's rows and columns
        calls += [ExoCall("reorder_loops", (Loop(k, up=1),)), ExoCall("reorder_loops", (Loop(k, up=1),))]
    if order == "cols":
        calls.append(ExoCall("reorder_loops", (Nest(f"{ao} {bo}"),)))
    first = f"{rows} * {ao}" if base is None else f"{base} + {rows} * {ao}"
    a_name, b_name = _loop_name(str(rewrite.target)), _loop_name(str(rewrite.arg("inner")))
    dims = {a_name: f"{first}:{first} + {rows}", b_name: f"{cols} * {bo}:{cols} * {bo} + {cols}"}
    index = str(rewrite.arg("index", f"{a_name} {b_name}")).split()
    window = f"{out}[{', '.join(dims.get(v, v) for v in index)}]"
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
        ExoCall("bind_expr", (Within(inner, f"{vec_buf}[_]"), vec)),
        ExoCall("expand_dim", (vec, lanes, bl)),
        ExoCall("expand_dim", (vec, vectors, bv)),
        ExoCall("lift_alloc", (vec,), (("n_lifts", 3),)),
        ExoCall("fission", (After(f"{vec} = _"),), (("n_lifts", 3),)),
        ExoCall("remove_loop", (Stmt(inner, (1,)),)),
        ExoCall("set_memory", (vec, memory)),
        # one broadcast element per row
        ExoCall("bind_expr", (Within(inner, f"{bcast_buf}[_]"), bcast)),
        ExoCall("expand_dim", (bcast, lanes, bl)),
        ExoCall("lift_alloc", (bcast,), (("n_lifts", 2),)),
        ExoCall("fission", (After(f"{bcast} = _"),), (("n_lifts", 2),)),
        ExoCall("remove_loop", (Stmt(inner, (2, 1)),)),
        ExoCall("set_memory", (bcast, memory)),
        ExoCall("simplify"),
        ExoCall("replace_all", (tuple(Instr(str(ops.get(r)), t.module) for r in ROLES),)),
        # straight-line code: the vector loads, the FMAs of a row, then the rows
        ExoCall("unroll_loop", (Stmt(inner, (1,)),)),
        ExoCall("unroll_loop", (Stmt(inner, (1 + vectors, 2)),)),
        ExoCall("unroll_loop", (Stmt(inner, (1 + vectors,)),)),
        ExoCall("simplify"),
    ]
    return calls
