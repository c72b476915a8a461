"""Compute a producer stage next to its consumer, in a small line buffer (Halide's compute_at).

A two-stage pipeline written stage by stage (a producer loop nest filling ``tmp``, then a
consumer loop nest reading a few rows of ``tmp`` per output row) streams the whole
intermediate through memory twice. Computing the rows of ``tmp`` that a strip of output
rows needs right before that strip keeps them in cache; when ``tmp`` is a local
allocation it also shrinks to those few rows (Halide's ``store_at``), a buffer on the
stack. Two forms, after ``exo.stdlib.halide_scheduling_ops``:

- ``strip``: for each strip of R output rows, compute the R + 2 rows of ``tmp`` it reads
  (a 3-row stencil), then the strip. Rows at strip edges are computed twice.
- ``slide``: compute each row of ``tmp`` once, just before the first output row that reads
  it (a sliding window); a local ``tmp`` folds to a circular buffer of 3 rows.

Both lower to ordinary Exo scheduling calls (``divide_with_recompute``, ``cut_loop``,
``shift_loop``, ``fuse``, ``sink_alloc``, ``resize_dim``), so an exported schedule shows
every step. Applied twice (strips, then a sliding window inside each strip) they give
Halide's ``store_at(strip)`` + ``compute_at(row)``.

Strips that do not divide the consumer's rows: ``divide_with_recompute`` makes every strip
taller by the remainder (some output rows are computed twice too, so both stages must be
idempotent; Exo checks). A cut tail would need the producer's rows twice, once in the last
strip's buffer and once for the tail, and Exo 1.0.0 has no operation that copies a loop;
heights whose remainder costs too much are not offered (``MAX_RECOMPUTE``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from exo.API_cursors import AllocCursor

from schedsearch.core import ExpandOptions, Rewrite, RewriteKind
from schedsearch.transforms.accesses import Accesses, accesses, uses_outside
from schedsearch.transforms.calls import ExoCall, Loop, Memory, Stmt
from schedsearch.transforms.rules.args import ArgError, StepArgs, count, loop, naming
from schedsearch.transforms.rules.base import ProcView, Rule
from schedsearch.transforms.walk import LoopInfo, literal

#: Output rows per strip offered in ``strip`` form.
STRIP_ROWS = (1, 2, 4, 8, 16, 32)
#: Strip heights whose recomputed rows exceed this share of the two stages' rows are not
#: offered. A strip recomputes its halo (the 2 extra rows of a 3-row stencil), and a height
#: that does not divide the consumer's rows makes every strip that many rows taller
#: (``divide_with_recompute`` spreads the rest over all strips), e.g. 1- and 2-row strips
#: of a 3-row stencil recompute 100% and 50%.
MAX_RECOMPUTE = 0.4
#: A local line buffer of at most this many elements goes on the stack; a larger one stays
#: a heap allocation (a stack buffer of a wide image's rows could overflow the stack).
MAX_STACK_ELEMENTS = 65536


@dataclass(frozen=True, slots=True)
class Stages:
    """A producer loop filling ``buffer`` row by row along ``dim`` and the loop right after
    it whose iteration ``y`` reads rows ``y + low`` to ``y + high`` of ``buffer``."""

    producer: LoopInfo
    consumer: LoopInfo
    buffer: str
    dim: int
    low: int
    high: int
    local: bool  # a local allocation right before the producer, used by nothing else
    row_elements: int | None  # elements of one row along ``dim`` (None: not a constant)

    @property
    def lead(self) -> int:
        """Producer rows beyond the consumer's: the rows a sliding window computes first."""
        return int(self.producer.trip or 0) - int(self.consumer.trip or 0)

    def on_stack(self, rows: int) -> bool:
        """Whether a local buffer of ``rows`` rows is small enough for the stack."""
        return self.local and self.row_elements is not None and rows * self.row_elements <= MAX_STACK_ELEMENTS


def _terms(form: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in form.items() if v}


def _row_dim(writes: Accesses, var: str) -> int | None:
    """The one dimension every write indexes by exactly ``var``, if there is one."""
    dims = set()
    for write in writes:
        found = [d for d, form in enumerate(write.index) if form is not None and _terms(form) == {var: 1}]
        if len(found) != 1:
            return None
        dims.add(found[0])
    return dims.pop() if len(dims) == 1 else None


def _offsets(reads: Accesses, buffer: str, dim: int, var: str) -> tuple[int, int] | None:
    """(lowest, highest) row of ``buffer`` along ``dim`` that the consumer's iteration
    ``var`` reads, relative to ``var``: each read is ``var + c + a * k + ...`` with ``k``
    loops inside the consumer (a stencil's taps)."""
    low = high = None
    for read in reads:
        if read.name != buffer:
            continue
        form = read.index[dim] if dim < len(read.index) else None
        if form is None or form.get(var) != 1:
            return None
        first = last = form.get("", 0)
        for k, coef in _terms(form).items():
            if k in ("", var):
                continue
            span = read.ranges.get(k)
            if span is None:
                return None  # a variable from outside the consumer, or a non-constant loop
            first += min(coef * span[0], coef * span[1])
            last += max(coef * span[0], coef * span[1])
        low = first if low is None else min(low, first)
        high = last if high is None else max(high, last)
    return None if low is None or high is None else (low, high)


def _local_rows(producer_cursor, buffer: str, dim: int) -> tuple[bool, int | None]:
    """Whether ``buffer`` is a local allocated right before the producer, and the elements
    of one of its rows along ``dim``."""
    alloc = producer_cursor.prev()
    if not isinstance(alloc, AllocCursor) or alloc.name() != buffer or not alloc.is_tensor():
        return False, None
    sizes = [literal(e) for n, e in enumerate(alloc.shape()) if n != dim]
    known = [s for s in sizes if s is not None]
    if len(known) != len(sizes):
        return True, None
    elements = 1
    for s in known:
        elements *= s
    return True, elements


def stages(view) -> Iterator[Stages]:
    """Adjacent producer/consumer loops a consumer iteration can compute its inputs for."""
    for p in view.loops:
        if p.next_sibling is None or p.lo != 0 or p.trip is None:
            continue
        c = view.loop(p.next_sibling)
        if c.lo != 0 or c.trip is None or c.trip < 2:
            continue
        p_cursor, c_cursor = view.proc.find_loop(p.pattern), view.proc.find_loop(c.pattern)
        made, used = accesses(p_cursor.body()), accesses(c_cursor.body())
        if made is None or used is None:
            continue
        written = made.write_names
        if len(written) != 1:
            continue
        buffer = written.pop()
        dim = _row_dim(made.writes, p.name)
        if dim is None or buffer in made.read_names or buffer in used.write_names:
            continue
        if used.write_names & made.read_names:
            continue  # a later strip's producer would read what an earlier consumer wrote
        window = _offsets(used.reads, buffer, dim, c.name)
        if window is None or window[0] < 0 or c.trip + window[1] > p.trip:
            continue
        local, row_elements = False, None
        if buffer not in view.arg_tensors:
            # a local allocated elsewhere or used later keeps its size: rows are computed in place
            local, row_elements = _local_rows(p_cursor, buffer, dim)
            local = local and not uses_outside(c_cursor, buffer)
        yield Stages(p, c, buffer, dim, window[0], window[1], local, row_elements)


def strip_rows(s: Stages, allow_tails: bool) -> list[int]:
    """The strip heights worth offering for ``s``: at least two strips, few recomputed rows,
    and with ``allow_tails`` off only heights that divide the consumer's rows."""
    consumer, producer = int(s.consumer.trip or 0), int(s.producer.trip or 0)
    out = []
    for rows in STRIP_ROWS:
        strips, rest = divmod(consumer, rows)
        if strips < 2 or (rest and not allow_tails):
            continue
        # every strip computes rows + rest consumer rows and rows + lead + rest producer rows
        computed = strips * (2 * (rows + rest) + s.lead)
        if computed - consumer - producer <= MAX_RECOMPUTE * (consumer + producer):
            out.append(rows)
    return out


class ComputeMode(StrEnum):
    STRIP = "strip"  # the producer rows of each strip of consumer rows, before the strip
    SLIDE = "slide"  # each producer row once, before the first consumer row reading it


# ignore[misc] below: mypy takes args.count()/loop()/naming(), which are dataclasses.field()
# without a default, for defaults
@dataclass(frozen=True, slots=True)
class ComputeAtArgs(StepArgs):
    """The producer, the buffer between the stages and the form; each form's own fields."""

    producer: str = loop()
    buffer: str  # type: ignore[misc]
    dim: int = count(0)  # the buffer's row dimension
    mode: ComputeMode  # type: ignore[misc]
    stack: bool = False  # the shrunk local buffer goes on the stack
    lead: int | None = count(default=None)  # slide: producer rows before the first consumer row
    fold: int | None = count(0, default=None)  # slide: rows of the circular buffer (0: not folded)
    rows: int | None = count(default=None)  # strip: consumer rows per strip
    strips: int | None = count(default=None)
    extent: int | None = count(default=None)  # strip: producer rows per strip
    local: bool | None = None  # strip: the buffer is a local that shrinks to a strip's rows
    names: str | None = naming(default=None)  # strip: the strip loop, the consumer's and producer's rows

    def check(self) -> None:
        needs = ("lead",) if self.mode is ComputeMode.SLIDE else ("rows", "strips", "extent", "local", "names")
        for name in needs:
            if getattr(self, name) is None:
                raise ArgError(f"missing argument {name!r} (mode {self.mode.value} needs {', '.join(needs)})")
        if self.names is not None and len(self.names.split()) != 3:
            raise ArgError("names must be three names separated by spaces")


class ComputeAt(Rule):
    """Compute the rows of a producer's buffer that a consumer strip reads, inside the strip.

    ``compute_at y #1 producer=y #0 buffer=tmp mode=strip rows=8 strips=64 extent=10``
    (``tmp`` a local; with ``tmp`` an argument the rows are written to it in place)::

        tmp: f32[514, 512] @ DRAM              for yo in seq(0, 64):
        for y in seq(0, 514):                      tmp: f32[10, 512] @ DRAM_STACK
            for x in seq(0, 512):                  for yp in seq(0, 10):
                tmp[y, x] = ...inp[y, ...]   ->        for x in seq(0, 512):
        for y in seq(0, 512):                              tmp[yp, x] = ...inp[yp + 8 * yo, ...]
            for x in seq(0, 512):                  for yi in seq(0, 8):
                out[y, x] = ...tmp[y + 2, x]           for x in seq(0, 512):
                                                           out[yi + 8 * yo, x] = ...tmp[2 + yi, x]

    The strip's first 2 rows of ``tmp`` are the previous strip's last 2, computed again.

    ``compute_at y #1 producer=y #0 buffer=tmp mode=slide lead=2 fold=3``::

        (as above)                      ->     tmp: f32[3, 512] @ DRAM_STACK
                                               for y in seq(0, 2):
                                                   for x in seq(0, 512):
                                                       tmp[y, x] = ...inp[y, ...]
                                               for y in seq(0, 512):
                                                   for x in seq(0, 512):
                                                       tmp[(2 + y) % 3, x] = ...inp[2 + y, ...]
                                                   for x in seq(0, 512):
                                                       out[y, x] = ...tmp[(2 + y) % 3, x]
    """

    kind = RewriteKind.COMPUTE_AT
    records = (ComputeAtArgs,)

    def propose(self, view: ProcView, options: ExpandOptions) -> list[Rewrite]:
        out = []
        for s in stages(view):
            base: dict[str, Any] = {"producer": s.producer.pattern, "buffer": s.buffer, "dim": s.dim}
            if s.lead >= 1:
                fold = s.lead - s.low + 1 if s.local else 0
                args = ComputeAtArgs(**base, mode=ComputeMode.SLIDE, lead=s.lead, fold=fold, stack=s.on_stack(fold))
                out.append(self.step(s.consumer.pattern, args))
            if s.lead == 0 and not s.local:
                continue  # no halo and no buffer to shrink: strips are a fuse and a split
            outer, c_inner, p_inner = view.fresh(f"{s.consumer.name}o", f"{s.consumer.name}i", f"{s.producer.name}p")
            for rows in strip_rows(s, options.allow_tails):
                strips = int(s.consumer.trip or 0) // rows
                extent = rows + s.lead + int(s.consumer.trip or 0) % rows  # producer rows per strip
                args = ComputeAtArgs(
                    **base,
                    mode=ComputeMode.STRIP,
                    rows=rows,
                    strips=strips,
                    extent=extent,
                    local=s.local,
                    stack=s.on_stack(extent),
                    names=f"{outer} {c_inner} {p_inner}",
                )
                out.append(self.step(s.consumer.pattern, args))
        return out

    def lower(self, target: str, args: ComputeAtArgs) -> list[ExoCall]:  # type: ignore[override]  # each rule lowers its own record
        if args.mode is ComputeMode.SLIDE:
            return _slide(args)
        return _strip(target, args)


def _memory(args: ComputeAtArgs) -> list[ExoCall]:
    return [ExoCall("set_memory", (args.buffer, Memory("DRAM_STACK")))] if args.stack else []


def _strip(target: str, args: ComputeAtArgs) -> list[ExoCall]:
    assert args.rows and args.strips and args.extent and args.names  # ComputeAtArgs.check
    rows, strips, buffer, producer = args.rows, args.strips, args.buffer, args.producer
    outer, c_inner, p_inner = args.names.split()
    calls = [
        # the consumer first: splitting the producer first would renumber the consumer's pattern
        ExoCall("divide_with_recompute", (Loop(target), strips, rows, (outer, c_inner))),
        ExoCall("divide_with_recompute", (Loop(producer), strips, rows, (outer, p_inner))),
        # Exo cannot prove that a strip's recomputed edge rows rewrite the values an earlier
        # strip read (they are equal: a row depends only on the producer's inputs, which the
        # consumer does not write); Exo's own compute_at disables the check the same way.
        ExoCall("fuse", (Loop(outer), Loop(outer, next=True)), (("unsafe_disable_check", True),)),
        ExoCall("simplify"),
    ]
    if not args.local:
        return calls
    # store_at: the allocation moves into the strip loop and keeps only the strip's rows
    calls += [
        ExoCall("sink_alloc", (buffer,)),
        ExoCall("resize_dim", (buffer, args.dim, args.extent, f"{rows} * {outer}")),
    ]
    return calls + _memory(args) + [ExoCall("simplify")]


def _slide(args: ComputeAtArgs) -> list[ExoCall]:
    assert args.lead is not None  # ComputeAtArgs.check
    producer, buffer = args.producer, args.buffer
    calls = [
        # the first ``lead`` rows before the loop; the rest shifted to start at 0 so that
        # consumer row y computes producer row y + lead, then fused (Exo checks the order)
        ExoCall("cut_loop", (Loop(producer), args.lead)),
        ExoCall("shift_loop", (Loop(producer, next=True), 0)),
        ExoCall("fuse", (Loop(producer, next=True), Stmt(producer, ("next", "next")))),
        ExoCall("simplify"),
    ]
    fold = args.fold or 0
    if not fold:
        return calls
    # a row is dead once the consumer moved ``fold`` rows past it: a circular buffer
    calls.append(ExoCall("resize_dim", (buffer, args.dim, fold, 0), (("fold", True),)))
    return calls + _memory(args) + [ExoCall("simplify")]
