"""Rules that copy data into buffers of their own: stage an output tile, pack an input panel."""

from __future__ import annotations

from dataclasses import dataclass

from schedsearch.core import ExpandOptions, Rewrite, RewriteKind
from schedsearch.transforms.calls import ExoCall, Loop, Memory
from schedsearch.transforms.rules.args import StepArgs, count, naming
from schedsearch.transforms.rules.base import ProcView, Rule
from schedsearch.transforms.staging import hoisted_windows_for_loop, read_windows_for_loop, windows_for_loop
from schedsearch.transforms.walk import written_buffers

#: Panels smaller than this are not worth a copy; larger ones (256 KiB of f32: a 512 x 64
#: AVX-512 column panel) would not stay in L2.
MIN_PACK_ELEMENTS = 64
MAX_PACK_ELEMENTS = 65536


@dataclass(frozen=True, slots=True)
class StageMemArgs(StepArgs):
    buffer: str  # the argument tensor staged
    window: str  # the staged window of it, in Exo's syntax
    name: str = naming()
    hoist: int | None = count(default=None)  # first move the loop outward over this many enclosing loops


@dataclass(frozen=True, slots=True)
class PackArgs(StepArgs):
    buffer: str
    window: str
    name: str = naming()
    interchange: bool | None = None  # swap the loop with its only child first (None: no)


class StageMem(Rule):
    """Stage the output window a loop reduces into in a ``DRAM_STACK`` buffer around it.

    ``stage_mem k #0 buffer=C window=C[8 * io:8 * io + 8, jo * 32:...] name=C_stage``::

        for k in seq(0, 512):                  C_stage: f32[8, 32] @ DRAM_STACK
            for ii in seq(0, 8):               (load C_stage from the C tile)
                for ji in seq(0, 32):   ->     for k in seq(0, 512):
                    C[8*io+ii, ...] += ...         ... C_stage[ii, ji] += ...
                                               (store C_stage back to the C tile)

    The step also simplifies, so the buffer's shape is a constant Exo can allocate. A
    one-element window (``C[i, j]`` around ``k``) becomes a scalar local instead.

    With ``hoist=n`` the reduction loop is first moved outward over its ``n`` enclosing
    loops (as ``reorder``/``hoist`` do) and the whole window those loops cover is staged:
    ``stage_mem k #0 buffer=C window=C[0:16, 0:16] hoist=2`` turns ``i j k`` into ``k i j``
    accumulating into a 16 x 16 local. Either step alone is slower than the root where the
    arguments may alias (an ``i8`` kernel: C's stores force A and B to be reloaded, and
    ``k`` outermost stores and reloads every element of C 16 times); together they are 2.4x faster, so a
    greedy search would rarely walk through the first.
    """

    kind = RewriteKind.STAGE_MEM
    records = (StageMemArgs,)

    def propose(self, view: ProcView, options: ExpandOptions) -> list[Rewrite]:
        out = []
        for info in view.loops:
            cursor = view.proc.find_loop(info.pattern)
            for window in windows_for_loop(cursor, set(view.arg_tensors)):
                (name,) = view.fresh(f"{window.buffer}_stage")
                out.append(self.step(info.pattern, StageMemArgs(buffer=window.buffer, window=window.window, name=name)))
            for levels in range(1, info.chain + 1):
                for window in hoisted_windows_for_loop(cursor, set(view.arg_tensors), levels):
                    (name,) = view.fresh(f"{window.buffer}_stage")
                    args = StageMemArgs(buffer=window.buffer, window=window.window, name=name, hoist=levels)
                    out.append(self.step(info.pattern, args))
        return out

    def lower(self, target: str, args: StageMemArgs) -> list[ExoCall]:  # type: ignore[override]  # each rule lowers its own record
        calls = [ExoCall("reorder_loops", (Loop(target, up=1),))] * (args.hoist or 0)
        calls.append(ExoCall("stage_mem", (Loop(target), args.window, args.name)))
        if ":" in args.window:
            # A one-element window becomes a scalar, already a plain C local; Exo 1.0.0
            # would print a DRAM_STACK scalar as ``float x[];``.
            calls.append(ExoCall("set_memory", (args.name, Memory("DRAM_STACK"))))
        return calls + [ExoCall("simplify")]


class Pack(Rule):
    """Copy a read-only input panel that a loop re-reads on every iteration into a buffer.

    ``pack io #0 buffer=B window=B[0:64, 8 * jo:8 * jo + 8] name=B_pack``::

        for jo in seq(0, 8):                     for jo in seq(0, 8):
            for io in seq(0, 8):                     B_pack: f32[64, 8] @ DRAM
                for k in seq(0, 64):      ->         (copy B[0:64, 8*jo:8*jo+8] into B_pack)
                    ... B[k, 8 * jo + ji]            for io in seq(0, 8):
                                                         for k in seq(0, 64):
                                                             ... B_pack[k, ji]

    The panel's rows become contiguous: no cache-set conflicts from the large row stride.
    Its size follows the register tile (or loop) it feeds: the window a loop re-reads. With
    ``interchange=True`` the loop is first swapped with its only child (``io jo`` -> ``jo
    io`` above) so that the panel the child selects is re-read by the loop.
    """

    kind = RewriteKind.PACK
    deferred = True
    records = (PackArgs,)

    def propose(self, view: ProcView, options: ExpandOptions) -> list[Rewrite]:
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
            swapped = read_windows_for_loop(child, read_only, MIN_PACK_ELEMENTS, MAX_PACK_ELEMENTS, invariant=info.name)
            for window in swapped:
                if window not in direct:
                    out.append(self._make(view, info.pattern, window, interchange=True))
        return out

    def _make(self, view: ProcView, target: str, window, interchange: bool) -> Rewrite:
        (name,) = view.fresh(f"{window.buffer}_pack")
        args = PackArgs(buffer=window.buffer, window=window.window, name=name, interchange=interchange or None)
        return self.step(target, args)

    def lower(self, target: str, args: PackArgs) -> list[ExoCall]:  # type: ignore[override]  # each rule lowers its own record
        calls = [ExoCall("reorder_loops", (Loop(target),))] if args.interchange else []
        return calls + [ExoCall("stage_mem", (Loop(target), args.window, args.name)), ExoCall("simplify")]
