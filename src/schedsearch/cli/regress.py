"""``schedsearch regress``: replay committed schedule files and fail on regressions.

Each file is checked by ``schedsearch.app.regress.check_one`` (what is checked, and what
may run, is said there); this module collects the files, reports them (a table, ``--json``,
a JUnit file in which a schedule for instructions this CPU lacks is ``skipped``) and
re-records them with ``--update``.
"""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from schedsearch.app.regress import CaseResult, Remeasured, check_one, regress_setup, update_file, verdict
from schedsearch.cli.numbers_view import print_whole
from schedsearch.cli.render import fmt_num
from schedsearch.cli.wiring import fail, print_json, stderr_console, stdout_console

__all__ = ["CaseResult", "Remeasured", "check_one", "collect", "junit_xml", "regress_command", "verdict"]

EXIT_PASS, EXIT_FAIL = 0, 1


def collect(paths: tuple[str, ...]) -> list[Path]:
    """Schedule files named directly, or every ``*.json`` under a named folder."""
    files: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = sorted(p.rglob("*.json"))
            if not found:
                fail(f"no schedule files (*.json) under {p}")
            files.extend(found)
        elif p.exists():
            files.append(p)
        else:
            fail(f"{p} does not exist; give schedule files or folders holding them")
    return files


def junit_xml(results: list[CaseResult], path: str) -> None:
    """A JUnit XML report (one testcase per schedule file) for CI systems."""
    suite = ET.Element(
        "testsuite",
        name="schedsearch.regress",
        tests=str(len(results)),
        failures=str(sum(not r.passed and not r.skipped for r in results)),
        skipped=str(sum(r.skipped for r in results)),
        time=f"{sum(r.seconds for r in results):.3f}",
    )
    for r in results:
        case = ET.SubElement(suite, "testcase", classname="schedsearch.regress", name=r.name, time=f"{r.seconds:.3f}")
        if r.skipped:
            ET.SubElement(case, "skipped", message=r.reason)
        elif not r.passed:
            ET.SubElement(case, "failure", message=r.reason).text = r.reason
        out = [f"speedup {fmt_num(r.speedup, 'x')} (recorded {fmt_num(r.recorded_speedup, 'x')})", *r.notes]
        if r.warning:
            out.append(f"warning: {r.warning}")
        ET.SubElement(case, "system-out").text = "\n".join(out)
    tree = ET.ElementTree(suite)
    ET.indent(tree)
    tree.write(path, encoding="utf-8", xml_declaration=True)


def regress_command(
    paths: tuple[str, ...],
    tolerance: float,
    junit: str | None,
    cc: str | None,
    cflags: str | None,
    as_json: bool,
    strict_machine: bool = False,
    update: bool = False,
    workloads: tuple[str, ...] = (),
) -> int:
    """Run every schedule file; return the exit code (0: none failed, skips included; 1: any failed).

    With ``update``, every schedule that replayed, verified and is not slower than the
    unscheduled proc is re-recorded with this run's speedup, time and machine (its file is
    rewritten) and passes."""
    files = collect(paths)
    setup = regress_setup(cc, cflags)
    bench, machine, flags = setup.bench, setup.machine, setup.cpu_flags
    console = stderr_console()
    console.print(
        f"regress: {len(files)} schedule file(s) on {machine.cpu_model or 'an unknown CPU'}, "
        f"{machine.compiler_version}",
        highlight=False,
    )
    results = []
    for i, f in enumerate(files, 1):
        r = check_one(f, tolerance, bench, machine, flags, strict_machine, workloads)
        mark = "skip" if r.skipped else "pass" if r.passed else "FAIL"
        console.print(f"[{i}/{len(files)}] {mark} {r.name} ({r.seconds:.1f} s)", highlight=False)
        results.append(r)
    if update:
        results = [_updated(r) for r in results]
    if junit:
        junit_xml(results, junit)
    # The verdict table is the result (stdout); with --json the document is, and the table
    # stays on stderr for the person watching.
    _table(results, stderr_console() if as_json else stdout_console())
    foreign = sum(r.machine_differs for r in results)
    if foreign:
        console.print(
            f"{foreign} of {len(results)} schedule(s) were recorded on another machine or toolchain "
            f"than this one ({machine.cpu_model or 'unknown CPU'}, {' '.join(bench.cflags)}): "
            + (
                "their timings are checked strictly"
                if strict_machine
                else "falling short of their recorded timings is a warning, not a failure"
            ),
            highlight=False,
            soft_wrap=True,
        )
    failed = [r for r in results if not r.passed and not r.skipped]
    if as_json:
        print_json(
            {
                "passed": not failed,
                "tolerance": tolerance,
                "strict_machine": strict_machine,
                "results": [r.to_json() for r in results],
            }
        )
    return EXIT_FAIL if failed else EXIT_PASS


def _updated(r: CaseResult) -> CaseResult:
    """The case after --update: re-recorded (and passing) when it measured well enough."""
    slower_than_unscheduled = r.reason.startswith("slower than the unscheduled")
    if r.measured is None or slower_than_unscheduled:
        return r
    update_file(Path(r.path), r.measured)
    return dataclasses.replace(
        r,
        passed=True,
        reason="",
        warning="",
        recorded_speedup=r.measured.speedup,
        notes=r.notes + (f"re-recorded (was {fmt_num(r.recorded_speedup, 'x')})",),
    )


def _table(results: list[CaseResult], console: Console) -> None:
    """One row per schedule file: its verdict, speedup against the recorded one, and why."""
    table = Table(title="schedsearch regress", title_justify="left")
    for col in ("schedule", "result", "speedup", "recorded", "notes"):
        table.add_column(col)
    for r in results:
        if r.skipped:
            verdict = Text("skip", style="yellow")
        elif r.passed:
            verdict = Text("pass" + (" (warning)" if r.warning else ""), style="green")
        else:
            verdict = Text("FAIL", style="bold red")
        notes = "; ".join(([r.reason] if r.reason else []) + ([r.warning] if r.warning else []) + list(r.notes))
        table.add_row(r.name, verdict, fmt_num(r.speedup, "x"), fmt_num(r.recorded_speedup, "x"), notes)
    print_whole(console, table)
