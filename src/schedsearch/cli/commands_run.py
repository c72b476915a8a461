"""``schedsearch run`` and ``schedsearch resume``: drive a search and report it."""

from __future__ import annotations

import shlex
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any, TextIO

from rich.markup import escape  # plain text inside a markup line: schedule steps hold square brackets

from schedsearch.app import (
    SearchSession,
    WorkloadFile,
    gflops_of,
    resume_search,
    start_search,
    stop_on_signals,
    toolchain_args,
)
from schedsearch.app.event_log import EventLog
from schedsearch.cli.numbers_view import (
    STEPS_LEGEND,
    best_text,
    elapsed_text,
    has_step_numbers,
    search_spent_text,
    status_text,
    step_lines,
)
from schedsearch.cli.options import given, settings_from
from schedsearch.cli.render import ProgressView, StartingView, describe, fmt_seconds
from schedsearch.cli.wiring import STOPPING, command_started, db_label, print_json, stderr_console, stdout_console
from schedsearch.core import CandidateRecord, SearchEvent, SearchRecord, SearchStatus, Workload
from schedsearch.errors import ClusterError, InfrastructureError, StoreError
from schedsearch.numbers import DeclaredBest, NumberKind, ending

if TYPE_CHECKING:
    from schedsearch.app import SearchRun
    from schedsearch.warm_start import WarmStart

__all__ = [
    "EXIT_INTERRUPTED",
    "gflops",
    "resume_command",
    "run_command",
    "run_json",
    "steps_json",
]

EXIT_INTERRUPTED = 130


def run_command(
    file: str,
    proc: str | None,
    sizes: dict[str, int],
    *,
    address: str | None,
    db: str | None,
    as_json: bool,
    events: TextIO | None = None,
    **settings: Any,
) -> None:
    """Load the workload, check the compiler, open the store, search, report (and append
    every event to ``events`` as JSON lines when given). ``settings`` are ``run``'s parsed
    setting options (``cli.options``)."""
    chosen = settings_from(settings)
    starting = StartingView(stderr_console(), command_started())
    with starting, start_search(WorkloadFile.of(file, proc, sizes), chosen, db=db, say=starting) as session:
        _drive(session, db, address, as_json, events, starting)


def resume_command(
    search_id: int,
    *,
    address: str | None,
    db: str | None,
    as_json: bool,
    trust_db_source: bool = False,
    events: TextIO | None = None,
    cc: str | None = None,
    cflags: str | None = None,
    trust_db_config: bool = False,
    **settings: Any,
) -> None:
    """Continue a search from the store: same workload (stored source), same settings but
    those ``settings`` gives (``resume``'s parsed setting options: budgets added to the
    search's, ``remeasure`` for this run), built with ``cc`` and ``cflags`` (``run``'s
    defaults when None).

    The stored source runs only when it matches its recorded sha256 and the file it came
    from is still here with the same content, or with ``trust_db_source``. The stored
    compiler and flags never run; a search stored with others is refused unless
    ``trust_db_config`` (``app.resuming``).
    """
    changed = given(settings)
    starting = StartingView(stderr_console(), command_started())
    with (
        starting,
        resume_search(
            search_id,
            db=db,
            trust_db_source=trust_db_source,
            cc=cc,
            cflags=cflags,
            trust_db_config=trust_db_config,
            say=starting,
            **changed,
        ) as session,
    ):
        _drive(session, db, address, as_json, events, starting)


def _drive(
    session: SearchSession,
    db: str | None,
    address: str | None,
    as_json: bool,
    events: TextIO | None = None,
    starting: StartingView | None = None,
) -> None:
    """Run the session with a live view on stderr (and an event log), then report on stdout
    (and exit 130 if interrupted). ``starting`` is told each step until the search's clock
    starts (the workers are ready), then closed."""
    console = stderr_console()
    say = starting if starting is not None else (lambda what: None)
    try:
        for line in session.notes:  # a search taken over from a driver that stopped
            console.print(line, highlight=False, markup=False)
        warm = session.warm_start(say)
        for line in warm.summary() if warm is not None else ():
            console.print(line, highlight=False, markup=False)
        for line in session.inherited.summary() if session.inherited is not None else ():
            console.print(line, highlight=False, markup=False)
        # One stop for the whole run: a signal while the workers start (a private Ray
        # cluster takes 5 s) is said at once and ends the start; one during the search stops
        # it cleanly (the live view says so).
        stop, searching = threading.Event(), threading.Event()

        def starting_stopped() -> None:
            if not searching.is_set():
                console.print(STOPPING, highlight=False, markup=False)

        with (
            stop_on_signals(stop, (signal.SIGINT, signal.SIGTERM), announce=starting_stopped),
            session.runner(address, stop=stop, say=say) as runner,
        ):
            if stop.is_set():
                raise KeyboardInterrupt
            if starting is not None:
                starting.ready()  # where the start's seconds went; the search's own view takes over
            with ProgressView(
                console,
                session.config.max_seconds,
                session.workload.label,
                session.config.max_candidates,
                early_stop=session.config.early_stop,
            ) as view:
                log = EventLog(events) if events is not None else None

                def observe(event: SearchEvent) -> None:
                    if log is not None:
                        log(event)
                    view(event)

                searching.set()
                # What starting took (since the command began) is recorded apart from the
                # search's clock, which the budget counts.
                run = runner.run(observe, stop=stop, started=command_started())
            # Reported before the workers are released: shutting a private Ray cluster down
            # takes seconds (3 s on a 2-core Zen 3), and everything reported is in the store.
            _report(run, db, as_json)
    except (InfrastructureError, StoreError, ClusterError) as e:
        # The machine, not a candidate, stopped the search: say how to continue it.
        if e.search_id is None:
            raise
        raise type(e)(
            f"{e}; search {e.search_id} is marked failed and keeps everything measured — once "
            f"that is fixed, continue it with `schedsearch resume {e.search_id}{_db_args(db)}"
            f"{toolchain_args(session.config)}`"
        ) from e
    if run.search.status is SearchStatus.INTERRUPTED:
        sys.exit(EXIT_INTERRUPTED)


def _report(run: SearchRun, db: str | None, as_json: bool) -> None:
    """The search's summary on stdout, the command's result; with ``--json`` the JSON
    document is on stdout and the summary on stderr, for the person watching."""
    console = stderr_console() if as_json else stdout_console()
    if as_json:
        print_json(run_json(run.search, run.declared, db, run.warm))
    for line in report_lines(run.search, run.declared, list(run.lineage), db):
        console.print(line, highlight=False)


def _db_args(db: str | None) -> str:
    return f" --db {shlex.quote(db)}" if db else ""


def report_lines(
    search: SearchRecord, best: DeclaredBest | None, lineage: list[CandidateRecord], db: str | None
) -> list[str]:
    """The summary ``run`` and ``resume`` print when the search ends (rich markup).

    The words follow what is stored: how the run ended (budget reached, candidate limit
    reached, stopped improving, nothing left to expand, interrupted), and whether the best's numbers come from
    the finalists' side-by-side re-measurement or are search-time medians.
    """
    c = search.counters
    lines = [
        f"\n[bold]{status_text(search)}[/bold] — {search.workload.label} in {elapsed_text(search)}: "
        f"{c.evaluated} evaluated ({c.ok} ok, {c.failed} failed), {c.generated} generated, "
        f"{c.duplicates} duplicate, {c.illegal} illegal{_reuse_text(c.reused, c.warm_started)}"
        f"{_beside_text(c.timed_beside, c.measured)}",
        f"baseline (unscheduled): {fmt_seconds(search.baseline_seconds)}"
        f"{_gflops_text(search.workload, search.baseline_seconds)}",
    ]
    spent = search_spent_text(search)
    if spent:
        lines.append(f"time spent: {spent}")
    if best is not None:
        so_far = "best" if search.status is SearchStatus.COMPLETED else "best so far"
        lines.append(f"[bold green]{so_far}[/bold green]: {escape(best_text(search, best))}")
        if not best.is_unscheduled:
            path = lineage or [best.record]
            lines.append(f"schedule ({escape(STEPS_LEGEND)}):" if has_step_numbers(path) else "schedule:")
            lines += [f"  {escape(line)}" for line in step_lines(path)]
    where = _db_args(db)
    lines.append(
        f"search {search.id} is in {db_label(db)}. See it: schedsearch show {search.id}{where}; "
        f"export it: schedsearch export {search.id} --format py{where}"
    )
    if search.status is SearchStatus.INTERRUPTED:
        lines.append(
            f"[yellow]interrupted[/yellow] — everything measured is kept. Resume with:\n"
            f"  schedsearch resume {search.id}{where}{escape(toolchain_args(search.config))}"
        )
    return lines


def _reuse_text(reused: int, warm_started: int) -> str:
    parts = [f"{reused} measurement{'s' if reused != 1 else ''} reused"] if reused else []
    if warm_started:
        parts.append(f"{warm_started} warm-started")
    return f"; {', '.join(parts)}" if parts else ""


def _beside_text(beside: int, measured: int) -> str:
    """How many measurements ran with the node's builds and expansions beside them (auto or
    shared timing): a user comparing searches' times should know."""
    return f"; {beside} of {measured} timed beside builds and expansions" if beside else ""


def _gflops_text(workload: Workload, seconds: float | None) -> str:
    g = gflops(workload, seconds)
    return f" ({g:.3g} GFLOP/s)" if g is not None else ""


def gflops(workload: Workload, seconds: float | None) -> float | None:
    """GFLOP/s of one call taking ``seconds``, when the FLOP count is known."""
    return gflops_of(workload.flops, seconds)


def steps_json(record: CandidateRecord) -> list[dict[str, Any]]:
    """A schedule as a list of step objects with a readable ``text``."""
    return [
        {"kind": s.kind.value, "target": s.target, "args": dict(s.args), "text": describe(s)}
        for s in record.schedule.steps
    ]


def cost_model_json(search: SearchRecord) -> dict[str, Any]:
    """The cost model's mode and its recorded accuracy (``spearman`` None: not enough pairs)."""
    a = search.model_accuracy
    return {
        "mode": search.config.cost_model.value,
        "spearman": a.spearman if a else None,
        "pairs": a.pairs if a else 0,
        "window": a.window if a else None,
        "trained_on": a.trained_on if a else 0,
        "span": a.span if a else None,
        "concordance": a.concordance if a else None,
        "distinct_pairs": a.distinct_pairs if a else 0,
        # every prediction since the search's settled_after-th measurement
        "settled_after": a.settled_after if a else 0,
        "settled_spearman": a.settled_spearman if a else None,
        "settled_pairs": a.settled_pairs if a else 0,
        "settled_span": a.settled_span if a else None,
        "settled_repeat": a.settled_repeat if a else None,
    }


def best_json(best: DeclaredBest | None) -> dict[str, Any] | None:
    """A search's best as every ``--json`` gives it: the numbers every command shows, which
    kind they are (``numbers``: ``remeasured`` side by side, or ``search_time``), and the
    candidate's own search-time median with its spread."""
    if best is None:
        return None
    r = best.record
    return {
        "candidate_id": r.id,
        "seconds": best.seconds,
        "gflops": best.gflops,
        "speedup": best.speedup,
        "spread": best.spread,  # None for a re-measurement (only its median is stored)
        "numbers": best.kind.value,
        "remeasured": best.kind is NumberKind.REMEASURED,
        "unscheduled": best.is_unscheduled,
        "search_time": {"seconds": r.seconds, "spread": best.search_time_spread, "speedup": r.speedup},
        "fingerprint": r.fingerprint,
        "depth": r.depth,
    }


def run_json(
    search: SearchRecord, best: DeclaredBest | None, db: str | None, warm: WarmStart | None = None
) -> dict[str, Any]:
    """The one JSON object ``run --json`` / ``resume --json`` print (``warm_start``: what a
    new search's warm start replayed and skipped, when it had one)."""
    c = search.counters
    w = search.workload
    data = {
        "search_id": search.id,
        "db": db_label(db),
        "file": w.path,
        "proc": w.proc,
        "sizes": w.sizes_dict,
        "status": search.status.value,
        "failure": search.failure,
        "elapsed_seconds": round(search.elapsed_seconds, 3),
        "candidates": {
            "generated": c.generated,
            "duplicates": c.duplicates,
            "illegal": c.illegal,
            "evaluated": c.evaluated,
            "ok": c.ok,
            "failed": c.failed,
            "pruned": c.pruned,
            "reused": c.reused,
            "warm_started": c.warm_started,
            "since_best": c.since_best,
            "untried_ahead": c.untried_ahead,
            "timed_beside": c.timed_beside,
        },
        "time_spent": {k: round(v, 3) for k, v in c.spent.to_json().items()},
        "early_stop": search.config.early_stop,
        "auto_stop": search.config.auto_stop,
        "cost_model": cost_model_json(search),
        "ended": ending(search).value,
        "baseline": {"seconds": search.baseline_seconds, "gflops": gflops(w, search.baseline_seconds)},
        "best": None if best is None else dict(best_json(best) or {}, schedule=steps_json(best.record)),
        "machine": search.machine.to_json(),
        "target": search.config.expand.target,
        "threads": search.config.bench.threads,
    }
    if warm is not None:
        data["warm_start"] = warm.to_json()
    return data
