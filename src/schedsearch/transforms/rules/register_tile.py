"""A register tile of a reduction nest (a GEMM's micro-kernel), as one rewrite.

A fast matmul needs several plain steps at once (tile, move the reduction outward, stage
the output tile, unroll the rows); most intermediate states are slower than the simple loop
interchange, so a greedy search rarely walks through them. ``register_tile`` makes the
whole register-blocking move one step, in one of two forms:

- On a vector target (``targets.Target``: AVX-512, AVX2, NEON) the tile is written in the
  target's own instructions. Left to itself, gcc's vectoriser keeps at most about eight
  accumulators in registers before it spills; an R x V tile needs R*V accumulators, V
  vectors of the streamed operand and one broadcast, which only explicit instructions get
  right. The output tile lives in the target's vector memory, each reduction step loads the
  column vectors once, broadcasts one element per row and issues one FMA per accumulator.
  The shapes come from the target's table: every R x V with ``R*V + V + 1`` registers that
  fit, ranked by loads per FMA (AVX2: 4x3 and 6x2 vectors; AVX-512: 6x4, 9x3, ...). Rows
  need not divide the loop: the remaining rows form a cut tail with the same kernel.
- On the ``scalar`` target, and on a vector target for a nest its instructions cannot
  compute (an element type it has no FMA for, a widening i8 product), the output tile is
  staged in a stack buffer and its rows unrolled in groups; gcc's vectoriser then keeps the
  accumulators in registers (``isa=scalar``).

Both lower to ordinary Exo scheduling calls, so an exported schedule shows every step.
Older schedule files replay unchanged: ``simd_kernel`` steps are AVX2 tiles, ``micro_kernel``
steps are scalar tiles.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from schedsearch.core import ArgValue, DType, ExpandOptions, Rewrite, RewriteKind
from schedsearch.targets import Target, TargetName, target
from schedsearch.transforms.calls import ExoCall
from schedsearch.transforms.rules.args import ArgError, StepArgs, count, loop, naming, sized
from schedsearch.transforms.rules.base import ProcView, Rule
from schedsearch.transforms.rules.layout import Side
from schedsearch.transforms.rules.normalize import Prep, blockings, preparations
from schedsearch.transforms.rules.tile_lowering import (
    ROLES,
    column_split,
    masked_home,
    patterns,
    scalar_tile,
    tile_targets,
    vector_tile,
)
from schedsearch.transforms.rules.tile_nests import VectorNest, scalar_nest, tile_nests, tile_shapes, vector_nest
from schedsearch.transforms.walk import LoopInfo

#: Vector tile shapes offered per nest and target (the best few by loads per FMA).
SHAPES_PER_TARGET = 5
#: (rows, columns, rows per group) of the scalar target's tile. Columns are one or two AVX2
#: vectors of f32; rows are unrolled in groups so that gcc keeps the accumulators plus one
#: group of broadcasts in the 16 ymm registers (8x8 in groups of 4 measured best).
SCALAR_SHAPES = ((8, 8, 4), (8, 8, 8), (4, 16, 4))
#: Names each vector kernel needs, in the order of the ``names`` argument.
NAME_BASES = ("o", "i", "o", "i", "v", "l")  # rows out/in, columns out/in, vector, lane


class Order(StrEnum):
    """Which loop over output tiles is outermost."""

    ROWS = "rows"  # rows of tiles outermost
    COLS = "cols"  # columns of tiles outermost: a packed column panel is copied once per column


# ignore[misc] below: mypy takes args.count()/loop()/naming(), which are dataclasses.field()
# without a default, for defaults
@dataclass(frozen=True, slots=True)
class VectorTileArgs(StepArgs):
    """A register tile in a vector target's instructions."""

    inner: str = loop()  # the column loop ``b``
    red: str = loop()  # the outermost reduction loop
    rows: int = count()
    cols: int = count()
    order: Order  # type: ignore[misc]
    out: str  # type: ignore[misc]  # the output, broadcast and streamed (vector) operands
    bcast: str  # type: ignore[misc]
    vec: str  # type: ignore[misc]
    names: str = naming()  # nine names: rows, columns, vector, lane loops; three buffers
    tail_names: str = naming()  # the same for the cut tail's kernel
    isa: TargetName = TargetName.AVX2  # ``simd_kernel`` steps name none: they are AVX2 tiles
    dtype: DType = DType.F32
    trip: int | None = count(
        default=None, sized=True
    )  # the rows loop's trip count: a cut tail when rows do not divide it
    reds: str | None = loop(default=None)  # inner reduction loops, outermost first
    index: str | None = None  # the output's index variables when not just ``a b``
    # Normalizing steps first (``normalize.Prep``): init / epilogue split off, a pair
    # swapped, an operand copied into a panel (``layout.Panel``: its loop, side, name, dims).
    fission_before: str | None = loop(default=None)
    fission_after: str | None = loop(default=None)
    lifts: int | None = count(default=None)
    swap: str | None = None
    panel: str | None = loop(default=None)
    panel_side: Side | None = None
    panel_name: str | None = naming(default=None)
    panel_dims: str | None = sized(default=None)
    # a two-dimensional panel copied in squares of ``panel_block`` (older files: row by row)
    panel_block: int | None = count(minimum=2, default=None)
    panel_loops: str | None = naming(default=None)
    # then the reduction loop ``red_block`` cut into blocks (``normalize.Blocking``)
    red_block: str | None = loop(default=None)
    red_block_factor: int | None = count(minimum=2, default=None)
    red_block_names: str | None = naming(default=None)
    red_block_levels: int | None = count(default=None)
    # The column loop's trip count when ``cols`` does not divide it: the rest of the columns
    # get a narrower kernel (named by the 18 ``col_names``) and a plain nest below one vector.
    ctrip: int | None = count(default=None, sized=True)
    col_names: str | None = naming(default=None)
    # The columns narrower than one vector: a kernel of one masked vector (its 18 names)
    # where the target has masks; without them (and in older files) a plain nest.
    mask_names: str | None = naming(default=None)

    def check(self) -> None:
        for name in ("names", "tail_names"):
            if len(getattr(self, name).split()) != 9:
                raise ArgError(f"{name} must be nine names separated by spaces")
        for name in ("col_names", "mask_names"):
            if getattr(self, name) is not None and len(getattr(self, name).split()) != 18:
                raise ArgError(f"{name} must be eighteen names separated by spaces")
        if self.ctrip is not None and self.ctrip < self.cols:
            raise ArgError(f"ctrip must be at least cols ({self.cols})")
        ops = target(self.isa).vector(self.dtype)
        if ops is None or not ops.has(*ROLES):
            raise ArgError(f"isa {self.isa.value} has no {self.dtype.value} register-tile instructions")
        if self.cols % ops.lanes:
            raise ArgError(f"cols must be a multiple of the {ops.lanes} {self.dtype.value} lanes of {self.isa.value}")
        if self.reds is not None and len(self.reds.split()) % 2:
            raise ArgError("reds must be loop patterns such as 'c #0 r #0'")
        packing = (self.panel, self.panel_side, self.panel_name, self.panel_dims)
        if any(v is not None for v in packing) and any(v is None for v in packing):
            raise ArgError("panel, panel_side, panel_name and panel_dims go together")
        if self.panel is None and (self.panel_block is not None or self.panel_loops is not None):
            raise ArgError("panel_block and panel_loops need a panel")
        try:
            Prep.of(self)
        except ValueError as exc:
            raise ArgError(str(exc)) from None


# ignore[misc] below: mypy takes args.count()/loop()/naming(), which are dataclasses.field()
# without a default, for defaults
@dataclass(frozen=True, slots=True)
class ScalarTileArgs(StepArgs):
    """A register tile left to gcc's vectoriser: staged output tile, rows unrolled in groups."""

    inner: str = loop()
    red: str = loop()
    rows: int = count()
    cols: int = count()
    group: int = count()  # rows unrolled together
    order: Order  # type: ignore[misc]
    window: str  # type: ignore[misc]  # the output tile staged, e.g. C[8 * io:8 * io + 8, 8 * jo:8 * jo + 8]
    ao: str = naming()
    ai: str = naming()
    bo: str = naming()
    bi: str = naming()
    aio: str = naming()
    aii: str = naming()
    name: str = naming()
    isa: TargetName = TargetName.SCALAR  # ``micro_kernel`` steps name none

    def check(self) -> None:
        if self.isa is not TargetName.SCALAR:
            raise ArgError(f"isa must be scalar for a tile with groups, not {self.isa.value!r}")
        if self.rows % self.group:
            raise ArgError(f"group must divide rows ({self.rows}), not {self.group}")


class RegisterTile(Rule):
    """Register-block ``a, b, k`` into an R x C tile of the target's registers.

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

    ``register_tile i #0 isa=scalar inner=j #0 red=k #0 rows=8 cols=8 group=4 order=cols ...``::

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

    heavy = True  # a whole register tile built and unrolled: 1-2.5 s of Exo each

    kind = RewriteKind.REGISTER_TILE
    aliases = (RewriteKind.SIMD_KERNEL, RewriteKind.MICRO_KERNEL)
    records = (VectorTileArgs, ScalarTileArgs)

    def record_for(self, kind: RewriteKind, raw: Mapping[str, ArgValue]) -> type[StepArgs]:
        if kind is RewriteKind.MICRO_KERNEL or (kind is RewriteKind.REGISTER_TILE and raw.get("isa") == "scalar"):
            return ScalarTileArgs
        return VectorTileArgs

    def propose(self, view: ProcView, options: ExpandOptions) -> list[Rewrite]:
        t = target(options.target)
        out = []
        for a, b in tile_nests(view):
            nest = vector_nest(view, a, b) if t.is_vector else None
            home = _home(t, nest)
            if nest is not None and home is not None:
                out += self._vector(view, a, b, nest, home, options)
            else:
                out += self._scalar(view, a, b)
        if t.is_vector:
            # nests a few normalizing steps away: the steps and the tile, as one step
            def matches(v: ProcView) -> frozenset[tuple[str, str]]:
                return _vector_nests(v, t)

            prepared = list(preparations(view, matches))
            # then long reductions of every nest a tile matches, as it stands or prepared, in blocks
            prepared += [b for p in [(Prep(), view, matches(view)), *prepared] for b in blockings(*p, matches)]
            for prep, normal, new in prepared:
                for a, b in tile_nests(normal):
                    nest = vector_nest(normal, a, b)
                    home = _home(t, nest)
                    if (a.pattern, b.pattern) in new and nest is not None and home is not None:
                        out += self._vector(normal, a, b, nest, home, options, prep)
        return out

    def _vector(
        self,
        view: ProcView,
        a: LoopInfo,
        b: LoopInfo,
        nest: VectorNest,
        home: Target,
        options: ExpandOptions,
        prep: Prep = Prep(),
    ) -> list[Rewrite]:
        assert a.trip is not None and b.trip is not None  # tile_nests yields constant loops only
        ops = home.vector(nest.dtype)
        assert ops is not None
        fresh = view.fresh(
            *(
                name
                for suffix in ("", "_t", "_c", "_ct", "_m", "_mt")
                for name in _bases(a.name + suffix, b.name + suffix, nest, suffix)
            )
        )
        names, tail_names, col_names, mask_names = fresh[:9], fresh[9:18], fresh[18:36], fresh[36:]
        tails = options.allow_tails
        shapes = [
            (rows, vectors * ops.lanes)
            for rows, vectors in tile_shapes(home)
            if (b.trip % (vectors * ops.lanes) == 0 or (tails and b.trip > vectors * ops.lanes))
            and rows <= a.trip
            and (tails or a.trip % rows == 0)
        ]
        btrip = b.trip
        shapes.sort(key=lambda shape: btrip % shape[1] != 0)  # whole tiles first, tails after
        out = []
        for rows, cols in shapes[:SHAPES_PER_TARGET]:
            ctrip = b.trip if b.trip % cols else None
            below = column_split(home.name, DType(nest.dtype), ctrip, cols)[3] if ctrip else 0
            masks = below and masked_home(home.name, DType(nest.dtype), below) is not None
            for order in Order:
                args = VectorTileArgs(
                    isa=home.name,
                    inner=b.pattern,
                    red=nest.reductions[0],
                    rows=rows,
                    cols=cols,
                    order=order,
                    trip=a.trip,
                    out=nest.out,
                    bcast=nest.bcast,
                    vec=nest.vec,
                    dtype=DType(nest.dtype),
                    names=" ".join(names),
                    tail_names=" ".join(tail_names),
                    # only nests other than a plain C[a, b] += A * B need these (older files lack them)
                    reds=" ".join(nest.reductions[1:]) or None,
                    index=" ".join(nest.index) if len(nest.index) > 2 else None,
                    ctrip=ctrip,
                    col_names=" ".join(col_names) if ctrip else None,
                    mask_names=" ".join(mask_names) if masks else None,
                    **prep.fields(),
                )
                out.append(self.step(a.pattern, args))
        return out

    def _scalar(self, view: ProcView, a: LoopInfo, b: LoopInfo) -> list[Rewrite]:
        assert a.trip is not None and b.trip is not None  # tile_nests yields constant loops only
        found = scalar_nest(view, a, b)
        if found is None:
            return []
        k, buffer, dims = found
        bases = (f"{a.name}o", f"{a.name}i", f"{b.name}o", f"{b.name}i", f"{a.name}io", f"{a.name}ii")
        ao, ai, bo, bi, aio, aii, stage = view.fresh(*bases, f"{buffer}_stage")
        out = []
        for rows, cols, group in SCALAR_SHAPES:
            if a.trip % rows or b.trip % cols or rows >= a.trip or cols >= b.trip or rows % group:
                continue
            # the output tile indexed by the tile loops, e.g. C[8 * io:8 * io + 8, 8 * jo:8 * jo + 8]
            extent = {a.name: (rows, ao), b.name: (cols, bo)}
            parts = [f"{extent[d][0]} * {extent[d][1]}:{extent[d][0]} * {extent[d][1]} + {extent[d][0]}" for d in dims]
            window = f"{buffer}[{', '.join(parts)}]"
            for order in (Order.ROWS, Order.COLS):
                args = ScalarTileArgs(
                    inner=b.pattern,
                    red=k.pattern,
                    rows=rows,
                    cols=cols,
                    group=group,
                    order=order,
                    window=window,
                    ao=ao,
                    ai=ai,
                    bo=bo,
                    bi=bi,
                    aio=aio,
                    aii=aii,
                    name=stage,
                )
                out.append(self.step(a.pattern, args))
        return out

    def lower(self, target: str, args: StepArgs) -> list[ExoCall]:
        if isinstance(args, ScalarTileArgs):
            return scalar_tile(target, args)
        assert isinstance(args, VectorTileArgs)
        return vector_tile(target, args)


def _home(t: Target, nest: VectorNest | None) -> Target | None:
    """The widest instructions of ``t``'s chain for the nest's element type (f64 on an
    AVX-512 CPU is AVX2's), None when none computes it."""
    return next(iter(tile_targets(t, nest.dtype)), None) if nest is not None else None


def _vector_nests(view: ProcView, t: Target) -> frozenset[tuple[str, str]]:
    """The (rows, columns) loop patterns of every nest a vector tile of ``t`` applies to."""
    return frozenset((a.pattern, b.pattern) for a, b in tile_nests(view) if _home(t, vector_nest(view, a, b)))


def _bases(a: str, b: str, nest: VectorNest, suffix: str = "") -> list[str]:
    """The names one vector kernel introduces, before making them fresh."""
    bases = [a + NAME_BASES[0], a + NAME_BASES[1]] + [b + x for x in NAME_BASES[2:]]
    return bases + [f"{nest.out}_reg{suffix}", f"{nest.vec}_vec{suffix}", f"{nest.bcast}_vec{suffix}"]


__all__ = ["Order", "RegisterTile", "ScalarTileArgs", "VectorTileArgs", "patterns", "tile_shapes"]
