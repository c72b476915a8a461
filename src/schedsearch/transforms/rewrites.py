"""The rewrite kinds: for each, which targets are plausible and which Exo calls apply it.

Each kind is one class with ``propose(view, options) -> list[Rewrite]`` and
``lower(rewrite) -> list[ExoCall]``. Proposals are only *plausible*; legality is decided by
Exo when the calls run. ``autofission`` is deliberately absent: in Exo 1.0.0 it has no
legality check and produced wrong code.
"""

from __future__ import annotations

from dataclasses import dataclass

from schedsearch.core import NAMING_ARGS, ExpandOptions, Rewrite, RewriteKind
from schedsearch.transforms.calls import ExoCall, Loop, Memory, Nest
from schedsearch.transforms.compute_at import ComputeAt
from schedsearch.transforms.kernels import MicroKernel, Pack
from schedsearch.transforms.register_tile import RegisterTile
from schedsearch.transforms.staging import windows_for_loop
from schedsearch.transforms.vectorize import Vectorize
from schedsearch.transforms.walk import LoopInfo, all_names, fresh_name, loop_work, loops

#: Preferred (rows, columns) factors of a 2-D tile: few rows, columns a multiple of the
#: SIMD width so the inner loop vectorises.
TILE_ROWS = (4, 8)
TILE_COLS = (8, 16, 32)
#: Unrolling beyond this many statements in total makes simplify (and gcc) slow.
MAX_UNROLLED_STATEMENTS = 256
#: Tail strategy of splits that do not divide the trip count.
TAIL = "cut_and_guard"
#: Loops doing less than this share of the proc's work get no proposals: rewriting them
#: can gain at most that share (the copy-in/out loops of a staged tile, a packing copy).
COLD_SHARE = 0.01


@dataclass(frozen=True, slots=True)
class ProcView:
    """What the proposers need to know about a proc, computed once per proposal round."""

    proc: object
    loops: tuple[LoopInfo, ...]
    names: frozenset[str]
    arg_tensors: frozenset[str]

    @staticmethod
    def of(proc) -> ProcView:
        tensors = frozenset(a.name() for a in proc.args() if a.is_tensor())
        return ProcView(proc, tuple(loops(proc)), frozenset(all_names(proc)), tensors)

    def loop(self, pattern: str) -> LoopInfo:
        return next(info for info in self.loops if info.pattern == pattern)


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


def _split_names(used: set[str], name: str) -> tuple[str, str]:
    outer = fresh_name(used, f"{name}o")
    used.add(outer)
    inner = fresh_name(used, f"{name}i")
    used.add(inner)
    return outer, inner


def _pair_target(view: ProcView, outer: LoopInfo) -> str | None:
    """``"a b"`` for the first perfectly nested pair (a, b), ``"a b #n"`` for the n-th."""
    pattern = f"for {outer.name} in _:\n  for {outer.only_child} in _: _"
    matches = view.proc.find(pattern, many=True)
    cursor = view.proc.find_loop(outer.pattern)
    index = next((i for i, c in enumerate(matches) if c == cursor), None)
    if index is None:
        return None
    return f"{outer.name} {outer.only_child}" + (f" #{index}" if index else "")


class Reorder:
    """Swap a perfectly nested pair of loops.

    ``reorder i j``::

        for i in seq(0, 64):            for j in seq(0, 64):
            for j in seq(0, 64):   ->       for i in seq(0, 64):
                s                               s
    """

    kind = RewriteKind.REORDER

    def propose(self, view: ProcView, options: ExpandOptions) -> list[Rewrite]:
        targets = [_pair_target(view, info) for info in view.loops if info.only_child]
        return [Rewrite.make(self.kind, target) for target in targets if target is not None]

    def lower(self, rewrite: Rewrite) -> list[ExoCall]:
        return [ExoCall("reorder_loops", (Nest(rewrite.target),))]


class Split:
    """Divide a constant-bound loop into an outer and an inner loop.

    ``split i #0 factor=8 outer=io inner=ii tail=perfect``::

        for i in seq(0, 64):         for io in seq(0, 8):
            s[i]              ->         for ii in seq(0, 8):
                                             s[8 * io + ii]

    With a tail (``cut_and_guard``) the remainder iterations run in a guarded second loop.
    """

    kind = RewriteKind.SPLIT

    def propose(self, view: ProcView, options: ExpandOptions) -> list[Rewrite]:
        out = []
        used = set(view.names)
        for info in view.loops:
            trip = info.trip
            if trip is None or trip < 4 or info.lo != 0:
                continue
            factors = split_factors(trip, options.max_split_factors, options.allow_tails)
            if not factors:
                continue
            outer, inner = _split_names(set(used), info.name)
            for f in factors:
                tail = "perfect" if trip % f == 0 else TAIL
                out.append(Rewrite.make(self.kind, info.pattern, factor=f, outer=outer, inner=inner, tail=tail))
        return out

    def lower(self, rewrite: Rewrite) -> list[ExoCall]:
        names = (str(rewrite.arg("outer")), str(rewrite.arg("inner")))
        tail = rewrite.arg("tail")
        if tail == "perfect":
            return [ExoCall("divide_loop", (rewrite.target, int(rewrite.arg("factor")), names), (("perfect", True),))]
        # A tail leaves "n / f * f" in indices; Exo 1.0.0 prints it as a float ("42.0")
        # inside an instruction's window argument, which gcc rejects: fold it.
        return [ExoCall("divide_loop", (rewrite.target, int(rewrite.arg("factor")), names), (("tail", str(tail)),)),
                ExoCall("simplify")]


class Tile:
    """Halide-style 2-D tiling of a perfectly nested pair, in one step.

    ``tile i #0 inner=j #0 fa=8 fb=32``::

        for i in seq(0, 64):           for io in seq(0, 8):
            for j in seq(0, 64):   ->      for jo in seq(0, 2):
                s[i, j]                        for ii in seq(0, 8):
                                                   for ji in seq(0, 32):
                                                       s[8 * io + ii, 32 * jo + ji]
    """

    kind = RewriteKind.TILE

    def propose(self, view: ProcView, options: ExpandOptions) -> list[Rewrite]:
        out = []
        for a in view.loops:
            if not a.only_child or a.trip is None or a.lo != 0:
                continue
            b = view.loop(a.child)
            if b.trip is None or b.lo != 0:
                continue
            used = set(view.names)
            ao, ai = _split_names(used, a.name)
            bo, bi = _split_names(used, b.name)
            for fa in TILE_ROWS:
                for fb in TILE_COLS:
                    if a.trip % fa or b.trip % fb or fa >= a.trip or fb >= b.trip:
                        continue
                    out.append(
                        Rewrite.make(self.kind, a.pattern, inner=b.pattern, fa=fa, fb=fb, ao=ao, ai=ai, bo=bo, bi=bi)
                    )
        return out

    def lower(self, rewrite: Rewrite) -> list[ExoCall]:
        a = rewrite.arg
        return [
            ExoCall("divide_loop", (rewrite.target, int(a("fa")), (str(a("ao")), str(a("ai")))), (("perfect", True),)),
            ExoCall("divide_loop", (str(a("inner")), int(a("fb")), (str(a("bo")), str(a("bi")))), (("perfect", True),)),
            ExoCall("reorder_loops", (Nest(f"{a('ai')} {a('bo')}"),)),
        ]


class Hoist:
    """Move a loop outward over ``levels`` (2 or more) perfectly nested enclosing loops.

    ``hoist k #0 levels=2``::

        for io ...: for jo ...:          for io ...: for jo ...:
            for ii ...:                      for k ...:
                for ji ...:          ->          for ii ...:
                    for k ...:                       for ji ...:
                        s                                s
    """

    kind = RewriteKind.HOIST

    def propose(self, view: ProcView, options: ExpandOptions) -> list[Rewrite]:
        return [
            Rewrite.make(self.kind, info.pattern, levels=n)
            for info in view.loops
            for n in range(2, info.chain + 1)
        ]

    def lower(self, rewrite: Rewrite) -> list[ExoCall]:
        step = ExoCall("reorder_loops", (Loop(rewrite.target, up=1),))
        return [step] * int(rewrite.arg("levels"))


def _unroll_limit(info: LoopInfo, options: ExpandOptions) -> int:
    # A loop around one or two statements stays small when unrolled, so it may be longer;
    # loops with bigger bodies keep the configured limit that keeps simplify tractable.
    return 4 * options.max_unroll if info.statements <= 2 else options.max_unroll


class Unroll:
    """Fully unroll a short constant-bound loop.

    ``unroll ii #0`` (``for ii in seq(0, 2): s[ii]``) -> ``s[0]; s[1]``.
    """

    kind = RewriteKind.UNROLL

    def propose(self, view: ProcView, options: ExpandOptions) -> list[Rewrite]:
        return [
            Rewrite.make(self.kind, info.pattern)
            for info in view.loops
            if info.trip is not None
            and 2 <= info.trip <= _unroll_limit(info, options)
            and info.trip * info.statements <= MAX_UNROLLED_STATEMENTS
        ]

    def lower(self, rewrite: Rewrite) -> list[ExoCall]:
        return [ExoCall("unroll_loop", (rewrite.target,))]


class Fuse:
    """Fuse two adjacent sibling loops with equal bounds.

    ``fuse i #0``::

        for i in seq(0, n): s1          for i in seq(0, n):
        for i in seq(0, n): s2    ->        s1
                                            s2
    """

    kind = RewriteKind.FUSE

    def propose(self, view: ProcView, options: ExpandOptions) -> list[Rewrite]:
        out = []
        for info in view.loops:
            if info.next_sibling is None:
                continue
            other = view.loop(info.next_sibling)
            if info.lo is not None and info.hi is not None and (info.lo, info.hi) == (other.lo, other.hi):
                out.append(Rewrite.make(self.kind, info.pattern, second=other.pattern))
        return out

    def lower(self, rewrite: Rewrite) -> list[ExoCall]:
        return [ExoCall("fuse", (Loop(rewrite.target), Loop(rewrite.target, next=True)))]


class Simplify:
    """Exo's algebraic simplification of index expressions and bounds.

    ``simplify``: ``C[(8 * io + ii) - 8 * io]`` -> ``C[ii]``.
    """

    kind = RewriteKind.SIMPLIFY

    def propose(self, view: ProcView, options: ExpandOptions) -> list[Rewrite]:
        return [Rewrite.make(self.kind, "proc")]

    def lower(self, rewrite: Rewrite) -> list[ExoCall]:
        return [ExoCall("simplify")]


class StageMem:
    """Stage the output window a loop reduces into in a ``DRAM_STACK`` buffer around it.

    ``stage_mem k #0 buffer=C window=C[8 * io:8 * io + 8, jo * 32:...] name=C_stage``::

        for k in seq(0, 512):                  C_stage: f32[8, 32] @ DRAM_STACK
            for ii in seq(0, 8):               (load C_stage from the C tile)
                for ji in seq(0, 32):   ->     for k in seq(0, 512):
                    C[8*io+ii, ...] += ...         ... C_stage[ii, ji] += ...
                                               (store C_stage back to the C tile)

    The step also simplifies, so the buffer's shape is a constant Exo can allocate. A
    one-element window (``C[i, j]`` around ``k``) becomes a scalar local instead.
    """

    kind = RewriteKind.STAGE_MEM

    def propose(self, view: ProcView, options: ExpandOptions) -> list[Rewrite]:
        out = []
        for info in view.loops:
            cursor = view.proc.find_loop(info.pattern)
            for window in windows_for_loop(cursor, set(view.arg_tensors)):
                name = fresh_name(set(view.names), f"{window.buffer}_stage")
                out.append(
                    Rewrite.make(self.kind, info.pattern, buffer=window.buffer, window=window.window, name=name)
                )
        return out

    def lower(self, rewrite: Rewrite) -> list[ExoCall]:
        name = str(rewrite.arg("name"))
        window = str(rewrite.arg("window"))
        calls = [ExoCall("stage_mem", (Loop(rewrite.target), window, name))]
        if ":" in window:
            # A one-element window becomes a scalar, already a plain C local; Exo 1.0.0
            # would print a DRAM_STACK scalar as ``float x[];``.
            calls.append(ExoCall("set_memory", (name, Memory("DRAM_STACK"))))
        return calls + [ExoCall("simplify")]


class Parallelize:
    """Run an outermost loop's iterations on several threads (OpenMP).

    ``parallelize io #0``: ``for io in seq(0, 8)`` -> ``for io in par(0, 8)``.
    """

    kind = RewriteKind.PARALLELIZE

    def propose(self, view: ProcView, options: ExpandOptions) -> list[Rewrite]:
        if not options.allow_parallel:
            return []
        return [Rewrite.make(self.kind, info.pattern) for info in view.loops if info.depth == 0]

    def lower(self, rewrite: Rewrite) -> list[ExoCall]:
        return [ExoCall("parallelize_loop", (rewrite.target,))]


#: One entry per kind, in proposal order.
RULES = (
    Reorder(),
    Tile(),
    MicroKernel(),
    RegisterTile(),
    Vectorize(),
    Hoist(),
    StageMem(),
    Pack(),
    ComputeAt(),
    Unroll(),
    Split(),
    Fuse(),
    Simplify(),
    Parallelize(),
)


def rule_for(kind: RewriteKind):
    """The rule implementing ``kind``."""
    for rule in RULES:
        if rule.kind == kind or kind in getattr(rule, "aliases", ()):
            return rule
    raise KeyError(f"no rule for rewrite kind {kind!r}")


def propose_all(proc, options: ExpandOptions) -> list[Rewrite]:
    """Every plausible rewrite of ``proc``, in a deterministic order.

    Loops doing less than ``COLD_SHARE`` of the work get none. Loops that are copies of
    each other (after an unroll, or the copy-in and copy-out loops of staging) would each
    get the same proposals; only the first copy keeps them, since
    rewriting one copy of many rarely pays and the proposals would multiply per copy
    (one unrolled SGEMM node had 354 proposals, 241 of them splits of copies).
    """
    view = ProcView.of(proc)
    work, total = loop_work(proc)
    cold = {p for p, w in work.items() if w is not None and total and w < COLD_SHARE * total}
    by_pattern = {info.pattern: info for info in view.loops}
    for info in view.loops:  # reorder targets name a pair of loops: key them by the outer one
        pair = _pair_target(view, info) if info.only_child is not None else None
        if pair is not None:
            by_pattern.setdefault(pair, info)
    seen: set[tuple] = set()
    out: list[Rewrite] = []
    for rule in RULES:
        for rw in rule.propose(view, options):
            info = by_pattern.get(rw.target)
            if info is not None and info.pattern in cold:
                continue
            if info is not None:
                # the arguments that shape the result, not the names or loop patterns it uses
                shaping = tuple((k, v) for k, v in rw.args if k not in NAMING_ARGS and "#" not in str(v))
                key = (rw.kind, info.name, info.trip, info.statements, info.depth, info.chain, shaping)
                if key in seen:
                    continue
                seen.add(key)
            out.append(rw)
    return out


def lower(rewrite: Rewrite) -> list[ExoCall]:
    """The Exo calls that apply ``rewrite``."""
    return rule_for(rewrite.kind).lower(rewrite)
