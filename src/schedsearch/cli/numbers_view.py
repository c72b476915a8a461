"""How the CLI shows a search's numbers: the declared best, spreads, steps within noise.

Every command names the best through ``schedsearch.numbers.declared_best`` and says which
kind of number it shows: the finalists' side-by-side re-measurement, or a search-time
median. Tables rank candidates by their search-time medians (the only numbers every
candidate has, all measured against the same baseline), mark the declared best with ``*``
and give its re-measured numbers in a note under the table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.console import Console, RenderableType
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from schedsearch.cli.render import (
    STATUS_STYLE,
    cost_model_text,
    describe,
    fmt_num,
    fmt_seconds,
    schedule_lines,
    step_text,
)
from schedsearch.core import CandidateRecord, SearchRecord, Workload
from schedsearch.nodes import SHORT_ID, TimedOn, timed_on_text
from schedsearch.numbers import DeclaredBest, Ending, NumberKind, ending, steps_of
from schedsearch.progress import spent_text

BEST_MARK = "*"
NOISE_MARK = "~"
NOISE_TEXT = "~ within noise"

#: The legend of every step listing.
STEPS_LEGEND = (
    "each step: the search-time median after it (± half the interquartile range), the speedup over "
    "the unscheduled proc, and the gain of that step alone; ~ within noise: the step's gain is "
    "smaller than the combined spread of the two times"
)


def print_whole(console: Console, renderable: RenderableType) -> None:
    """A table, tree or grid at the terminal's width, or whole in a log, a pipe or a file,
    where rich would otherwise squeeze it into 80 columns and cut the numbers and steps."""
    if console.is_terminal:
        console.print(renderable)
        return
    wide = Measurement.get(console, console.options.update_width(10_000), renderable).maximum
    width = console.width
    console.width = max(width, wide)  # print(width=...) cannot go beyond the console's own width
    try:
        with console.capture() as captured:
            console.print(renderable)
    finally:
        console.width = width
    # A grid pads every row to its widest cell: no trailing blanks in a file or a pipe.
    text = "\n".join(line.rstrip() for line in captured.get().split("\n"))
    console.file.write(text)
    console.file.flush()


def fmt_spread(spread: float | None) -> str:
    """``±1.5%``: half the interquartile range relative to the median; "" when unknown."""
    return "" if spread is None else f"±{50 * spread:.1f}%"


def fmt_time(seconds: float | None, spread: float | None) -> str:
    """``1.23 ms ±1.5%`` (the spread left out when unknown)."""
    s = fmt_spread(spread)
    return f"{fmt_seconds(seconds)} {s}" if s and seconds is not None else fmt_seconds(seconds)


def record_spread(record: CandidateRecord) -> float | None:
    """A candidate's search-time spread."""
    return record.timing.spread if record.timing is not None else None


def _gflops(workload: Workload, seconds: float | None) -> str:
    if not workload.flops or not seconds:
        return ""
    return f" ({workload.flops / seconds / 1e9:.3g} GFLOP/s)"


def status_text(search: SearchRecord) -> str:
    """``completed: budget reached``, ``interrupted`` (``interrupted: <why>`` when it was not
    a stop asked for, e.g. a progress observer that raised), ``failed: <why>``."""
    how = ending(search)
    if how in (Ending.FAILED, Ending.INTERRUPTED):
        return how.text + (f": {search.failure}" if search.failure else "")
    if how is Ending.RUNNING:
        return how.text
    if how is Ending.STOPPED_IMPROVING:
        return (
            f"{search.status.value}: {how.text} (no new best in the last {search.counters.since_best} "
            f"candidates){last_gain_text(search)}"
        )
    ahead = search.counters.untried_ahead
    held = (
        f"; the cost model still predicted {ahead} untried candidate{'s' if ahead != 1 else ''} faster" if ahead else ""
    )
    return f"{search.status.value}: {how.text}{last_gain_text(search)}{held}"


def last_gain_text(search: SearchRecord) -> str:
    """``; last real gain at 12 s of search (after 40 candidates), 108 s before the end``:
    when the best last moved beyond noise, and what the search spent after it."""
    c = search.counters
    if c.gain_measured <= 0:
        return ""
    after = search.elapsed_seconds - c.spent.baseline_wait - c.gain_seconds
    return (
        f"; last real gain at {c.gain_seconds:.0f} s of search (after {c.gain_measured} candidates), "
        f"{max(0.0, after):.0f} s before the end"
    )


def kind_note(best: DeclaredBest) -> str:
    """Which kind of number the best is, in words."""
    if best.kind is NumberKind.REMEASURED:
        return "finalists re-measured side by side with the unscheduled proc"
    return "search-time median; the finalists were not re-measured side by side"


def best_text(search: SearchRecord, best: DeclaredBest | None) -> str:
    """The best in one phrase, numbers first: what ``show``'s header, ``list`` and ``run``'s
    summary say (plain text, no markup)."""
    if best is None:
        return "none: no candidate was measured ok"
    numbers = f"{fmt_time(best.seconds, best.spread)}{_gflops(search.workload, best.seconds)}"
    if best.is_unscheduled:
        return f"nothing faster than the unscheduled proc found: it takes {numbers} ({kind_note(best)})"
    text = f"candidate {best.record.id}, {numbers}, {fmt_num(best.speedup)}x faster ({kind_note(best)}"
    if best.kind is NumberKind.REMEASURED:
        text += (
            f"; its search-time median {fmt_time(best.search_time_seconds, best.search_time_spread)}, "
            f"{fmt_num(best.record.speedup)}x"
        )
    return text + ")"


def baseline_text(search: SearchRecord, root: CandidateRecord | None) -> str:
    """The unscheduled proc's time: re-measured with the finalists when it was."""
    if root is None or root.seconds is None:
        return fmt_seconds(search.baseline_seconds)
    if search.baseline_seconds is not None and search.baseline_seconds != root.seconds:
        return (
            f"{fmt_seconds(search.baseline_seconds)}, re-measured with the finalists "
            f"(search-time {fmt_time(root.seconds, record_spread(root))})"
        )
    return fmt_time(root.seconds, record_spread(root))


def elapsed_text(search: SearchRecord) -> str:
    """The search's elapsed time, and the seconds its runs took to start before its clock
    did (``TimeSpent.starting``: the workload, the compiler check, the workers), which its
    time budget does not count."""
    starting = search.counters.spent.starting
    start = f" (after {starting:.1f} s starting: the workload, the workers)" if starting >= 0.05 else ""
    return f"{search.elapsed_seconds:.1f} s{start}"


def search_spent_text(search: SearchRecord) -> str:
    """Where the search's time went, of its elapsed time; "" for a search that did not
    count it (one made before it was counted)."""
    words = spent_text(search.counters.spent)
    return f"{words} of {search.elapsed_seconds:.1f} s" if words else ""


def summary_grid(
    search: SearchRecord,
    best: DeclaredBest | None,
    root: CandidateRecord | None,
    db: str,
    driver_gone: bool = False,
    nodes: Sequence[TimedOn] = (),
) -> Table:
    """Key facts of one search as a two-column grid (``show``'s header); ``driver_gone``: a
    running search whose driver ended without finishing it says so, and how to go on;
    ``nodes``: the nodes that timed its candidates, a row of their own when there are
    several (``nodes.timed_on``)."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    c = search.counters
    rows = [
        ("search", f"{search.id}  ({db})"),
        ("workload", f"{search.workload.label}  from {search.workload.path}"),
        (
            "status",
            status_text(search)
            + (
                f" - but no driver runs it any more (its process ended without finishing it): "
                f"`schedsearch resume {search.id}` goes on with it"
                if driver_gone
                else ""
            ),
        ),
        (
            "strategy",
            f"{search.config.strategy.value}, seed {search.config.seed}, target {search.config.expand.target}, "
            f"{search.config.bench.float_mode.value} float, {search.config.bench.timing.value} timing"
            + (f", parallel loops on {search.config.bench.threads} threads" if search.config.bench.threads > 1 else ""),
        ),
        ("elapsed", elapsed_text(search)),
        (
            "candidates",
            f"{c.generated} generated, {c.duplicates} duplicate, {c.illegal} illegal, "
            f"{c.evaluated} evaluated ({c.ok} ok, {c.failed} failed)"
            + (f", {c.pruned} pruned" if c.pruned else "")
            + (f"; {c.reused} reused from earlier searches" if c.reused else "")
            + (f"; {c.warm_started} warm-started" if c.warm_started else ""),
        ),
        ("cost model", cost_model_text(search)),
        *([("time spent", spent)] if (spent := search_spent_text(search)) else []),
        ("baseline", baseline_text(search, root)),
        ("best", best_text(search, best)),
        (
            "machine",
            f"{search.machine.cpu_model} | {search.machine.compiler_version} {' '.join(search.machine.cflags)}",
        ),
        *([("nodes", text)] if (text := timed_on_text(list(nodes))) else []),
    ]
    for k, v in rows:
        grid.add_row(k, Text(v))
    return grid


def ranked_table(
    records: Sequence[CandidateRecord],
    best: DeclaredBest | None,
    title: str = "",
    search_column: bool = False,
    node_labels: Mapping[str, str] | None = None,
) -> Table:
    """Candidates by search-time median, fastest first; the declared best marked ``*``
    (appended as a last row of its own when it is not among ``records``). With
    ``node_labels`` (node id -> short name, ``nodes.node_labels``) a ``node`` column names
    the node that timed each one ("-" when none did); without it there is no such column."""
    table = Table(title=title or None, title_justify="left", expand=False)
    columns = [("", "left"), ("id", "right")]
    if search_column:
        columns.append(("search", "right"))
    columns += [
        ("depth", "right"),
        ("time", "right"),
        ("GFLOP/s", "right"),
        ("speedup", "right"),
        ("status", "left"),
        ("last step", "left"),
    ]
    if node_labels is not None:
        columns.insert(-2, ("node", "left"))
    for col, justify in columns:
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    rows = list(records)
    best_id = best.record.id if best is not None else None
    if best is not None and best_id not in {r.id for r in rows}:
        rows.append(best.record)
    for i, r in enumerate(rows):
        cells: list[str | Text] = [BEST_MARK if r.id == best_id else "", str(r.id)]
        if search_column:
            cells.append(str(r.search_id))
        cells += [
            str(r.depth),
            fmt_time(r.seconds, record_spread(r)),
            fmt_num(r.gflops),
            fmt_num(r.speedup, "x"),
            Text(r.status.value, style=STATUS_STYLE.get(r.status, "")),
            Text(step_text(r)),
        ]
        if node_labels is not None:
            cells.insert(-2, Text(node_labels.get(r.node, r.node[:SHORT_ID]) or "-"))
        table.add_row(
            *cells,
            style="bold" if r.id == best_id else None,
            end_section=i == len(records) - 1 and len(rows) > len(records),
        )
    return table


def best_note(best: DeclaredBest | None) -> str:
    """The line under a ranked table that says which row is the best and by which numbers."""
    if best is None:
        return "no candidate was measured ok"
    who = "the unscheduled proc" if best.is_unscheduled else f"candidate {best.record.id}"
    if best.kind is NumberKind.REMEASURED:
        return (
            f"{BEST_MARK} the best: {who}, {fmt_seconds(best.seconds)}, {fmt_num(best.speedup)}x when the "
            f"finalists were re-measured side by side with the unscheduled proc (the table shows search-time "
            f"medians, which rank the candidates as they were measured)"
        )
    return f"{BEST_MARK} the best: {who}, by its search-time median; the finalists were not re-measured side by side"


def has_step_numbers(lineage: Sequence[CandidateRecord]) -> bool:
    """True when each candidate on the path adds one step to its parent's schedule, so each
    step has the time of the candidate it made (``step_lines`` shows them, with a legend)."""
    steps = lineage[-1].schedule.steps if lineage else ()
    return (
        bool(steps)
        and len(lineage) == len(steps) + 1
        and all(r.schedule.steps == steps[:i] for i, r in enumerate(lineage))
    )


def step_lines(lineage: Sequence[CandidateRecord]) -> list[str]:
    """The schedule of ``lineage[-1]``, one numbered step per line with the numbers after
    it first, then the step; a step whose gain is within noise says so."""
    best = lineage[-1]
    steps = best.schedule.steps
    if not has_step_numbers(lineage):
        return schedule_lines(best)
    lines = []
    for i, s in enumerate(steps_of(lineage)):
        r = s.record
        gain = f"step {fmt_num(s.gain, 'x')}" if s.gain is not None else ""
        noise = NOISE_TEXT if s.within_noise else ""
        lines.append(
            f"{i + 1:2d}. {fmt_time(r.seconds, record_spread(r)):>15} {fmt_num(r.speedup, 'x'):>7}  "
            f"{gain:<11} {noise:<14}  {describe(steps[i])}"
        )
    return lines
