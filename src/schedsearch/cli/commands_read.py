"""The read-only commands: list, show, tree, best, export, explain."""

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
    best_record,
    explain,
    export_c,
    export_py,
    export_source,
    schedule_file_of,
)
from schedsearch.cli.commands_run import gflops, run_json, steps_json
from schedsearch.cli.render import (
    candidates_table, describe, fmt_num, fmt_seconds, schedule_lines, search_summary, step_text,
)
from schedsearch.cli.tree_view import TreeSort, search_tree
from schedsearch.cli.wiring import EXIT_USAGE, db_label, fail, open_db, print_json, stderr_console
from schedsearch.core import CandidateRecord, SearchRecord
from schedsearch.schedule_file import write_schedule_file


def _record_json(r: CandidateRecord, search: SearchRecord) -> dict[str, Any]:
    return {
        "candidate_id": r.id,
        "search_id": r.search_id,
        "parent_id": r.parent_id,
        "depth": r.depth,
        "fingerprint": r.fingerprint,
        "status": r.status.value,
        "seconds": r.seconds,
        "gflops": r.gflops,
        "speedup": r.speedup,
        "step": step_text(r),
        "measured_at": r.measured_at,  # seconds of the search's own elapsed time
        "predicted_speedup": math.exp(-r.predicted) if r.predicted is not None else None,
        "error": r.error,
        "schedule": steps_json(r),
    }


def list_command(db: str | None, as_json: bool) -> None:
    """Every search in the database, newest last."""
    store = open_db(db, create=False, read_only=True)
    try:
        searches = store.list_searches()
    finally:
        store.close()
    if as_json:
        print_json([{
            "search_id": s.id, "file": s.workload.path, "proc": s.workload.proc, "sizes": s.workload.sizes_dict,
            "status": s.status.value, "strategy": s.config.strategy.value, "evaluated": s.counters.evaluated,
            "elapsed_seconds": round(s.elapsed_seconds, 3), "baseline_seconds": s.baseline_seconds,
            "best_seconds": s.best_seconds, "best_speedup": s.best_speedup,
        } for s in searches])
        return
    console = stderr_console()
    if not searches:
        console.print(f"no searches in {db_label(db)} yet: start one with `schedsearch run FILE`")
        return
    table = Table(title=f"searches in {db_label(db)}", title_justify="left")
    for col in ("id", "workload", "status", "strategy", "evaluated", "elapsed", "best", "speedup"):
        table.add_column(col)
    for s in searches:
        table.add_row(str(s.id), s.workload.label, s.status.value, s.config.strategy.value, str(s.counters.evaluated),
                      f"{s.elapsed_seconds:.0f} s", fmt_seconds(s.best_seconds), fmt_num(s.best_speedup, "x"))
    console.print(table)


def show_command(search_id: int, top: int, db: str | None, as_json: bool) -> None:
    """Summary and top candidates of one search."""
    store = open_db(db, create=False, read_only=True)
    try:
        search = store.get_search(search_id)
        best = best_record(store, search)
        records = store.top_candidates(search_id, top)
    finally:
        store.close()
    if as_json:
        data = run_json(search, best, db)
        data["top"] = [_record_json(r, search) for r in records]
        print_json(data)
        return
    console = stderr_console()
    console.print(search_summary(search, db_label(db)))
    console.print(candidates_table(records, title=f"top {len(records)} candidates (median time of the search)"))
    if best is not None:
        console.print(f"best schedule (candidate {best.id}):")
        for line in schedule_lines(best):
            console.print(f"  {line}", highlight=False, markup=False)


def tree_command(search_id: int, depth: int | None, db: str | None, as_json: bool, sort: str = "order") -> None:
    """The whole search tree (or down to --depth), siblings in search order or fastest first."""
    store = open_db(db, create=False, read_only=True)
    try:
        search = store.get_search(search_id)
        records = store.candidates(search_id)
    finally:
        store.close()
    if as_json:
        shown = records if depth is None else [r for r in records if r.depth <= depth]
        print_json([_record_json(r, search) for r in shown])
        return
    stderr_console().print(search_tree(search, records, max_depth=depth, sort=TreeSort(sort)))


def best_command(file: str, proc: str | None, sizes: dict[str, int], top: int, db: str | None, as_json: bool) -> None:
    """Best known candidates of a workload across all searches in the database."""
    known = best_known(WorkloadFile.of(file, proc, sizes), top, db)
    workload, records = known.workload, list(known.records)
    if as_json:
        print_json({
            "file": workload.path, "proc": workload.proc, "sizes": workload.sizes_dict,
            "best": [{
                "candidate_id": r.id, "search_id": r.search_id, "seconds": r.seconds,
                "gflops": gflops(workload, r.seconds), "speedup": r.speedup,
                "fingerprint": r.fingerprint, "schedule": steps_json(r),
            } for r in records],
        })
        return
    console = stderr_console()
    if not records:
        fail(f"no measured schedule for {workload.label} in {db_label(db)}; run `schedsearch run {file}` first", EXIT_USAGE)
    console.print(candidates_table(records, title=f"best known schedules for {workload.label}"))
    console.print(f"best (candidate {records[0].id} of search {records[0].search_id}):")
    for line in schedule_lines(records[0]):
        console.print(f"  {line}", highlight=False, markup=False)


def export_command(search_id: int | None, candidate_id: int | None, fmt: str, output: str | None, db: str | None,
                   trust_db_source: bool = False) -> None:
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
        fail(f"cannot write {shown}: the folder {folder} does not exist; create it or choose another -o path",
             EXIT_USAGE)
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
            f"named: regress ... --workloads {target.parent}", highlight=False, markup=False)


def _warn_if_workload_changed(path: str, sha: str) -> None:
    from schedsearch.core import sha256_text

    p = Path(path)
    if not p.exists():
        stderr_console().print(f"[yellow]warning[/yellow]: {path} no longer exists; the export refers to it")
    elif sha256_text(p.read_text()) != sha:
        stderr_console().print(f"[yellow]warning[/yellow]: {path} changed since the search; the schedule may not apply")


def explain_command(file: str, proc: str | None, sizes: dict[str, int], parallel: bool, target: str,
                    as_json: bool) -> None:
    """Loop nest and every legal rewrite at the root, one per line, with a count."""
    found = explain(WorkloadFile.of(file, proc, sizes), parallel=parallel, target=target)
    workload, legal = found.workload, found.legal
    if as_json:
        print_json({"proc": workload.proc, "sizes": workload.sizes_dict, "flops": workload.flops,
                    "proposed": found.proposed, "legal": [{"kind": r.kind.value, "target": r.target,
                                                           "args": dict(r.args), "text": describe(r)} for r in legal]})
        return
    click.echo(f"{workload.label}  ({workload.flops if workload.flops is not None else 'unknown'} FLOP per call)")
    click.echo(found.nest.rstrip())
    click.echo("")
    width = max((len(r.kind.value) for r in legal), default=0)
    for r in legal:
        rest = describe(r)[len(r.kind.value) + 1:]
        click.echo(f"{r.kind.value:<{width}}  {rest}")
    kinds: dict[str, int] = {}
    for r in legal:
        kinds[r.kind.value] = kinds.get(r.kind.value, 0) + 1
    summary = ", ".join(f"{k} {v}" for k, v in kinds.items())
    click.echo(f"\n{len(legal)} legal rewrites of {found.proposed} proposed ({summary})")
