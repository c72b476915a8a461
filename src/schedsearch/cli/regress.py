"""``schedsearch regress``: replay committed schedule files and fail on regressions.

For each schedule file: reload the workload, replay every step (a step that no longer
applies fails, naming it), verify the output against the unscheduled proc, report C
fingerprint drift, and time the schedule side by side with the unscheduled proc in one
process; fail when the speedup fell below the recorded one less the tolerance, or when the
schedule is slower than the unscheduled proc beyond the measured spread.

A schedule file is data: its workload is imported only from inside the schedule file's
folder tree (or a file or folder named with ``--workloads``) and only when its text matches
the recorded sha256; otherwise the case fails and nothing of it runs.

A timing recorded on another machine or toolchain is weak evidence here: falling below it
is a warning unless ``--strict-machine``. A schedule whose instruction set this CPU lacks
is skipped with the reason (a JUnit ``skipped``), never run and never passed. A malformed
file is one failed case; the others still run.
"""

from __future__ import annotations

import dataclasses
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from rich.table import Table
from rich.text import Text

from schedsearch.cli.render import fmt_num
from schedsearch.cli.wiring import bench_config, fail, print_json, stderr_console
from schedsearch.core import BenchConfig, Candidate, MachineInfo, Status, Timing
from schedsearch.errors import ReplayError, ScheduleFileError, UntrustedSourceError, WorkloadError
from schedsearch.numbers import NumberKind
from schedsearch.schedule_file import read_schedule_file, write_schedule_file
from schedsearch.targets import TARGETS, target

EXIT_PASS, EXIT_FAIL = 0, 1


@dataclass(frozen=True, slots=True)
class Remeasured:
    """What this run measured for a schedule: what ``--update`` writes back."""

    seconds: float
    speedup: float
    fingerprint: str
    machine: MachineInfo


@dataclass(frozen=True, slots=True)
class CaseResult:
    """The verdict on one schedule file."""

    path: str
    name: str
    passed: bool
    reason: str = ""
    skipped: bool = False  # not run here (the CPU lacks the schedule's target); never a pass
    warning: str = ""  # passed, but something a person should look at
    recorded_speedup: float | None = None
    speedup: float | None = None
    fingerprint_drift: bool = False
    machine_differs: bool = False
    source_changed: bool = False
    seconds: float = 0.0
    notes: tuple[str, ...] = field(default=())
    measured: Remeasured | None = None  # this run's numbers, for --update
    recorded_on: str = ""  # the CPU the schedule was recorded on

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path, "name": self.name, "passed": self.passed, "skipped": self.skipped,
            "reason": self.reason, "warning": self.warning,
            "recorded_speedup": self.recorded_speedup, "speedup": self.speedup,
            "fingerprint_drift": self.fingerprint_drift, "machine_differs": self.machine_differs,
            "source_changed": self.source_changed, "recorded_on": self.recorded_on,
            "seconds": round(self.seconds, 3), "notes": list(self.notes),
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


def check_one(path: Path, tolerance: float, bench: BenchConfig, machine: MachineInfo,
              cpu_flags: tuple[str, ...], strict_machine: bool = False,
              allowed: tuple[str, ...] = ()) -> CaseResult:
    """Replay, verify and time one schedule file (on a CPU with ``cpu_flags``); every outcome,
    a malformed file included, becomes a CaseResult.

    The workload runs only from inside the schedule file's folder tree or from ``allowed``
    files and folders (``--workloads``), and only when it matches the recorded sha256.
    """
    from schedsearch.evaluate import check_memory, default_cache_dir, evaluate_candidate, remeasure
    from schedsearch.transforms import build_proc, fingerprint, kernel_c, load_workload, proc_text, root_candidate

    started = time.monotonic()
    try:
        sf = read_schedule_file(path)
    except ScheduleFileError as e:
        return CaseResult(str(path), path.name, False, str(e), seconds=time.monotonic() - started)
    sizes = ",".join(f"{k}={v}" for k, v in sf.sizes)
    name = f"{sf.proc}[{sizes}] {path.name}" if sizes else f"{sf.proc} {path.name}"
    notes: list[str] = []

    def result(passed: bool, reason: str = "", **kw: object) -> CaseResult:
        return CaseResult(str(path), name, passed, reason, recorded_speedup=sf.speedup,
                          seconds=time.monotonic() - started, notes=tuple(notes),
                          recorded_on=sf.machine.cpu_model, **kw)  # type: ignore[arg-type]

    try:
        needed = target(sf.needs_target)
    except WorkloadError:
        return result(False, f"names an unknown target {sf.needs_target!r}; this schedsearch knows "
                      + ", ".join(t.name.value for t in TARGETS))
    if not needed.supported_by(cpu_flags):
        return result(False, f"skipped: this CPU lacks the {needed.name} instructions the schedule uses "
                      f"(needs CPU flags {' '.join(needed.cpu_flags)})", skipped=True)
    machine_differs = bool(sf.machine.cpu_model) and sf.machine.fingerprint != machine.fingerprint
    # Data never chooses code: the workload must be where the schedule file may point, and
    # be the very text that was recorded, before anything of it is imported.
    if not sf.source_sha256:
        return result(False, "it records no source_sha256 for its workload, so the workload is not run; "
                      "export it again with `schedsearch export ... --format json`", machine_differs=machine_differs)
    try:
        workload_file = sf.workload_path(path, allowed)
    except UntrustedSourceError as e:
        return result(False, str(e), machine_differs=machine_differs)
    try:
        workload = load_workload(workload_file, sf.proc, dict(sf.sizes), expected_sha256=sf.source_sha256)
        check_memory(workload)  # before replay or the driver allocate anything
    except UntrustedSourceError as e:
        notes.append("the workload file changed since the schedule was recorded")
        return result(False, str(e), machine_differs=machine_differs, source_changed=True)
    except WorkloadError as e:
        return result(False, f"workload does not load: {e}", machine_differs=machine_differs)
    flags = {"machine_differs": machine_differs, "source_changed": False}
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
    passed, why, warning = verdict(speedup, base.timing, mine.timing, sf.speedup, tolerance,
                                   machine_differs and not strict_machine)
    measured = Remeasured(mine.seconds, speedup, cand.fingerprint, machine)
    return result(passed, why, speedup=speedup, warning=warning, measured=measured, **flags)


def verdict(speedup: float, base: Timing | None, mine: Timing | None, recorded: float | None, tolerance: float,
            lenient: bool) -> tuple[bool, str, str]:
    """(passed, reason, warning) for a schedule timed side by side with the unscheduled proc.

    Slower than the unscheduled proc beyond the noise fails wherever the schedule was
    recorded: that is measured here, against code built here. Falling below the recorded
    speedup less ``tolerance`` fails, or only warns when ``lenient`` (recorded on another
    machine and no ``--strict-machine``): a schedule tuned on another CPU may simply not
    suit this one.
    """
    if base is not None and mine is not None and mine.q1 > base.q3:
        # The schedule's fastest quarter is slower than the unscheduled proc's slowest
        # quarter: slower beyond the noise, not a near tie.
        return False, f"slower than the unscheduled proc: speedup {speedup:.3g}x", ""
    floor = recorded * (1 - tolerance) if recorded is not None else None
    if floor is None or speedup >= floor:
        return True, "", ""
    why = f"slower: speedup {speedup:.3g}x is below {floor:.3g}x (recorded {recorded:.3g}x less the {tolerance:.0%} tolerance)"
    if lenient:
        return True, "", f"{why}; recorded on another machine, so not a failure (--strict-machine makes it one)"
    return False, why, ""


def update_file(path: Path, measured: Remeasured) -> None:
    """Re-record a schedule file's speedup, time, C fingerprint and machine from this run."""
    sf = read_schedule_file(path)
    # regress times the schedule side by side with the unscheduled proc, as a search's finalists
    origin = {**sf.origin, "updated_at": datetime.now(UTC).isoformat(timespec="seconds"),
              "numbers": NumberKind.REMEASURED.value}
    write_schedule_file(path, dataclasses.replace(
        sf, speedup=measured.speedup, seconds=measured.seconds, fingerprint=measured.fingerprint,
        machine=measured.machine, origin=origin))


def junit_xml(results: list[CaseResult], path: str) -> None:
    """A JUnit XML report (one testcase per schedule file) for CI systems."""
    suite = ET.Element("testsuite", name="schedsearch.regress", tests=str(len(results)),
                       failures=str(sum(not r.passed and not r.skipped for r in results)),
                       skipped=str(sum(r.skipped for r in results)),
                       time=f"{sum(r.seconds for r in results):.3f}")
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


def regress_command(paths: tuple[str, ...], tolerance: float, junit: str | None, cc: str | None,
                    cflags: str | None, as_json: bool, strict_machine: bool = False, update: bool = False,
                    workloads: tuple[str, ...] = ()) -> int:
    """Run every schedule file; return the exit code (0: none failed, skips included; 1: any failed).

    With ``update``, every schedule that replayed, verified and is not slower than the
    unscheduled proc is re-recorded with this run's speedup, time and machine (its file is
    rewritten) and passes."""
    from schedsearch.evaluate import check_toolchain, cpu_flags, default_cache_dir, machine_info, private_cache_dir

    files = collect(paths)
    bench = bench_config(cc, cflags, 0)
    check_toolchain(bench)
    private_cache_dir(default_cache_dir())
    machine = machine_info(bench)
    flags = cpu_flags()
    console = stderr_console()
    console.print(f"regress: {len(files)} schedule file(s) on {machine.cpu_model or 'an unknown CPU'}, "
                  f"{machine.compiler_version}", highlight=False)
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
    _table(results)
    foreign = sum(r.machine_differs for r in results)
    if foreign:
        console.print(f"{foreign} of {len(results)} schedule(s) were recorded on another machine or toolchain "
                      f"than this one ({machine.cpu_model or 'unknown CPU'}, {' '.join(bench.cflags)}): "
                      + ("their timings are checked strictly" if strict_machine else
                         "falling short of their recorded timings is a warning, not a failure"), highlight=False, soft_wrap=True)
    failed = [r for r in results if not r.passed and not r.skipped]
    if as_json:
        print_json({"passed": not failed, "tolerance": tolerance, "strict_machine": strict_machine,
                    "results": [r.to_json() for r in results]})
    return EXIT_FAIL if failed else EXIT_PASS


def _updated(r: CaseResult) -> CaseResult:
    """The case after --update: re-recorded (and passing) when it measured well enough."""
    slower_than_unscheduled = r.reason.startswith("slower than the unscheduled")
    if r.measured is None or slower_than_unscheduled:
        return r
    update_file(Path(r.path), r.measured)
    return dataclasses.replace(r, passed=True, reason="", warning="", recorded_speedup=r.measured.speedup,
                               notes=r.notes + (f"re-recorded (was {fmt_num(r.recorded_speedup, 'x')})",))


def _table(results: list[CaseResult]) -> None:
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
    stderr_console().print(table)
