"""The read-only commands: list, show, tree, best, export, explain.

What a command was asked for (a table, a report, a tree, an export) goes to stdout, so that
it can be piped or redirected; notes, warnings and errors go to stderr."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from schedsearch.app import (
    WorkloadFile,
    best_known,
    driver_gone,
    explain,
    export_c,
    export_py,
    export_source,
    schedule_file_of,
)
from schedsearch.cli.commands_run import best_json, run_json, steps_json
from schedsearch.cli.numbers_view import (
    BEST_MARK,
    STEPS_LEGEND,
    best_note,
    best_text,
    fmt_time,
    has_step_numbers,
    print_whole,
    ranked_table,
    record_spread,
    step_lines,
    summary_grid,
)
from schedsearch.cli.render import describe, fmt_num, step_text
from schedsearch.cli.tree_view import TreeSort, search_tree
from schedsearch.cli.wiring import EXIT_USAGE, db_label, fail, open_db, print_json, stderr_console, stdout_console
from schedsearch.core import CandidateRecord
from schedsearch.nodes import node_counts, node_labels, several_nodes, timed_on
from schedsearch.numbers import DeclaredBest, NumberKind, best_among, ending, load_declared_best, step
from schedsearch.schedule_file import write_schedule_file


def _record_json(r: CandidateRecord, parent: CandidateRecord | None, best: DeclaredBest | None) -> dict[str, Any]:
    """One candidate with its search-time numbers, its step's gain over ``parent`` and, for
    the declared best, the numbers every command reports for it."""
    s = step(r, parent)
    return {
        "candidate_id": r.id,
        "search_id": r.search_id,
        "parent_id": r.parent_id,
        "depth": r.depth,
        "fingerprint": r.fingerprint,
        "status": r.status.value,
        "seconds": r.seconds,  # the search-time median
        "spread": record_spread(r),  # its interquartile range relative to it
        "gflops": r.gflops,
        "speedup": r.speedup,
        "gain": s.gain,  # parent's time / this time
        "within_noise": s.within_noise,
        "step": step_text(r),
        "measured_at": r.measured_at,  # seconds of the search's own elapsed time
        # what measuring it cost: its build (0 when found ready) and its verification and timing
        "build_seconds": r.build_seconds,
        "run_seconds": r.run_seconds,
        "predicted_speedup": math.exp(-r.predicted) if r.predicted is not None else None,
        "error": r.error,
        "declared_best": best_json(best) if best is not None and best.record.id == r.id else None,
        "schedule": steps_json(r),
        # an earlier search's measurement of the same C, taken instead of measuring (None: measured here)
        "reused_from": None
        if r.reused_candidate_id is None
        else {"search_id": r.reused_search_id, "candidate_id": r.reused_candidate_id},
        # the Ray nodes that timed and built its latest measurement (None: outside a cluster, or not known)
        "node": r.node or None,
        "built_node": r.built_node or None,
    }


def list_command(db: str | None, as_json: bool) -> None:
    """Every search in the database, newest last."""
    store = open_db(db, create=False, read_only=True)
    try:
        searches = store.list_searches()
        bests = {s.id: load_declared_best(store, s) for s in searches}
        gone = {s.id for s in searches if driver_gone(store, s)}
    finally:
        store.close()
    if as_json:
        print_json(
            [
                {
                    "search_id": s.id,
                    "file": s.workload.path,
                    "proc": s.workload.proc,
                    "sizes": s.workload.sizes_dict,
                    "status": s.status.value,
                    "driver_gone": s.id in gone,
                    "ended": ending(s).value,
                    "strategy": s.config.strategy.value,
                    "evaluated": s.counters.evaluated,
                    "elapsed_seconds": round(s.elapsed_seconds, 3),
                    "baseline_seconds": s.baseline_seconds,
                    "best_candidate_id": best.record.id if best else None,
                    "best_seconds": best.seconds if best else None,
                    "best_speedup": best.speedup if best else None,
                    "best": best_json(best),
                }
                for s in searches
                for best in [bests[s.id]]
            ]
        )
        return
    if not searches:  # an empty list: nothing on stdout, a hint for the person reading stderr
        stderr_console().print(f"no searches in {db_label(db)} yet: start one with `schedsearch run FILE`")
        return
    console = stdout_console()
    table = Table(
        title=f"searches in {db_label(db)} (best: the numbers `show` reports, re-measured side by side "
        f"or a search-time median ± half its interquartile range)",
        title_justify="left",
    )
    for col in ("id", "workload", "status", "evaluated", "elapsed", "best", "time", "speedup", "numbers"):
        table.add_column(col, justify="right" if col in ("time", "speedup") else "left")
    for s in searches:
        b = bests[s.id]
        status = f"{s.status.value} (no driver)" if s.id in gone else s.status.value
        table.add_row(
            str(s.id),
            s.workload.label,
            status,
            str(s.counters.evaluated),
            f"{s.elapsed_seconds:.0f} s",
            f"#{b.record.id}" if b else "-",
            fmt_time(b.seconds, b.spread) if b else "-",
            fmt_num(b.speedup, "x") if b else "-",
            _kind_label(b),
        )
    print_whole(console, table)


def _kind_label(best: DeclaredBest | None) -> str:
    """The short name of a best's kind of numbers, for table columns."""
    if best is None:
        return "-"
    return "re-measured" if best.kind is NumberKind.REMEASURED else "search-time"


def show_command(search_id: int, top: int, db: str | None, as_json: bool) -> None:
    """Summary and top candidates of one search."""
    store = open_db(db, create=False, read_only=True)
    try:
        search = store.get_search(search_id)
        gone = driver_gone(store, search)
        best = load_declared_best(store, search)
        records = store.top_candidates(search_id, top)
        parents = {r.parent_id: store.get_candidate(r.parent_id) for r in records if r.parent_id is not None}
        lineage = store.lineage(best.record.id) if best is not None else []
        everything = store.candidates(search_id, code=False)
        root = lineage[0] if lineage else next((r for r in everything if r.parent_id is None), None)
    finally:
        store.close()
    nodes = timed_on(everything)
    if as_json:
        data = run_json(search, best, db)
        data["driver_gone"] = gone
        data["nodes"] = node_counts(everything)  # {Ray node id: candidates it timed}; {} outside a cluster
        data["top"] = [
            _record_json(r, parents.get(r.parent_id) if r.parent_id is not None else None, best) for r in records
        ]
        print_json(data)
        return
    console = stdout_console()
    print_whole(console, summary_grid(search, best, root, db_label(db), driver_gone=gone, nodes=nodes))
    print_whole(
        console,
        ranked_table(
            records,
            best,
            node_labels=node_labels(everything) if several_nodes(nodes) else None,
            title=(
                f"top {len(records)} candidates by search-time median (time ± half the interquartile range; "
                f"speedups against the search-time baseline)"
            ),
        ),
    )
    console.print(best_note(best), highlight=False, markup=False)
    if best is not None:
        _print_schedule(console, f"best schedule (candidate {best.record.id})", lineage)


def tree_command(search_id: int, depth: int | None, db: str | None, as_json: bool, sort: str = "order") -> None:
    """The whole search tree (or down to --depth), siblings in search order or fastest first."""
    store = open_db(db, create=False, read_only=True)
    try:
        search = store.get_search(search_id)
        records = store.candidates(search_id)
    finally:
        store.close()
    if as_json:
        by_id = {r.id: r for r in records}
        best = best_among(search, records)
        shown = records if depth is None else [r for r in records if r.depth <= depth]
        print_json([_record_json(r, by_id.get(r.parent_id) if r.parent_id is not None else None, best) for r in shown])
        return
    print_whole(stdout_console(), search_tree(search, records, max_depth=depth, sort=TreeSort(sort)))


def best_command(file: str, proc: str | None, sizes: dict[str, int], top: int, db: str | None, as_json: bool) -> None:
    """Best known schedules of a workload: each search's declared best, fastest first."""
    known = best_known(WorkloadFile.of(file, proc, sizes), top, db)
    workload, found, lineage = known.workload, list(known.found), list(known.lineage)
    if as_json:
        print_json(
            {
                "file": workload.path,
                "proc": workload.proc,
                "sizes": workload.sizes_dict,
                "best": [dict(best_json(b) or {}, search_id=s.id, schedule=steps_json(b.record)) for s, b in found],
            }
        )
        return
    if not found:
        fail(
            f"no measured schedule for {workload.label} in {db_label(db)}; run `schedsearch run {file}` first",
            EXIT_USAGE,
        )
    table = Table(
        title=f"best known schedules for {workload.label}: each search's best, fastest first", title_justify="left"
    )
    console = stdout_console()
    for col, justify in (
        ("", "left"),
        ("search", "right"),
        ("candidate", "right"),
        ("time", "right"),
        ("speedup", "right"),
        ("numbers", "left"),
        ("status", "left"),
        ("last step", "left"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for i, (s, b) in enumerate(found):
        table.add_row(
            BEST_MARK if i == 0 else "",
            str(s.id),
            str(b.record.id),
            fmt_time(b.seconds, b.spread),
            fmt_num(b.speedup, "x"),
            _kind_label(b),
            s.status.value,
            step_text(b.record),
        )
    print_whole(console, table)
    s, b = found[0]
    console.print(f"{BEST_MARK} best: search {s.id}, {best_text(s, b)}", highlight=False, markup=False)
    _print_schedule(console, f"schedule (candidate {b.record.id})", lineage)


def _print_schedule(console: Any, title: str, lineage: list[CandidateRecord]) -> None:
    """A best's schedule with the numbers after each step (``numbers_view.step_lines``)."""
    legend = f"; {STEPS_LEGEND}:" if has_step_numbers(lineage) else ":"
    console.print(f"{title}{legend}", highlight=False, markup=False)
    for line in step_lines(lineage):
        console.print(f"  {line}", highlight=False, markup=False)


def export_command(
    search_id: int | None,
    candidate_id: int | None,
    fmt: str,
    output: str | None,
    db: str | None,
    trust_db_source: bool = False,
) -> None:
    """Write a schedule as a Python script, C, or a schedule file.

    ``--format c`` runs the workload's stored source (to generate the C) and ``--format py``
    embeds it in the script; both do so under the same rule as ``resume``
    (``schedsearch.trust.check_stored_source``). ``--format json`` runs and embeds nothing.
    """
    if (search_id is None) == (candidate_id is None):
        fail("give either SEARCH_ID or --candidate ID (not both)", EXIT_USAGE)
    source = export_source(search_id, candidate_id, db)
    workload = source.search.workload
    out_path = Path(output).resolve() if output else Path.cwd() / "schedule.out"
    if output:
        _check_writable(out_path, output)
    if fmt == "py":
        text = export_py(source, trust_db_source=trust_db_source)
    elif fmt == "c":
        text = export_c(source, trust_db_source=trust_db_source)
    else:
        _warn_if_workload_changed(workload.path, workload.source_sha256)
        data = schedule_file_of(source, out_path, db)
        if output:
            _write(output, lambda: write_schedule_file(output, data))
            _note_outside(workload.path, out_path)
            return
        text = json.dumps(data.to_json(), indent=2) + "\n"
    if output:
        _write(output, lambda: Path(output).write_text(text))
    else:
        click.echo(text, nl=False)


def _check_writable(out_path: Path, shown: str) -> None:
    """Fail with one line before any work when the export cannot be written there."""
    folder = out_path.parent
    if not folder.is_dir():
        fail(
            f"cannot write {shown}: the folder {folder} does not exist; create it or choose another -o path", EXIT_USAGE
        )
    if out_path.is_dir():
        fail(f"cannot write {shown}: it is a folder; give a file path with -o", EXIT_USAGE)


def _write(shown: str, write: Any) -> None:
    try:
        write()
    except OSError as e:
        fail(f"cannot write {shown}: {e.strerror or e}; choose a writable -o path", EXIT_USAGE)
    stderr_console().print(f"wrote {shown}")


def _note_outside(workload_path: str, schedule_path: Path) -> None:
    """A schedule file whose workload lies outside its folder needs --workloads to regress."""
    base, target = schedule_path.parent, Path(workload_path).resolve()
    if base not in target.parents:
        stderr_console().print(
            f"note: the workload {workload_path} lies outside {base}; `schedsearch regress` runs it only when "
            f"named: regress ... --workloads {target.parent}",
            highlight=False,
            markup=False,
        )


def _warn_if_workload_changed(path: str, sha: str) -> None:
    from schedsearch.core import sha256_text

    p = Path(path)
    if not p.exists():
        stderr_console().print(f"[yellow]warning[/yellow]: {path} no longer exists; the export refers to it")
    elif sha256_text(p.read_text()) != sha:
        stderr_console().print(f"[yellow]warning[/yellow]: {path} changed since the search; the schedule may not apply")


def explain_command(
    file: str, proc: str | None, sizes: dict[str, int], parallel: bool, target: str, as_json: bool
) -> None:
    """Loop nest and every legal rewrite at the root, one per line, with a count."""
    found = explain(WorkloadFile.of(file, proc, sizes), parallel=parallel, target=target)
    workload, legal = found.workload, found.legal
    if as_json:
        print_json(
            {
                "proc": workload.proc,
                "sizes": workload.sizes_dict,
                "flops": workload.flops,
                "proposed": found.proposed,
                "legal": [
                    {"kind": r.kind.value, "target": r.target, "args": dict(r.args), "text": describe(r)} for r in legal
                ],
            }
        )
        return
    click.echo(f"{workload.label}  ({workload.flops if workload.flops is not None else 'unknown'} FLOP per call)")
    click.echo(found.nest.rstrip())
    click.echo("")
    width = max((len(r.kind.value) for r in legal), default=0)
    for r in legal:
        rest = describe(r)[len(r.kind.value) + 1 :]
        click.echo(f"{r.kind.value:<{width}}  {rest}")
    kinds: dict[str, int] = {}
    for r in legal:
        kinds[r.kind.value] = kinds.get(r.kind.value, 0) + 1
    summary = ", ".join(f"{k} {v}" for k, v in kinds.items())
    click.echo(f"\n{len(legal)} legal rewrites of {found.proposed} proposed ({summary})")
