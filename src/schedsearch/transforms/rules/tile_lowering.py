"""The Exo calls of a register tile: in the target's vector instructions, or staged and
unrolled for gcc's vectoriser (the ``scalar`` target's tile)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from schedsearch.core import DType
from schedsearch.targets import Role, Target, TargetName, chain, target
from schedsearch.transforms.calls import After, ExoCall, Instr, Loop, Memory, Nest, Stmt, Within
from schedsearch.transforms.rules.normalize import Prep
from schedsearch.transforms.rules.tile_nests import MAX_ROWS
from schedsearch.transforms.vector_steps import masked_tail

if TYPE_CHECKING:
    from schedsearch.transforms.rules.register_tile import ScalarTileArgs, VectorTileArgs

#: Roles a register tile needs, in the order its lane loops try them.
ROLES = (Role.LOAD, Role.STORE, Role.BROADCAST, Role.FMA)
#: The same roles in a kernel whose one vector is masked to its first n lanes.
MASKED_ROLES = (Role.MASKED_LOAD, Role.MASKED_STORE, Role.MASKED_BROADCAST, Role.MASKED_FMA)


def loop_name(pattern: str) -> str:
    """``"j #0"`` -> ``"j"``."""
    return pattern.split()[0]


def next_pattern(pattern: str) -> str:
    """The same loop name's next occurrence: the cut tail's copy of a loop."""
    name, _, count = pattern.partition("#")
    return f"{name.strip()} #{int(count or 0) + 1}"


def patterns(text: str) -> list[str]:
    """``"c #0 r #0"`` -> ``["c #0", "r #0"]``."""
    words = text.split()
    return [f"{words[i]} {words[i + 1]}" for i in range(0, len(words) - 1, 2)]


def tile_targets(t: Target, dtype: str) -> list[Target]:
    """The targets of ``t``'s chain, widest first, whose instructions make a register tile
    of ``dtype`` (f32 on AVX-512 is AVX-512's and AVX2's; f64 only AVX2's)."""
    return [c for c in chain(t) if (o := c.vector(dtype)) is not None and o.has(*ROLES)]


def column_split(isa: TargetName, dtype: DType, ctrip: int, cols: int) -> tuple[int, Target | None, int, int]:
    """How a tile of ``cols`` columns covers ``ctrip`` columns: (columns of whole tiles, the
    target of the narrower kernel for the rest, its columns, columns left below one vector).

    The narrower kernel uses the instructions of ``isa``'s chain that leave the fewest
    columns to a plain nest (the widest of those: 28 columns are 3 AVX2 vectors and 4 plain
    columns, not one AVX-512 vector and 12); what no vector fits stays a plain nest."""
    main = ctrip // cols * cols
    rest = ctrip - main
    fits = [t for t in tile_targets(target(isa), dtype) if t.lanes(dtype) <= rest]
    narrow = min(fits, key=lambda t: rest % t.lanes(dtype), default=None)  # min keeps the widest of ties
    lanes = narrow.lanes(dtype) if narrow is not None else 0
    width = rest // lanes * lanes if lanes else 0
    return main, narrow, width, rest - width


def masked_home(isa: TargetName, dtype: DType, columns: int) -> Target | None:
    """The narrowest target of ``isa``'s chain with masked forms of a tile's instructions
    and more than ``columns`` lanes (AVX-512's masks; AVX2 and NEON have no masked FMA)."""
    fits = [
        t
        for t in tile_targets(target(isa), dtype)
        if (o := t.vector(dtype)) is not None and o.has(*MASKED_ROLES) and o.lanes > columns
    ]
    return min(fits, key=lambda t: t.lanes(dtype), default=None)


def narrow_rows(t: Target, vectors: int, trip: int) -> int:
    """Rows of the narrower kernel: as many as ``t``'s registers hold beside its vectors."""
    return max(1, min(MAX_ROWS, trip, (t.registers - vectors - 1) // vectors))


def vector_tile(target_loop: str, args: VectorTileArgs) -> list[ExoCall]:
    """The calls of a vector register tile: its nest's normalizing steps, then the kernel
    with a cut tail when the rows do not divide; when the columns do not, the rest of the
    columns first get a narrower kernel, and what is narrower than one vector a kernel of
    one masked vector (``mask_names``, where the target has masks) or else a plain nest
    with its column loop innermost (where gcc vectorises it)."""

    calls = Prep.of(args).calls()
    reds = [args.red] + patterns(args.reds or "")
    ctrip = args.ctrip or 0
    if not ctrip or ctrip % args.cols == 0:
        return calls + _tiles(target_loop, args, reds) + [ExoCall("simplify")]
    main, narrow, width, below = column_split(args.isa, args.dtype, ctrip, args.cols)
    masked = masked_home(args.isa, args.dtype, below) if below and args.mask_names else None
    # Each cut leaves the rest of the columns in a copy of the nest right after it, whose
    # loops are the next ones of the same names; nests are scheduled last first, so that
    # the copies a kernel's row tail makes do not renumber the nests still to come.
    nests = [(target_loop, args.inner, reds)]
    pieces = [p for p in (width, below) if p]
    for cut in [main] + pieces[:-1]:
        a, b, ks = nests[-1]
        calls += [
            ExoCall("cut_loop", (Loop(b), cut)),
            ExoCall("fission", (Stmt(b, ("after",)),), (("n_lifts", 1),)),
            ExoCall("shift_loop", (Loop(next_pattern(b)), 0)),
            ExoCall("simplify"),
        ]
        nests.append((next_pattern(a), next_pattern(b), [next_pattern(k) for k in ks]))
    if below and masked is None:  # the column loop moves below every reduction loop
        _, b, ks = nests[-1]
        calls += [ExoCall("reorder_loops", (Loop(b),))] * len(ks)
    if masked is not None:
        a, b, ks = nests[-1]
        lanes = masked.lanes(args.dtype)
        names = (args.mask_names or "").split()
        one = replace(
            _piece(args, b, ks, names), isa=masked.name, cols=lanes, rows=narrow_rows(masked, 1, args.trip or 1)
        )
        calls += _tiles(a, one, ks, col_base=main + width, masked=below)
    if width:
        assert narrow is not None
        a, b, ks = nests[1]
        ops = narrow.vector(args.dtype)
        assert ops is not None
        vectors = width // ops.lanes
        narrower = replace(
            _piece(args, b, ks, (args.col_names or "").split()),
            isa=narrow.name,
            cols=width,
            rows=narrow_rows(narrow, vectors, args.trip or 1),
        )
        calls += _tiles(a, narrower, ks, col_base=main)
    return calls + _tiles(target_loop, replace(args, ctrip=None), reds) + [ExoCall("simplify")]


def _piece(args: VectorTileArgs, inner: str, reds: list[str], names: list[str]) -> VectorTileArgs:
    """The tile's arguments for the kernel of a column piece whose nest has column loop
    ``inner`` and reduction loops ``reds``, with its 18 names: no tails or steps of its own."""
    from schedsearch.transforms.rules.register_tile import Order

    return replace(
        args,
        inner=inner,
        red=reds[0],
        reds=" ".join(reds[1:]) or None,
        order=Order.ROWS,
        ctrip=None,
        names=" ".join(names[:9]),
        tail_names=" ".join(names[9:]),
        col_names=None,
        mask_names=None,
        **_absent(Prep().fields()),
    )


def _tiles(
    target_loop: str, args: VectorTileArgs, reds: list[str], col_base: int = 0, masked: int = 0
) -> list[ExoCall]:
    """One nest's kernel, and the cut tail's kernel when its rows do not divide its trip."""
    trip = args.trip or 0
    names = args.names.split()
    a_name = loop_name(target_loop)
    calls, unrolls = _kernel(
        args,
        a_name,
        target_loop,
        reds,
        args.rows,
        names,
        base=None,
        cut=bool(trip % args.rows),
        col_base=col_base,
        masked=masked,
    )
    if trip % args.rows:
        # The cut tail's rows loop and reduction loops are the second ones named like the
        # main kernel's (whose rows are not unrolled yet).
        start = trip // args.rows * args.rows
        tail = [next_pattern(r) for r in reds]
        tail_calls, tail_unrolls = _kernel(
            args,
            a_name,
            f"{names[1]} #1",
            tail,
            trip % args.rows,
            args.tail_names.split(),
            base=start,
            col_base=col_base,
            masked=masked,
        )
        calls += tail_calls
        unrolls += tail_unrolls
    # Both kernels are unrolled last: each Exo call costs with the size of the whole proc,
    # and the tail's calls on a proc with the main kernel still rolled cost half as much.
    return calls + unrolls


def _kernel(
    args: VectorTileArgs,
    a_name: str,
    rows_loop: str,
    reds: list[str],
    rows: int,
    names: list[str],
    base: int | None,
    cut: bool = False,
    col_base: int = 0,
    masked: int = 0,
) -> tuple[list[ExoCall], list[ExoCall]]:
    """The calls for one kernel on the nest whose rows loop (``a_name`` before the step) is
    ``rows_loop`` and whose
    reduction loops are ``reds`` (outermost first); ``base`` is the first row of a tail nest
    (None for the main nest, whose rows start at 0); ``cut`` splits the rows with a cut tail
    left for a second kernel; ``masked`` (columns fewer than one vector's lanes) makes it a
    kernel of one vector masked to that many lanes. The output tile is staged around the
    outermost reduction loop; the vectors and broadcasts are loaded in the innermost.
    Returns the calls that build the kernel and, apart, the unrolls that make it
    straight-line code."""
    ao, ai, bo, bi, bv, bl, reg, vec, bcast = names
    red, inner = reds[0], reds[-1]
    t = target(args.isa)
    ops = t.vector(args.dtype)
    assert ops is not None and t.memory is not None and t.module is not None  # VectorTileArgs.check
    lanes = ops.lanes
    memory = Memory(t.memory, t.memory_module)
    cols = masked or args.cols
    vectors = cols // lanes or 1
    calls = []
    if cut:
        calls += [ExoCall("divide_loop", (rows_loop, rows, (ao, ai)), (("tail", "cut"),)), ExoCall("simplify")]
    else:
        calls.append(ExoCall("divide_loop", (rows_loop, rows, (ao, ai)), (("perfect", True),)))
    if masked:
        # the columns as one vector whose lanes past the last column are guarded: the
        # guard moves inside the reduction loops, as Exo's masked instructions have it
        calls += masked_tail(args.inner, lanes, bo, bl)
        calls += [ExoCall("lift_scope", (Loop(k),)) for k in reds]
    else:
        calls += [
            ExoCall("divide_loop", (args.inner, cols, (bo, bi)), (("perfect", True),)),
            ExoCall("reorder_loops", (Nest(f"{ai} {bo}"),)),
        ]
    for k in reds:  # each reduction loop moves above the tile's rows and columns
        calls += [ExoCall("reorder_loops", (Loop(k, up=1),)), ExoCall("reorder_loops", (Loop(k, up=1),))]
    if args.order == "cols" and not masked:
        calls.append(ExoCall("reorder_loops", (Nest(f"{ao} {bo}"),)))
    first = f"{rows} * {ao}" if base is None else f"{base} + {rows} * {ao}"
    b_name = loop_name(args.inner)
    left = str(col_base) if masked else f"{col_base} + {cols} * {bo}" if col_base else f"{cols} * {bo}"
    dims = {a_name: f"{first}:{first} + {rows}", b_name: f"{left}:{left} + {cols}"}
    index = (args.index or f"{a_name} {b_name}").split()
    window = f"{args.out}[{', '.join(dims.get(v, v) for v in index)}]"
    calls += [ExoCall("stage_mem", (Loop(red), window, reg)), ExoCall("simplify")]
    if masked:  # the staged tile: one vector per row, loaded and stored under masks
        calls += [ExoCall("resize_dim", (reg, 1, lanes, 0))]
        calls += masked_tail(Stmt(red, ("prev", 0)), lanes, bo, bl) + masked_tail(Stmt(red, ("next", 0)), lanes, bo, bl)
    else:  # columns -> vectors x lanes, in the compute loop and the tile's load and store loops
        calls += [
            ExoCall("divide_loop", (bi, lanes, (bv, bl)), (("perfect", True),)),
            ExoCall("divide_loop", (Stmt(red, ("prev", 0)), lanes, (bv, bl)), (("perfect", True),)),
            ExoCall("divide_loop", (Stmt(red, ("next", 0)), lanes, (bv, bl)), (("perfect", True),)),
            ExoCall("divide_dim", (reg, 1, lanes)),
            ExoCall("simplify"),
        ]
    calls += [
        ExoCall("set_memory", (reg, memory)),
        # the column vectors of the streamed operand: loaded once per reduction step
        ExoCall("bind_expr", (Within(inner, f"{args.vec}[_]"), vec)),
        ExoCall("expand_dim", (vec, lanes, bl)),
    ]
    if not masked:
        calls.append(ExoCall("expand_dim", (vec, vectors, bv)))
    # out of the lanes and the vectors (or the guard) and the rows
    calls += [
        ExoCall("lift_alloc", (vec,), (("n_lifts", 3),)),
        ExoCall("fission", (After(f"{vec} = _"),), (("n_lifts", 3),)),
        ExoCall("remove_loop", (Stmt(inner, (1,)),)),
        ExoCall("set_memory", (vec, memory)),
        # one broadcast element per row
        ExoCall("bind_expr", (Within(inner, f"{args.bcast}[_]"), bcast)),
        ExoCall("expand_dim", (bcast, lanes, bl)),
        ExoCall("lift_alloc", (bcast,), (("n_lifts", 2),)),
        ExoCall("fission", (After(f"{bcast} = _"),), (("n_lifts", 2),)),
    ]
    if not masked:
        calls.append(ExoCall("remove_loop", (Stmt(inner, (2, 1)),)))
    roles = MASKED_ROLES if masked else ROLES
    calls += [
        ExoCall("set_memory", (bcast, memory)),
        ExoCall("simplify"),
        # the lane loops are the kernel's own (``bl``): only they are tried
        ExoCall("replace_in", ((bl,), tuple(Instr(str(ops.get(r)), t.module) for r in roles))),
    ]
    if masked:  # straight-line code: the rows
        return calls, [ExoCall("unroll_loop", (Stmt(inner, (2,)),))]
    # straight-line code: the vector loads, the FMAs of a row, then the rows
    unrolls = [
        ExoCall("unroll_loop", (Stmt(inner, (1,)),)),
        ExoCall("unroll_loop", (Stmt(inner, (1 + vectors, 2)),)),
        ExoCall("unroll_loop", (Stmt(inner, (1 + vectors,)),)),
    ]
    return calls, unrolls


def scalar_tile(target_loop: str, args: ScalarTileArgs) -> list[ExoCall]:
    """Tile ``a`` by rows and ``b`` by cols, move the reduction above the tile, stage the
    output tile in a stack buffer around it, and unroll the rows in groups: gcc then
    vectorises the column loop with the accumulators in registers."""
    rows, group, red = args.rows, args.group, args.red
    calls = [
        ExoCall("divide_loop", (target_loop, rows, (args.ao, args.ai)), (("perfect", True),)),
        ExoCall("divide_loop", (args.inner, args.cols, (args.bo, args.bi)), (("perfect", True),)),
        ExoCall("reorder_loops", (Nest(f"{args.ai} {args.bo}"),)),
        ExoCall("reorder_loops", (Loop(red, up=1),)),
        ExoCall("reorder_loops", (Loop(red, up=1),)),
    ]
    if args.order == "cols":
        calls.append(ExoCall("reorder_loops", (Nest(f"{args.ao} {args.bo}"),)))
    calls += [
        ExoCall("stage_mem", (Loop(red), args.window, args.name)),
        ExoCall("set_memory", (args.name, Memory("DRAM_STACK"))),
        ExoCall("simplify"),
    ]
    if group < rows:
        calls += [
            ExoCall("divide_loop", (args.ai, group, (args.aio, args.aii)), (("perfect", True),)),
            ExoCall("reorder_loops", (Loop(args.bi, up=1),)),
            ExoCall("unroll_loop", (args.aii,)),
            ExoCall("unroll_loop", (args.aio,)),
        ]
    else:
        calls += [ExoCall("reorder_loops", (Loop(args.bi, up=1),)), ExoCall("unroll_loop", (args.ai,))]
    return calls + [ExoCall("simplify")]


def _absent(fields: dict[str, Any]) -> dict[str, Any]:
    """The same fields, every one None."""
    return dict.fromkeys(fields)
