"""Rules that restructure loops: reorder, split, tile, hoist, sink, unroll, fuse, simplify,
parallelize.

``autofission`` is deliberately absent: in Exo 1.0.0 it has no legality check and produced
wrong code.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from schedsearch.core import ExpandOptions, Rewrite, RewriteKind
from schedsearch.transforms.calls import ExoCall, Loop, Nest
from schedsearch.transforms.rules.args import StepArgs, count, loop, naming, sized
from schedsearch.transforms.rules.base import ProcView, Rule
from schedsearch.transforms.walk import LoopInfo

#: Preferred (rows, columns) factors of a 2-D tile: few rows, columns a multiple of the
#: SIMD width so the inner loop vectorises.
TILE_ROWS = (4, 8)
TILE_COLS = (8, 16, 32)
#: Factors of a sink: how many iterations of the split loop run together inside the loops
#: below it (a few, so what they share stays in registers).
SINK_FACTORS = (2, 4)
#: The deepest a sink moves a loop's inner part.
SINK_LEVELS = 2
#: Unrolling beyond this many statements in total makes simplify (and gcc) slow.
MAX_UNROLLED_STATEMENTS = 256


class Tail(StrEnum):
    """What ``divide_loop`` does with iterations a factor does not divide (Exo's spellings)."""

    PERFECT = "perfect"  # none are left: Exo checks that the factor divides the trip count
    CUT = "cut"  # a remainder loop after the main one
    GUARD = "guard"  # one more outer iteration, guarded by an ``if``
    CUT_AND_GUARD = "cut_and_guard"  # a remainder loop whose body is guarded


#: Tail strategy of splits that do not divide the trip count.
TAIL = Tail.CUT_AND_GUARD


@dataclass(frozen=True, slots=True)
class NoArgs(StepArgs):
    """A step that takes no arguments besides its target."""


@dataclass(frozen=True, slots=True)
class SplitArgs(StepArgs):
    factor: int = count()
    outer: str = naming()
    inner: str = naming()
    # perfect only where the factor divides the trip count
    tail: Tail = sized(default=Tail.PERFECT)  # noqa: RUF009 (sized() makes a dataclasses.field)


@dataclass(frozen=True, slots=True)
class TileArgs(StepArgs):
    inner: str = loop()  # the nested loop tiled with the target
    fa: int = count()  # the target's factor
    fb: int = count()  # the nested loop's factor
    ao: str = naming()
    ai: str = naming()
    bo: str = naming()
    bi: str = naming()


@dataclass(frozen=True, slots=True)
class HoistArgs(StepArgs):
    levels: int = count()


@dataclass(frozen=True, slots=True)
class SinkArgs(StepArgs):
    factor: int = count()
    levels: int = count()
    outer: str = naming()
    inner: str = naming()


@dataclass(frozen=True, slots=True)
class FuseArgs(StepArgs):
    second: str = loop()  # the sibling fused into the target (the loop right after it)


def divide(target: str, factor: int, outer: str, inner: str) -> ExoCall:
    """The Exo call splitting ``target`` by a ``factor`` that divides its trip count."""
    return ExoCall("divide_loop", (target, factor, (outer, inner)), (("perfect", True),))


def split_factors(trip: int, cap: int, allow_tails: bool) -> list[int]:
    """Split factors for a loop of ``trip`` iterations, best first, at most ``cap``.

    Candidates are the divisors and the powers of two below ``trip``; multiples of 8 (SIMD
    widths) up to 64 come first, then other small factors; exact divisors before tails.
    """
    candidates: set[int] = set()
    d = 1
    while d * d <= trip:
        if trip % d == 0:
            candidates.update({d, trip // d})
        d += 1
    candidates -= {1, trip}
    power = 2
    while power < trip:
        candidates.add(power)
        power *= 2
    if not allow_tails:
        candidates = {d for d in candidates if trip % d == 0}
    ranked = sorted(candidates, key=lambda d: (d > 64, d % 8 != 0, trip % d != 0, d))
    return ranked[:cap]


def pair_target(view: ProcView, outer: LoopInfo) -> str | None:
    """``"a b"`` for the first perfectly nested pair (a, b), ``"a b #n"`` for the n-th."""
    pattern = f"for {outer.name} in _:\n  for {outer.only_child} in _: _"
    matches = view.proc.find(pattern, many=True)
    cursor = view.proc.find_loop(outer.pattern)
    index = next((i for i, c in enumerate(matches) if c == cursor), None)
    if index is None:
        return None
    return f"{outer.name} {outer.only_child}" + (f" #{index}" if index else "")


class Reorder(Rule):
    """Swap a perfectly nested pair of loops.

    ``reorder i j``::

        for i in seq(0, 64):            for j in seq(0, 64):
            for j in seq(0, 64):   ->       for i in seq(0, 64):
                s                               s
    """

    kind = RewriteKind.REORDER
    deferred = True
    records = (NoArgs,)

    def propose(self, view: ProcView, options: ExpandOptions) -> list[Rewrite]:
        targets = [pair_target(view, info) for info in view.loops if info.only_child]
        return [self.step(target, NoArgs()) for target in targets if target is not None]

    def lower(self, target: str, args: NoArgs) -> list[ExoCall]:  # type: ignore[override]  # each rule lowers its own record
        return [ExoCall("reorder_loops", (Nest(target),))]


class Split(Rule):
    """Divide a constant-bound loop into an outer and an inner loop.

    ``split i #0 factor=8 outer=io inner=ii tail=perfect``::

        for i in seq(0, 64):         for io in seq(0, 8):
            s[i]              ->         for ii in seq(0, 8):
                                             s[8 * io + ii]

    With a tail (``cut_and_guard``) the remainder iterations run in a guarded second loop.
    """

    kind = RewriteKind.SPLIT
    records = (SplitArgs,)

    def propose(self, view: ProcView, options: ExpandOptions) -> list[Rewrite]:
        out = []
        for info in view.loops:
            trip = info.trip
            if trip is None or trip < 4 or info.lo != 0:
                continue
            factors = split_factors(trip, options.max_split_factors, options.allow_tails)
            if not factors:
                continue
            outer, inner = view.fresh(f"{info.name}o", f"{info.name}i")
            for f in factors:
                tail = Tail.PERFECT if trip % f == 0 else TAIL
                out.append(self.step(info.pattern, SplitArgs(factor=f, outer=outer, inner=inner, tail=tail)))
        return out

    def lower(self, target: str, args: SplitArgs) -> list[ExoCall]:  # type: ignore[override]  # each rule lowers its own record
        if args.tail is Tail.PERFECT:
            return [divide(target, args.factor, args.outer, args.inner)]
        # A tail leaves "n / f * f" in indices; Exo 1.0.0 prints it as a float ("42.0")
        # inside an instruction's window argument, which gcc rejects: fold it.
        names = (args.outer, args.inner)
        return [ExoCall("divide_loop", (target, args.factor, names), (("tail", args.tail.value),)), ExoCall("simplify")]


class Tile(Rule):
    """Halide-style 2-D tiling of a perfectly nested pair, in one step.

    ``tile i #0 inner=j #0 fa=8 fb=32``::

        for i in seq(0, 64):           for io in seq(0, 8):
            for j in seq(0, 64):   ->      for jo in seq(0, 2):
                s[i, j]                        for ii in seq(0, 8):
                                                   for ji in seq(0, 32):
                                                       s[8 * io + ii, 32 * jo + ji]
    """

    kind = RewriteKind.TILE
    records = (TileArgs,)

    def propose(self, view: ProcView, options: ExpandOptions) -> list[Rewrite]:
        out = []
        for a in view.loops:
            if not a.only_child or a.trip is None or a.lo != 0:
                continue
            assert a.child is not None  # set whenever only_child is
            b = view.loop(a.child)
            if b.trip is None or b.lo != 0:
                continue
            ao, ai, bo, bi = view.fresh(f"{a.name}o", f"{a.name}i", f"{b.name}o", f"{b.name}i")
            for fa in TILE_ROWS:
                for fb in TILE_COLS:
                    if a.trip % fa or b.trip % fb or fa >= a.trip or fb >= b.trip:
                        continue
                    args = TileArgs(inner=b.pattern, fa=fa, fb=fb, ao=ao, ai=ai, bo=bo, bi=bi)
                    out.append(self.step(a.pattern, args))
        return out

    def lower(self, target: str, args: TileArgs) -> list[ExoCall]:  # type: ignore[override]  # each rule lowers its own record
        return [
            divide(target, args.fa, args.ao, args.ai),
            divide(args.inner, args.fb, args.bo, args.bi),
            ExoCall("reorder_loops", (Nest(f"{args.ai} {args.bo}"),)),
        ]


class Hoist(Rule):
    """Move a loop outward over ``levels`` (2 or more) perfectly nested enclosing loops.

    ``hoist k #0 levels=2``::

        for io ...: for jo ...:          for io ...: for jo ...:
            for ii ...:                      for k ...:
                for ji ...:          ->          for ii ...:
                    for k ...:                       for ji ...:
                        s                                s
    """

    kind = RewriteKind.HOIST
    deferred = True
    records = (HoistArgs,)

    def propose(self, view: ProcView, options: ExpandOptions) -> list[Rewrite]:
        return [self.step(info.pattern, HoistArgs(levels=n)) for info in view.loops for n in range(2, info.chain + 1)]

    def lower(self, target: str, args: HoistArgs) -> list[ExoCall]:  # type: ignore[override]  # each rule lowers its own record
        return [ExoCall("reorder_loops", (Loop(target, up=1),))] * args.levels


def nest_below(view: ProcView, info: LoopInfo) -> int:
    """How many loops form a perfect nest below ``info`` (each one's body exactly the next)."""
    depth = 0
    while info.child is not None:
        depth += 1
        info = view.loop(info.child)
    return depth


class Sink(Rule):
    """Split a loop and move its inner part inward below the next ``levels`` loops, in one
    step (strip-mining and interchange): each iteration of the loops it passes then does
    ``factor`` iterations of the split loop together, reusing what they share - on a
    reduction, the output element stays in a register over ``factor`` terms.

    ``sink k #0 factor=2 levels=1``::

        for k in seq(0, 16):           for ko in seq(0, 8):
            for i in seq(0, 16):   ->      for i in seq(0, 16):
                s[i, k]                        for ki in seq(0, 2):
                                                   s[i, 2 * ko + ki]

    The split alone measures no faster (its inner loop still encloses the others), so a
    search guided by measurements rarely takes the second step; on the staged 16x16 i8
    matmul (Zen 5) the two together are 1.4x faster than either.
    """

    kind = RewriteKind.SINK
    deferred = True
    records = (SinkArgs,)

    def propose(self, view: ProcView, options: ExpandOptions) -> list[Rewrite]:
        out = []
        for info in view.loops:
            trip = info.trip
            if info.child is None or trip is None or info.lo != 0:
                continue
            deepest = min(SINK_LEVELS, nest_below(view, info))
            outer, inner = view.fresh(f"{info.name}o", f"{info.name}i")
            for factor in SINK_FACTORS:
                if factor >= trip or trip % factor:
                    continue
                for levels in range(1, deepest + 1):
                    args = SinkArgs(factor=factor, levels=levels, outer=outer, inner=inner)
                    out.append(self.step(info.pattern, args))
        return out

    def lower(self, target: str, args: SinkArgs) -> list[ExoCall]:  # type: ignore[override]  # each rule lowers its own record
        # each reorder swaps the inner part with the loop that is now its whole body
        return [
            divide(target, args.factor, args.outer, args.inner),
            *[ExoCall("reorder_loops", (Loop(args.inner),))] * args.levels,
        ]


def _unroll_limit(info: LoopInfo, options: ExpandOptions) -> int:
    # A loop around one or two statements stays small when unrolled, so it may be longer;
    # loops with bigger bodies keep the configured limit that keeps simplify tractable.
    return 4 * options.max_unroll if info.statements <= 2 else options.max_unroll


class Unroll(Rule):
    """Fully unroll a short constant-bound loop.

    ``unroll ii #0`` (``for ii in seq(0, 2): s[ii]``) -> ``s[0]; s[1]``.
    """

    kind = RewriteKind.UNROLL
    records = (NoArgs,)

    def propose(self, view: ProcView, options: ExpandOptions) -> list[Rewrite]:
        return [
            self.step(info.pattern, NoArgs())
            for info in view.loops
            if info.trip is not None
            and 2 <= info.trip <= _unroll_limit(info, options)
            and info.trip * info.statements <= MAX_UNROLLED_STATEMENTS
        ]

    def lower(self, target: str, args: NoArgs) -> list[ExoCall]:  # type: ignore[override]  # each rule lowers its own record
        return [ExoCall("unroll_loop", (target,))]


class Fuse(Rule):
    """Fuse two adjacent sibling loops with equal bounds.

    ``fuse i #0 second=j #0``::

        for i in seq(0, n): s1          for i in seq(0, n):
        for j in seq(0, n): s2    ->        s1
                                            s2
    """

    kind = RewriteKind.FUSE
    records = (FuseArgs,)

    def propose(self, view: ProcView, options: ExpandOptions) -> list[Rewrite]:
        out = []
        for info in view.loops:
            if info.next_sibling is None:
                continue
            other = view.loop(info.next_sibling)
            if info.lo is not None and info.hi is not None and (info.lo, info.hi) == (other.lo, other.hi):
                out.append(self.step(info.pattern, FuseArgs(second=other.pattern)))
        return out

    def lower(self, target: str, args: FuseArgs) -> list[ExoCall]:  # type: ignore[override]  # each rule lowers its own record
        # the sibling right after the target: its pattern may be renumbered by then
        return [ExoCall("fuse", (Loop(target), Loop(target, next=True)))]


class Simplify(Rule):
    """Exo's algebraic simplification of index expressions and bounds.

    ``simplify proc``: ``C[(8 * io + ii) - 8 * io]`` -> ``C[ii]``.
    """

    kind = RewriteKind.SIMPLIFY
    records = (NoArgs,)

    def propose(self, view: ProcView, options: ExpandOptions) -> list[Rewrite]:
        return [self.step("proc", NoArgs())]

    def lower(self, target: str, args: NoArgs) -> list[ExoCall]:  # type: ignore[override]  # each rule lowers its own record
        return [ExoCall("simplify")]


class Parallelize(Rule):
    """Run an outermost loop's iterations on several threads (OpenMP).

    ``parallelize io #0``: ``for io in seq(0, 8)`` -> ``for io in par(0, 8)``.
    """

    kind = RewriteKind.PARALLELIZE
    records = (NoArgs,)

    def propose(self, view: ProcView, options: ExpandOptions) -> list[Rewrite]:
        if not options.allow_parallel:
            return []
        return [self.step(info.pattern, NoArgs()) for info in view.loops if info.depth == 0]

    def lower(self, target: str, args: NoArgs) -> list[ExoCall]:  # type: ignore[override]  # each rule lowers its own record
        return [ExoCall("parallelize_loop", (target,))]
