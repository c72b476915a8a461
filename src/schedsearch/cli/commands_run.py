"""``schedsearch run`` and ``schedsearch resume``: drive a search and report it."""

from __future__ import annotations

import shlex
import signal
import sys
from typing import Any

from schedsearch.app import (
    SearchSession,
    SearchSettings,
    WorkloadFile,
    gflops_of,
    resume_search,
    start_search,
)
from schedsearch.app.compose import DEFAULT_BUDGET, DEFAULT_WORKERS
from schedsearch.cli.render import ProgressView, describe, fmt_num, fmt_seconds, schedule_lines
from schedsearch.cli.wiring import db_label, print_json, stderr_console
from schedsearch.core import CandidateRecord, SearchRecord, SearchStatus, Workload
from schedsearch.errors import ClusterError, InfrastructureError, StoreError

__all__ = ["DEFAULT_BUDGET", "DEFAULT_WORKERS", "EXIT_INTERRUPTED", "gflops", "resume_command", "run_command",
           "run_json", "steps_json"]

EXIT_INTERRUPTED = 130


def run_command(file: str, proc: str | None, sizes: dict[str, int], *, budget: float | None,
                max_candidates: int | None, workers: int | None, address: str | None, db: str | None,
                as_json: bool, max_depth: int, strategy: str, seed: int, cc: str | None,
                cflags: str | None, parallel: bool, target: str, cost_model: str = "rank") -> None:
    """Load the workload, check the compiler, open the store, search, report."""
    settings = SearchSettings(budget=budget, max_candidates=max_candidates, workers=workers, max_depth=max_depth,
                              strategy=strategy, seed=seed, cc=cc, cflags=cflags, parallel=parallel, target=target,
                              cost_model=cost_model)
    with start_search(WorkloadFile.of(file, proc, sizes), settings, db=db) as session:
        _drive(session, db, address, as_json)


def resume_command(search_id: int, *, budget: float | None, max_candidates: int | None, workers: int | None,
                   address: str | None, db: str | None, as_json: bool, trust_db_source: bool = False) -> None:
    """Continue a search from the store: same workload (stored source), same settings.

    The stored source runs only when it matches its recorded sha256 and the file it came
    from is still here with the same content, or with ``trust_db_source``.
    """
    with resume_search(search_id, budget=budget, max_candidates=max_candidates, workers=workers, db=db,
                       trust_db_source=trust_db_source) as session:
        _drive(session, db, address, as_json)


def _drive(session: SearchSession, db: str | None, address: str | None, as_json: bool) -> None:
    """Run the session with a live view on stderr, then report (and exit 130 if interrupted)."""
    console = stderr_console()
    try:
        with session.runner(address) as runner, \
                ProgressView(console, session.config.max_seconds, session.workload.label) as view:
            run = runner.run(view, signals=(signal.SIGINT, signal.SIGTERM))
    except (InfrastructureError, StoreError, ClusterError) as e:
        # The machine, not a candidate, stopped the search: say how to continue it.
        if e.search_id is None:
            raise
        raise type(e)(f"{e}; search {e.search_id} is marked failed and keeps everything measured — once "
                      f"that is fixed, continue it with `schedsearch resume {e.search_id}{_db_args(db)}`") from e
    if as_json:
        print_json(run_json(run.search, run.best, db))
    _report(console, run.search, run.best, db)
    if run.search.status is SearchStatus.INTERRUPTED:
        sys.exit(EXIT_INTERRUPTED)


def _db_args(db: str | None) -> str:
    return f" --db {shlex.quote(db)}" if db else ""


def _report(console: Any, search: SearchRecord, best: CandidateRecord | None, db: str | None) -> None:
    c = search.counters
    console.print(
        f"\n[bold]{search.status.value}[/bold]: {search.workload.label} in {search.elapsed_seconds:.1f} s — "
        f"{c.evaluated} evaluated ({c.ok} ok, {c.failed} failed), {c.generated} generated, "
        f"{c.duplicates} duplicate, {c.illegal} illegal"
    )
    console.print(f"baseline (unscheduled): {fmt_seconds(search.baseline_seconds)}"
                  f"{_gflops_text(search.workload, search.baseline_seconds)}")
    if best is not None:
        console.print(f"[bold green]best[/bold green]: candidate {best.id}, {fmt_seconds(search.best_seconds)}"
                      f"{_gflops_text(search.workload, search.best_seconds)}, "
                      f"[bold]{fmt_num(search.best_speedup)}x[/bold] faster (finalists re-measured side by side)")
        console.print("schedule:")
        for line in schedule_lines(best):
            console.print(f"  {line}", highlight=False, markup=False)
    where = _db_args(db)
    console.print(f"search {search.id} is in {db_label(db)}. See it: schedsearch show {search.id}{where}; "
                  f"export it: schedsearch export {search.id} --format py{where}")
    if search.status is SearchStatus.INTERRUPTED:
        console.print(f"[yellow]interrupted[/yellow] — everything measured is kept. Resume with:\n"
                      f"  schedsearch resume {search.id}{where}")


def _gflops_text(workload: Workload, seconds: float | None) -> str:
    g = gflops(workload, seconds)
    return f" ({g:.3g} GFLOP/s)" if g is not None else ""


def gflops(workload: Workload, seconds: float | None) -> float | None:
    """GFLOP/s of one call taking ``seconds``, when the FLOP count is known."""
    return gflops_of(workload.flops, seconds)


def steps_json(record: CandidateRecord) -> list[dict[str, Any]]:
    """A schedule as a list of step objects with a readable ``text``."""
    return [{"kind": s.kind.value, "target": s.target, "args": dict(s.args), "text": describe(s)}
            for s in record.schedule.steps]


def cost_model_json(search: SearchRecord) -> dict[str, Any]:
    """The cost model's mode and its recorded accuracy (``spearman`` None: not enough pairs)."""
    a = search.model_accuracy
    return {
        "mode": search.config.cost_model.value,
        "spearman": a.spearman if a else None,
        "pairs": a.pairs if a else 0,
        "window": a.window if a else None,
        "trained_on": a.trained_on if a else 0,
    }


def run_json(search: SearchRecord, best: CandidateRecord | None, db: str | None) -> dict[str, Any]:
    """The one JSON object ``run --json`` / ``resume --json`` print."""
    c = search.counters
    w = search.workload
    return {
        "search_id": search.id,
        "db": db_label(db),
        "file": w.path,
        "proc": w.proc,
        "sizes": w.sizes_dict,
        "status": search.status.value,
        "failure": search.failure,
        "elapsed_seconds": round(search.elapsed_seconds, 3),
        "candidates": {"generated": c.generated, "duplicates": c.duplicates, "illegal": c.illegal,
                       "evaluated": c.evaluated, "ok": c.ok, "failed": c.failed, "pruned": c.pruned},
        "cost_model": cost_model_json(search),
        "baseline": {"seconds": search.baseline_seconds, "gflops": gflops(w, search.baseline_seconds)},
        "best": None if best is None else {
            "candidate_id": best.id,
            "seconds": search.best_seconds,
            "gflops": gflops(w, search.best_seconds),
            "speedup": search.best_speedup,
            "schedule": steps_json(best),
            "fingerprint": best.fingerprint,
            "depth": best.depth,
        },
        "machine": search.machine.to_json(),
        "target": search.config.expand.target,
    }
