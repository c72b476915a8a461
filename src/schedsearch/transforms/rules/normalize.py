"""Normalizing moves: steps that change a nest's shape without aiming at speed, so that a
composite (a register tile) applies to it.

``fission`` is a rule of its own; ``preparations`` gives, for the reduction nests a
composite does not match as they stand, the few normalizing steps that bring them into
its form (the init and epilogue statements split off, then one pair of loops swapped or
one operand copied into a panel, ``layout.Panel``), with the proc those steps make.
``blockings`` adds one more for a nest the composite matches: a reduction too long for
the panel a tile streams to stay in L2 is cut into blocks, the blocks' loop outermost.
Exo decides every step's legality, here as everywhere.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from exo.API_cursors import ForCursor, ReduceCursor

from schedsearch.core import ExpandOptions, Rewrite, RewriteKind
from schedsearch.transforms.calls import ExoCall, Loop, Nest, Stmt, run_all
from schedsearch.transforms.rules.args import StepArgs, count
from schedsearch.transforms.rules.base import ProcView, Rule
from schedsearch.transforms.rules.layout import Panel, panel_candidates
from schedsearch.transforms.rules.loops import pair_target
from schedsearch.transforms.rules.tile_nests import reduction_chain, tile_nests
from schedsearch.transforms.walk import statements

#: Nests larger than this many statements are not normalized: they are scheduled already.
MAX_NEST_STATEMENTS = 8
#: Loop swaps and packs are tried only on procs of at most this many statements (an
#: unscheduled kernel has a handful; a register tile's tens): Exo's checks cost with the size.
MAX_PREP_STATEMENTS = 24
#: A reduction loop longer than this is also offered in blocks of a divisor of its trip
#: between the two: the panel a tile streams per block (block x its columns) then stays in
#: L2, and is worth packing (``buffers.MAX_PACK_ELEMENTS``).
MAX_REDUCTION_BLOCK = 512
MIN_REDUCTION_BLOCK = 128


@dataclass(frozen=True, slots=True)
class Blocking:
    """The reduction loop ``loop`` divided by ``factor`` into ``outer`` and ``inner``, then
    ``outer`` moved out over its ``levels`` enclosing loops: each block of the reduction
    runs over the whole nest before the next (Exo checks the reorder keeps the sums)."""

    loop: str
    factor: int
    outer: str
    inner: str
    levels: int

    def calls(self) -> list[ExoCall]:
        divide = ExoCall("divide_loop", (self.loop, self.factor, (self.outer, self.inner)), (("perfect", True),))
        return [divide] + [ExoCall("reorder_loops", (Loop(self.outer, up=1),))] * self.levels


@dataclass(frozen=True, slots=True)
class FissionArgs(StepArgs):
    before: bool  # split at the gap before the target loop (else after it)
    lifts: int = count()  # how many enclosing loops are split in two


@dataclass(frozen=True, slots=True)
class Prep:
    """Normalizing steps before a composite: the statements before and after
    ``fission_before`` / ``fission_after`` split off out of ``lifts`` loops, then the nested
    pair ``swap`` (``"a b"``, Exo's ``reorder_loops``) swapped, then an operand copied into a panel."""

    fission_before: str | None = None
    fission_after: str | None = None
    lifts: int | None = None
    swap: str | None = None
    panel: Panel | None = None
    blocking: Blocking | None = None

    def fields(self) -> dict[str, Any]:
        """These steps as a composite's step arguments (``VectorTileArgs``), None when absent."""
        panel = self.panel
        return {
            "fission_before": self.fission_before,
            "fission_after": self.fission_after,
            "lifts": self.lifts,
            "swap": self.swap,
            "panel": panel and panel.loop,
            "panel_side": panel and panel.side,
            "panel_name": panel and panel.name,
            "panel_dims": panel and panel.encode_dims(),
            "panel_block": panel and panel.block,
            "panel_loops": panel and panel.block and " ".join(panel.loops),
            **blocking_fields(self.blocking),
        }

    @staticmethod
    def of(args) -> Prep:
        """The steps named by a composite's arguments (the inverse of ``fields``); ValueError
        when the panel's arguments do not describe one."""
        panel = None
        if args.panel is not None:
            if (args.panel_block is None) != (args.panel_loops is None):
                raise ValueError("panel_block and panel_loops go together")
            loops = tuple(args.panel_loops.split()) if args.panel_loops else ()
            panel = Panel(
                args.panel,
                args.panel_side,
                args.panel_name,
                Panel.decode_dims(args.panel_dims),
                args.panel_block,
                loops,
            )
        blocking = None
        given = [args.red_block, args.red_block_factor, args.red_block_names, args.red_block_levels]
        if any(v is not None for v in given):
            if any(v is None for v in given) or len(args.red_block_names.split()) != 2:
                raise ValueError(
                    "red_block, red_block_factor, red_block_names (two names) and red_block_levels go together"
                )
            outer, inner = args.red_block_names.split()
            blocking = Blocking(args.red_block, args.red_block_factor, outer, inner, args.red_block_levels)
        return Prep(args.fission_before, args.fission_after, args.lifts, args.swap, panel, blocking)

    def calls(self) -> list[ExoCall]:
        """The Exo calls of these steps, in order."""
        calls = []
        lifts = (("n_lifts", self.lifts or 1),)
        if self.fission_before:
            calls.append(ExoCall("fission", (Stmt(self.fission_before, ("prev", "after")),), lifts))
        if self.fission_after:
            calls.append(ExoCall("fission", (Stmt(self.fission_after, ("after",)),), lifts))
        if self.swap:
            calls.append(ExoCall("reorder_loops", (Nest(self.swap),)))
        if self.panel:
            calls += self.panel.calls()
        if self.blocking:
            calls += self.blocking.calls()
        return calls


def blocking_fields(blocking: Blocking | None) -> dict[str, object]:
    """A blocking as a composite's step arguments (all None without one)."""
    if blocking is None:
        return {"red_block": None, "red_block_factor": None, "red_block_names": None, "red_block_levels": None}
    return {
        "red_block": blocking.loop,
        "red_block_factor": blocking.factor,
        "red_block_names": f"{blocking.outer} {blocking.inner}",
        "red_block_levels": blocking.levels,
    }


def _reduces(loop) -> bool:
    """Whether a reduction (``+=``) is somewhere inside ``loop``."""
    for stmt in loop.body():
        if isinstance(stmt, ReduceCursor) or (isinstance(stmt, ForCursor) and _reduces(stmt)):
            return True
    return False


def split_points(view: ProcView) -> Iterator[tuple[str, bool, bool, int]]:
    """Reduction loops that share their enclosing loop's body with other statements (an
    init before, an epilogue after): ``(pattern, has a statement before, after, enclosing
    loops)``. Only small nests: a register tile's kernel has nothing to split off."""
    seen: dict[str, int] = {}  # loops of each name so far, in pre-order: their patterns' numbers
    for stmt, enclosing in statements(view.proc):
        if not isinstance(stmt, ForCursor):
            continue
        pattern = f"{stmt.name()} #{seen.get(stmt.name(), 0)}"
        seen[stmt.name()] = seen.get(stmt.name(), 0) + 1
        if not enclosing or len(enclosing[-1][0].body()) < 2:
            continue
        if view.loop(enclosing[0][1]).statements > MAX_NEST_STATEMENTS or not _reduces(stmt):
            continue
        yield pattern, bool(stmt.prev()), bool(stmt.next()), len(enclosing)


class Fission(Rule):
    """Split the loops around a reduction loop at the gap before or after it: an init or an
    epilogue statement gets loops of its own, the reduction a perfect nest.

    ``fission k #0 before=True lifts=2``::

        for i in seq(0, M):              for i in seq(0, M):
            for j in seq(0, N):              for j in seq(0, N):
                C[i, j] = 0.0                    C[i, j] = 0.0
                for k in seq(0, K):  ->  for i in seq(0, M):
                    C[i, j] += ...           for j in seq(0, N):
                                                 for k in seq(0, K):
                                                     C[i, j] += ...

    Exo's ``fission`` checks that the statements commute (``autofission`` would not).
    """

    kind = RewriteKind.FISSION
    records = (FissionArgs,)

    def propose(self, view: ProcView, options: ExpandOptions) -> list[Rewrite]:
        out = []
        for pattern, before, after, depth in split_points(view):
            for flag, present in ((True, before), (False, after)):
                if present:
                    out += [self.step(pattern, FissionArgs(before=flag, lifts=n)) for n in sorted({1, depth})]
        return out

    def lower(self, target: str, args: FissionArgs) -> list[ExoCall]:  # type: ignore[override]  # each rule lowers its own record
        fields: dict[str, Any] = {"fission_before" if args.before else "fission_after": target, "lifts": args.lifts}
        return Prep(**fields).calls()


def _apply(proc, calls: list[ExoCall]):
    """The proc the calls make, None when Exo declines one."""
    from schedsearch.transforms.replay import EXO_CATCH, rejected_by_exo  # replay imports the rules

    try:
        return run_all(proc, calls)
    except EXO_CATCH as exc:
        if not rejected_by_exo(exc):
            raise
        return None


def preparations(view: ProcView, matches) -> Iterator[tuple[Prep, ProcView, frozenset]]:
    """Normalizing steps that make ``matches(view)`` (the nests a composite applies to, as
    a set of keys) find new nests, with the view they make and those nests' keys (a nest
    that matched before keeps no steps it does not need): first the init and epilogue
    statements of each reduction loop split off out of every enclosing loop, then, where
    that is not enough, one pair of enclosing loops swapped (a spatial loop moved outward
    between the tile's rows and columns, as in a convolution's ``o y x``) or one operand
    copied into a panel contiguous along the columns (the second ``A`` of ``A @ A^T``)."""
    before = matches(view)
    bases = [(Prep(), view)]
    for pattern, prev, nxt, depth in split_points(view):
        prep = Prep(fission_before=pattern if prev else None, fission_after=pattern if nxt else None, lifts=depth)
        proc = _apply(view.proc, prep.calls())
        if proc is not None:
            bases.append((prep, ProcView.of(proc)))
    for prep, base in bases:
        found = matches(base)
        if prep != Prep() and found - before:
            yield prep, base, found - before
        if sum(1 for _ in statements(base.proc)) > MAX_PREP_STATEMENTS:
            continue  # a scheduled proc: each step Exo checks costs with its size
        for panel in panel_candidates(base):
            packed = Prep(prep.fission_before, prep.fission_after, prep.lifts, panel=panel)
            proc = _apply(base.proc, panel.calls())
            if proc is None:
                continue
            after = ProcView.of(proc)
            if new := matches(after) - found - before:
                yield packed, after, new
        for info in base.loops:
            if info.child is None or base.loop(info.child).child is None or info.statements > MAX_NEST_STATEMENTS:
                continue  # a pair with a loop below it: the reduction stays inside
            pair = pair_target(base, info)
            if pair is None or not _reduces(base.proc.find_loop(info.pattern)):
                continue
            swapped = Prep(prep.fission_before, prep.fission_after, prep.lifts, pair)
            proc = _apply(base.proc, [ExoCall("reorder_loops", (Nest(pair),))])
            if proc is None:
                continue
            after = ProcView.of(proc)
            if new := matches(after) - found - before:
                yield swapped, after, new


def reduction_block(trip: int) -> int | None:
    """The block a reduction of ``trip`` terms is cut into: the largest divisor of ``trip``
    between ``MIN_REDUCTION_BLOCK`` and ``MAX_REDUCTION_BLOCK``; None for a reduction short
    enough already, or one no such block divides."""
    if trip <= MAX_REDUCTION_BLOCK:
        return None
    return next((f for f in range(MAX_REDUCTION_BLOCK, MIN_REDUCTION_BLOCK - 1, -1) if trip % f == 0), None)


def blockings(prep: Prep, view: ProcView, keys: frozenset, matches) -> Iterator[tuple[Prep, ProcView, frozenset]]:
    """For each nest of ``keys`` (rows, columns patterns) that ``matches(view)`` found after
    ``prep``, with one reduction loop longer than ``MAX_REDUCTION_BLOCK``: ``prep`` and that
    loop blocked (``Blocking``), the view it makes and the nest's key there."""
    if not keys or sum(1 for _ in statements(view.proc)) > MAX_PREP_STATEMENTS:
        return
    for a, b in tile_nests(view):
        chain = reduction_chain(view, b)
        if (a.pattern, b.pattern) not in keys or not chain or len(chain) != 1:
            continue
        k = chain[0]
        assert k.trip is not None  # reduction_chain keeps loops of constant trip count only
        factor = reduction_block(k.trip)
        if factor is None:
            continue
        outer, inner = view.fresh(f"{k.name}o", f"{k.name}i")
        blocking = Blocking(k.pattern, factor, outer, inner, levels=k.depth - a.depth)
        proc = _apply(view.proc, blocking.calls())
        if proc is None:
            continue
        after = ProcView.of(proc)
        if (a.pattern, b.pattern) in matches(after):
            yield dataclasses.replace(prep, blocking=blocking), after, frozenset({(a.pattern, b.pattern)})
