"""Everything the CLI shows a person: the live progress display, tables and trees."""

from __future__ import annotations

import time
from collections.abc import Sequence

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from schedsearch.core import CandidateRecord, EventKind, Phase, Rewrite, SearchEvent, SearchRecord, Status
from schedsearch.progress import spent_text

STATUS_STYLE = {
    Status.OK: "green",
    Status.PENDING: "dim",
    Status.ILLEGAL: "yellow",
    Status.BUILD_ERROR: "red",
    Status.RUN_ERROR: "red",
    Status.TIMEOUT: "magenta",
    Status.WRONG_RESULT: "bold red",
    Status.TAMPERED: "bold magenta",
}


def fmt_seconds(s: float | None) -> str:
    """Human time with a unit that fits (ns .. s)."""
    if s is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def fmt_timing(record: CandidateRecord) -> str:
    """The median time and its spread: ``1.23 ms ±1.5%`` (half the interquartile range)."""
    if record.timing is None:
        return fmt_seconds(record.seconds)
    return f"{fmt_seconds(record.timing.median)} ±{50 * record.timing.spread:.1f}%"


def fmt_num(x: float | None, suffix: str = "", digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}g}{suffix}"


def describe(step: Rewrite) -> str:
    """A step on one line without the names it gives new loops and buffers (the rewrite
    rules declare which those are; imported here, not at start-up, because they load Exo)."""
    from schedsearch.transforms import describe_step

    return describe_step(step)


def step_text(record: CandidateRecord) -> str:
    """The last rewrite that produced this candidate ("(unscheduled)" for the root)."""
    steps = record.schedule.steps
    return describe(steps[-1]) if steps else "(unscheduled)"


def candidates_table(records: Sequence[CandidateRecord], title: str = "") -> Table:
    """A table of candidates: id, depth, time (with its spread), GFLOP/s, speedup, last step."""
    table = Table(title=title or None, title_justify="left", expand=False)
    for col, justify in (
        ("id", "right"),
        ("depth", "right"),
        ("time", "right"),
        ("GFLOP/s", "right"),
        ("speedup", "right"),
        ("status", "left"),
        ("last step", "left"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for r in records:
        table.add_row(
            str(r.id),
            str(r.depth),
            fmt_timing(r),
            fmt_num(r.gflops),
            fmt_num(r.speedup, "x"),
            Text(r.status.value, style=STATUS_STYLE.get(r.status, "")),
            Text(step_text(r)),
        )
    return table


def cost_model_text(search: SearchRecord) -> str:
    """The cost model's mode and how well it ranked the latest measurements."""
    mode = search.config.cost_model.value
    a = search.model_accuracy
    if a is None:
        return mode if mode == "off" else f"{mode} (no accuracy recorded)"
    if a.spearman is None:
        return f"{mode}; too few predicted-then-measured candidates to score ({a.pairs})"
    text = (
        f"{mode}; rank correlation {a.spearman:.2f} over the last {a.pairs} predicted-then-measured "
        f"candidates (model trained on {a.trained_on})"
    )
    if a.span is not None:
        # Near-equal times are ordered by noise: say how far apart these were, and how well
        # the model ordered the pairs the measurements do tell apart.
        text += f"; their times span {a.span:.2f}x (90th/10th percentile)"
    if a.concordance is not None:
        text += f"; {a.concordance:.0%} of the {a.distinct_pairs} pairs told apart beyond noise ordered right"
    elif a.span is not None:
        text += "; no pair told apart beyond noise"
    if a.settled_spearman is not None:
        text += (
            f". Since the search's {a.settled_after}th measurement: rank correlation {a.settled_spearman:.2f} "
            f"over {a.settled_pairs} predicted-then-measured candidates"
        )
        if a.settled_span is not None:
            text += f" (times spanning {a.settled_span:.2f}x)"
        if a.settled_repeat is not None:
            # Whether the model or the timing noise is what holds it down.
            text += f"; measured again, those times would rank themselves at about {a.settled_repeat:.2f} at best"
    return text


def schedule_lines(record: CandidateRecord) -> list[str]:
    """The schedule of a candidate as numbered readable steps."""
    if not record.schedule.steps:
        return ["(no rewrites: the unscheduled proc is the best)"]
    return [f"{i + 1:2d}. {describe(s)}" for i, s in enumerate(record.schedule.steps)]


class StartingView:
    """What a search command does before its search's clock starts, on stderr.

    On a terminal, one line whose step and clock keep moving while the step runs
    (``starting: checking the C compiler (gcc)  3.1 s``). Once the workers are ready
    (``ready``), one line says where the seconds went, in a log too::

        [start  6.5s] ready: Python and imports 0.6 s; loading the workload with Exo 0.1 s; ...

    A start that fails adds nothing: the command's error stays its one line on stderr.
    Seconds count from the command's start (``started``, on ``time.monotonic``'s scale);
    the search records their total as ``TimeSpent.starting``.
    """

    def __init__(self, console: Console, started: float) -> None:
        self.console = console
        self.started = started
        self._steps: list[tuple[str, float]] = []  # (what, when it began)
        self._live: Live | None = None

    def __enter__(self) -> StartingView:
        if self.console.is_terminal:
            # refreshed by rich's own thread: the clock moves while a step blocks
            # (a private Ray cluster starting, Exo loading)
            self._live = Live(
                self._current(),
                console=self.console,
                transient=True,
                refresh_per_second=4,
                get_renderable=self._current,
            )
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._remove()

    def __call__(self, what: str) -> None:
        self._steps.append((what, time.monotonic()))

    def ready(self) -> None:
        """The workers are ready: replace the moving line with where the seconds went."""
        self._remove()
        if self._steps:
            self.console.print(self.breakdown(time.monotonic()), highlight=False, markup=False, soft_wrap=True)
            self._steps = []

    def breakdown(self, now: float) -> str:
        """``[start  6.5s] ready: Python and imports 0.6 s; <step> <seconds>; ...``."""
        begins = [when for _, when in self._steps] + [now]
        parts = [f"Python and imports {max(0.0, begins[0] - self.started):.1f} s"]
        parts += [f"{what} {begins[i + 1] - when:.1f} s" for i, (what, when) in enumerate(self._steps)]
        return f"[start {now - self.started:5.1f}s] ready: " + "; ".join(parts)

    def _remove(self) -> None:
        if self._live is not None:
            live, self._live = self._live, None
            live.__exit__(None, None, None)

    def _current(self) -> Text:
        what = self._steps[-1][0] if self._steps else "..."
        return Text.assemble(
            ("starting: ", "bold magenta"), what, "  ", (f"{time.monotonic() - self.started:.1f} s", "dim")
        )


class ProgressView:
    """Renders SearchEvents on stderr: a live panel on a terminal, plain lines in logs.

    The search loop sends an event at least once a second (``tick`` when nothing else
    happened), so the panel's clock, phase, budget bar and rate keep moving in every phase;
    it is redrawn on each event, from the loop's own thread. A stop is shown the moment
    the loop acknowledges it.
    """

    HEARTBEAT = 15.0  # seconds between plain progress lines when not on a terminal
    #: Plain lines are printed for these at once; other events only as a heartbeat.
    ANNOUNCED = (
        EventKind.STARTED,
        EventKind.BASELINE,
        EventKind.WARM_START,
        EventKind.REUSED,
        EventKind.NEW_BEST,
        EventKind.FINALISTS,
        EventKind.STOPPING,
        EventKind.FINISHED,
    )

    def __init__(
        self,
        console: Console,
        budget: float | None,
        label: str,
        max_candidates: int | None = None,
        prior_elapsed: float = 0.0,
        early_stop: int | None = None,
    ) -> None:
        self.console = console
        self.budget = budget
        self.max_candidates = max_candidates
        self.early_stop = early_stop  # the panel counts toward it (``SearchConfig.early_stop``)
        self.label = label
        self.live: Live | None = None
        self._last_line = 0.0
        self._last: SearchEvent | None = None
        self._first: SearchEvent | None = None  # for the rate of this run (a resume starts mid-way)

    def __enter__(self) -> ProgressView:
        if self.console.is_terminal:
            self.live = Live(Text("starting ..."), console=self.console, auto_refresh=False, transient=False)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            if self._last is not None:
                self.live.update(self._panel(self._last), refresh=True)
            self.live.__exit__(None, None, None)
            self.live = None

    def __call__(self, event: SearchEvent) -> None:
        self._last = event
        if self._first is None:
            self._first = event
        if self.live is not None:
            self.live.update(self._panel(event), refresh=True)
            return
        now = time.monotonic()
        if event.kind in self.ANNOUNCED or now - self._last_line >= self.HEARTBEAT:
            self.console.print(self._line(event), highlight=False)
            self._last_line = now

    def rate(self, e: SearchEvent) -> float | None:
        """Candidates evaluated per second in this run so far."""
        first = self._first
        if first is None or e.elapsed - first.elapsed < 1.0:
            return None
        return (e.counters.evaluated - first.counters.evaluated) / (e.elapsed - first.elapsed)

    def _line(self, e: SearchEvent) -> str:
        c = e.counters
        best = e.best
        best_txt = (
            f"best {fmt_seconds(best.seconds)} {fmt_num(best.gflops, ' GFLOP/s')} {fmt_num(best.speedup, 'x')}"
            if best is not None and best.seconds is not None
            else "best -"
        )
        msg = f" {e.message}" if e.message else ""
        return (
            f"[{e.elapsed:6.1f}s] {e.kind.value:<9} {e.phase.value:<11} evaluated {c.evaluated} (ok {c.ok}, "
            f"failed {c.failed}), generated {c.generated}, dup {c.duplicates}, illegal {c.illegal}; {best_txt}{msg}"
        )

    def _budget_bar(self, e: SearchEvent) -> Text:
        """``[#####.....] 42% ETA 1m10s`` of the time (or candidate) budget."""
        done: float | None = None
        eta = ""
        if self.budget:  # the search's clock, from the workers' start (``SearchEvent.budget_used``)
            done = min(1.0, e.budget_used / self.budget)
            eta = f"ETA {fmt_duration(max(0.0, self.budget - e.budget_used))}"
        elif self.max_candidates:
            done = min(1.0, e.counters.evaluated / self.max_candidates)
            rate = self.rate(e)
            if rate:
                eta = f"ETA {fmt_duration(max(0, self.max_candidates - e.counters.evaluated) / rate)}"
        if done is None:
            return Text("")
        width = 24
        filled = round(done * width)
        return Text.assemble(("[" + "#" * filled + "." * (width - filled) + "]", "cyan"), f" {100 * done:3.0f}%  {eta}")

    def _panel(self, e: SearchEvent) -> Group:
        c = e.counters
        budget = f" / {self.budget:.0f}s" if self.budget else ""
        head = Text.assemble(
            ("schedsearch ", "bold"),
            (self.label, "cyan"),
            f"  search {e.search_id}  ",
            (f"{e.budget_used:.1f}s{budget}", "bold"),
            "  ",
            self._budget_bar(e),
        )
        stopping = e.phase is Phase.STOPPING
        phase = Text.assemble(
            (e.phase.value, "bold yellow" if stopping else "bold magenta"), f"  {e.activity}" if e.activity else ""
        )
        rate = self.rate(e)
        counts = Text(
            f"generated {c.generated}   duplicate {c.duplicates}   illegal {c.illegal}   "
            f"evaluated {c.evaluated}   ok {c.ok}   failed {c.failed}"
            + (f"   pruned {c.pruned}" if c.pruned else "")
            # auto timing's choice as it goes: how many were timed with builds running beside
            + (f"   timed beside builds {c.timed_beside}" if c.timed_beside else "")
            + (f"   {rate:.1f}/s" if rate is not None else "")
        )
        best = e.best
        if best is not None and best.seconds is not None:
            best_txt = Text.assemble(
                ("best ", "bold"),
                f"#{best.id}  {fmt_timing(best)}  ",
                (f"{fmt_num(best.gflops)} GFLOP/s  ", "green"),
                (f"{fmt_num(best.speedup)}x", "bold green"),
                f"  depth {best.depth}",
            )
        else:
            best_txt = Text("best -")
        if self.early_stop:
            best_txt.append(f"   no new best in {c.since_best} of {self.early_stop}", style="dim")
        parts: list[object] = [head, phase, counts]
        spent = spent_text(c.spent)
        if spent:  # where the time goes, as it goes: Exo, gcc, the runner, or waiting for them
            parts.append(Text(spent, style="dim"))
        parts.append(best_txt)
        if e.top:
            parts.append(candidates_table(e.top[:5]))
        if e.message:
            parts.append(Text(e.message, style="bold yellow" if e.kind is EventKind.STOPPING else "dim"))
        return Group(*parts)  # type: ignore[arg-type]


def fmt_duration(seconds: float) -> str:
    """``45s``, ``3m05s``, ``1h02m``."""
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"
