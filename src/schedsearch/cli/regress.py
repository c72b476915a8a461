"""``schedsearch regress``: replay committed schedule files and fail on regressions.

For each schedule file: reload the workload, replay every step (a step that no longer
applies fails, naming it), verify the output against the unscheduled proc, report C
fingerprint drift, and time the schedule side by side with the unscheduled proc in one
process; fail when the speedup fell below ``recorded x (1 - tolerance)``.
"""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from rich.table import Table
from rich.text import Text

from schedsearch.cli.render import fmt_num
from schedsearch.cli.wiring import bench_config, fail, print_json, stderr_console
from schedsearch.core import BenchConfig, Candidate, MachineInfo, Status, sha256_text
from schedsearch.errors import ReplayError, WorkloadError
from schedsearch.schedule_file import read_schedule_file

EXIT_PASS, EXIT_FAIL = 0, 1


@dataclass(frozen=True, slots=True)
class CaseResult:
    """The verdict on one schedule file."""

    path: str
    name: str
    passed: bool
    reason: str = ""
    recorded_speedup: float | None = None
    speedup: float | None = None
    fingerprint_drift: bool = False
    machine_differs: bool = False
    source_changed: bool = False
    seconds: float = 0.0
    notes: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path, "name": self.name, "passed": self.passed, "reason": self.reason,
            "recorded_speedup": self.recorded_speedup, "speedup": self.speedup,
            "fingerprint_drift": self.fingerprint_drift, "machine_differs": self.machine_differs,
            "source_changed": self.source_changed, "seconds": round(self.seconds, 3), "notes": list(self.notes),
        }


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


def check_one(path: Path, tolerance: float, bench: BenchConfig, machine: MachineInfo) -> CaseResult:
    """Replay, verify and time one schedule file; every failure becomes a CaseResult."""
    from schedsearch.evaluate import default_cache_dir, evaluate_candidate, remeasure
    from schedsearch.transforms import build_proc, fingerprint, kernel_c, load_workload, proc_text, root_candidate

    started = time.monotonic()
    sf = read_schedule_file(path)  # bad files raise: that is bad input, not a regression
    sizes = ",".join(f"{k}={v}" for k, v in sf.sizes)
    name = f"{sf.proc}[{sizes}] {path.name}" if sizes else f"{sf.proc} {path.name}"
    notes: list[str] = []

    def result(passed: bool, reason: str = "", **kw: object) -> CaseResult:
        return CaseResult(str(path), name, passed, reason, recorded_speedup=sf.speedup,
                          seconds=time.monotonic() - started, notes=tuple(notes), **kw)  # type: ignore[arg-type]

    machine_differs = bool(sf.machine.cpu_model) and sf.machine.fingerprint != machine.fingerprint
    if machine_differs:
        notes.append(f"recorded on a different machine or toolchain ({sf.machine.cpu_model}, "
                     f"{sf.machine.compiler_version} {' '.join(sf.machine.cflags)}): its timing is weak evidence here")
    try:
        workload = load_workload(sf.workload_path(path), sf.proc, dict(sf.sizes))
    except WorkloadError as e:
        return result(False, f"workload does not load: {e}", machine_differs=machine_differs)
    source_changed = bool(sf.source_sha256) and sha256_text(workload.source) != sf.source_sha256
    if source_changed:
        notes.append("the workload file changed since the schedule was recorded")
    flags = {"machine_differs": machine_differs, "source_changed": source_changed}
    try:
        proc = build_proc(workload, sf.schedule)
    except ReplayError as e:
        return result(False, str(e), **flags)
    c = kernel_c(proc)
    cand = Candidate(sf.schedule, c, fingerprint(c), proc_text(proc), None, len(sf.schedule))
    drift = bool(sf.fingerprint) and cand.fingerprint != sf.fingerprint
    if drift:
        notes.append("the generated C differs from the recorded one (fingerprint drift)")
    flags["fingerprint_drift"] = drift
    root = root_candidate(workload)
    cache = default_cache_dir()
    checked = evaluate_candidate(workload, root, cand, bench, cache)
    if checked.status is not Status.OK:
        return result(False, f"{checked.status.value}: {checked.error}".strip(), **flags)
    base, mine = remeasure(workload, root, [root, cand], bench, cache)
    if base.seconds is None or mine.seconds is None:
        bad = base if base.seconds is None else mine
        return result(False, f"re-measurement failed: {bad.status.value}: {bad.error}", **flags)
    speedup = base.seconds / mine.seconds
    if sf.speedup is not None and speedup < sf.speedup * (1 - tolerance):
        return result(False, f"slower: speedup {speedup:.3g}x < recorded {sf.speedup:.3g}x x (1 - {tolerance:g})",
                      speedup=speedup, **flags)
    return result(True, "", speedup=speedup, **flags)


def junit_xml(results: list[CaseResult], path: str) -> None:
    """A JUnit XML report (one testcase per schedule file) for CI systems."""
    suite = ET.Element("testsuite", name="schedsearch.regress", tests=str(len(results)),
                       failures=str(sum(not r.passed for r in results)),
                       time=f"{sum(r.seconds for r in results):.3f}")
    for r in results:
        case = ET.SubElement(suite, "testcase", classname="schedsearch.regress", name=r.name, time=f"{r.seconds:.3f}")
        if not r.passed:
            ET.SubElement(case, "failure", message=r.reason).text = r.reason
        out = [f"speedup {fmt_num(r.speedup, 'x')} (recorded {fmt_num(r.recorded_speedup, 'x')})", *r.notes]
        ET.SubElement(case, "system-out").text = "\n".join(out)
    tree = ET.ElementTree(suite)
    ET.indent(tree)
    tree.write(path, encoding="utf-8", xml_declaration=True)


def regress_command(paths: tuple[str, ...], tolerance: float, junit: str | None, cc: str | None,
                    cflags: str | None, as_json: bool) -> int:
    """Run every schedule file; return the exit code (0 all pass, 1 any failed)."""
    from schedsearch.evaluate import check_toolchain, machine_info

    files = collect(paths)
    bench = bench_config(cc, cflags, 0)
    check_toolchain(bench)
    machine = machine_info(bench)
    results = [check_one(f, tolerance, bench, machine) for f in files]
    if junit:
        junit_xml(results, junit)
    _table(results)
    if as_json:
        print_json({"passed": all(r.passed for r in results), "tolerance": tolerance,
                    "results": [r.to_json() for r in results]})
    return EXIT_PASS if all(r.passed for r in results) else EXIT_FAIL


def _table(results: list[CaseResult]) -> None:
    table = Table(title="schedsearch regress", title_justify="left")
    for col in ("schedule", "result", "speedup", "recorded", "notes"):
        table.add_column(col)
    for r in results:
        verdict = Text("pass", style="green") if r.passed else Text("FAIL", style="bold red")
        notes = "; ".join(([r.reason] if r.reason else []) + list(r.notes))
        table.add_row(r.name, verdict, fmt_num(r.speedup, "x"), fmt_num(r.recorded_speedup, "x"), notes)
    stderr_console().print(table)
