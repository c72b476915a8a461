"""Regress one schedule file: replay, verify and time it against the unscheduled proc.

For a schedule file: reload the workload, replay every step (a step that no longer
applies fails, naming it), verify the output against the unscheduled proc, report C
fingerprint drift, and time the schedule side by side with the unscheduled proc in one
process; fail when the speedup fell below the recorded one less the tolerance, or when the
schedule is slower than the unscheduled proc beyond the measured spread.

A schedule file is data: its workload is imported only from inside the schedule file's
folder tree (or a file or folder named with ``--workloads``) and only when its text matches
the recorded sha256; otherwise the case fails and nothing of it runs.

A timing recorded on another machine or toolchain is weak evidence here: falling below it
is a warning unless ``--strict-machine``. A schedule whose instruction set this CPU lacks
is skipped with the reason, never run and never passed. A malformed file is one failed
case; the others still run. ``schedsearch regress`` (the CLI) runs many and reports them.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from schedsearch.app.compose import bench_config
from schedsearch.core import BenchConfig, Candidate, MachineInfo, Status, Timing
from schedsearch.errors import ReplayError, ScheduleFileError, UntrustedSourceError, WorkloadError
from schedsearch.numbers import NumberKind
from schedsearch.schedule_file import read_schedule_file, write_schedule_file
from schedsearch.targets import TARGETS, switch_float_mode, target


@dataclass(frozen=True, slots=True)
class RegressSetup:
    """What every case of a regress run shares: how to build, this machine, its CPU flags."""

    bench: BenchConfig
    machine: MachineInfo
    cpu_flags: tuple[str, ...]


def regress_setup(cc: str | None, cflags: str | None) -> RegressSetup:
    """Check the compiler and the build cache, then describe this machine (the flags of the
    widest instruction set this CPU has follow the user's, as ``run --target auto`` does)."""
    from schedsearch.evaluate import check_toolchain, cpu_flags, default_cache_dir, machine_info, private_cache_dir

    bench = bench_config(cc, cflags, 0)
    check_toolchain(bench)
    private_cache_dir(default_cache_dir())
    return RegressSetup(bench, machine_info(bench), cpu_flags())


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
            "path": self.path,
            "name": self.name,
            "passed": self.passed,
            "skipped": self.skipped,
            "reason": self.reason,
            "warning": self.warning,
            "recorded_speedup": self.recorded_speedup,
            "speedup": self.speedup,
            "fingerprint_drift": self.fingerprint_drift,
            "machine_differs": self.machine_differs,
            "source_changed": self.source_changed,
            "recorded_on": self.recorded_on,
            "seconds": round(self.seconds, 3),
            "notes": list(self.notes),
        }


def check_one(
    path: Path,
    tolerance: float,
    bench: BenchConfig,
    machine: MachineInfo,
    cpu_flags: tuple[str, ...],
    strict_machine: bool = False,
    allowed: tuple[str, ...] = (),
) -> CaseResult:
    """Replay, verify and time one schedule file (on a CPU with ``cpu_flags``); every outcome,
    a malformed file included, becomes a CaseResult.

    The workload runs only from inside the schedule file's folder tree or from ``allowed``
    files and folders (``--workloads``), and only when it matches the recorded sha256.
    """
    from schedsearch.evaluate import check_memory, default_cache_dir, evaluate_candidate, machine_info, remeasure
    from schedsearch.transforms import build_proc, fingerprint, kernel_c, load_workload, proc_text, root_candidate

    started = time.monotonic()
    try:
        sf = read_schedule_file(path)
    except ScheduleFileError as e:
        return CaseResult(str(path), path.name, False, str(e), seconds=time.monotonic() - started)
    sizes = ",".join(f"{k}={v}" for k, v in sf.sizes)
    name = f"{sf.proc}[{sizes}] {path.name}" if sizes else f"{sf.proc} {path.name}"
    notes: list[str] = []

    def result(passed: bool, reason: str = "", **kw: Any) -> CaseResult:
        return CaseResult(
            str(path),
            name,
            passed,
            reason,
            recorded_speedup=sf.speedup,
            seconds=time.monotonic() - started,
            notes=tuple(notes),
            recorded_on=sf.machine.cpu_model,
            **kw,
        )

    try:
        needed = target(sf.needs_target)
    except WorkloadError:
        return result(
            False,
            f"names an unknown target {sf.needs_target!r}; this schedsearch knows "
            + ", ".join(t.name.value for t in TARGETS),
        )
    if not needed.supported_by(cpu_flags):
        return result(
            False,
            f"skipped: this CPU lacks the {needed.name} instructions the schedule uses "
            f"(needs CPU flags {' '.join(needed.cpu_flags)})",
            skipped=True,
        )
    machine_differs = bool(sf.machine.cpu_model) and sf.machine.fingerprint != machine.fingerprint
    # Data never chooses code: the workload must be where the schedule file may point, and
    # be the very text that was recorded, before anything of it is imported.
    if not sf.source_sha256:
        return result(
            False,
            "it records no source_sha256 for its workload, so the workload is not run; "
            "export it again with `schedsearch export ... --format json`",
            machine_differs=machine_differs,
        )
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
    if sf.float_mode is not bench.float_mode:
        # Measured as recorded: a relaxed schedule's speed came from relaxed builds.
        bench = dataclasses.replace(
            bench, float_mode=sf.float_mode, cflags=switch_float_mode(bench.cflags, bench.float_mode, sf.float_mode)
        )
        machine = machine_info(bench)
        machine_differs = bool(sf.machine.cpu_model) and sf.machine.fingerprint != machine.fingerprint
    bench = dataclasses.replace(bench, threads=sf.threads)  # its parallel loops timed as recorded
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
    passed, why, warning = verdict(
        speedup,
        base.timing,
        mine.timing,
        sf.speedup,
        tolerance,
        machine_differs and not strict_machine,
        same_code=cand.fingerprint == root.fingerprint,
    )
    measured = Remeasured(mine.seconds, speedup, cand.fingerprint, machine)
    return result(passed, why, speedup=speedup, warning=warning, measured=measured, **flags)


def verdict(
    speedup: float,
    base: Timing | None,
    mine: Timing | None,
    recorded: float | None,
    tolerance: float,
    lenient: bool,
    same_code: bool = False,
) -> tuple[bool, str, str]:
    """(passed, reason, warning) for a schedule timed side by side with the unscheduled proc.

    Slower than the unscheduled proc beyond the noise fails wherever the schedule was
    recorded: that is measured here, against code built here. Falling below the recorded
    speedup less ``tolerance`` fails, or only warns when ``lenient`` (recorded on another
    machine and no ``--strict-machine``): a schedule tuned on another CPU may simply not
    suit this one. A schedule whose C is the unscheduled proc's (``same_code``: a search whose
    best was the root) cannot be slower than it: two timings of one kernel that happen not to
    overlap are noise.
    """
    if not same_code and base is not None and mine is not None and mine.q1 > base.q3:
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
    origin = {
        **sf.origin,
        "updated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "numbers": NumberKind.REMEASURED.value,
    }
    write_schedule_file(
        path,
        dataclasses.replace(
            sf,
            speedup=measured.speedup,
            seconds=measured.seconds,
            fingerprint=measured.fingerprint,
            machine=measured.machine,
            origin=origin,
        ),
    )
