"""Schedule files: a best schedule kept under version control and replayed by ``regress``.

A schedule file is JSON::

    {
      "format": "schedsearch-schedule", "version": 1,
      "workload": {"file": "../examples/matmul.py", "proc": "sgemm",
                   "sizes": {"M": 64, "N": 64, "K": 64}, "source_sha256": "..."},
      "steps": [{"kind": "tile", "target": "i #0", "args": {"fa": 8, "fb": 32, ...}}, ...],
      "fingerprint": "...",        # sha256 of the generated C (kernel renamed)
      "speedup": 41.3,             # over the unscheduled proc (regress: side by side with it)
      "seconds": 1.2e-05,          # the schedule's median time when recorded
      "machine": {...},            # core.MachineInfo: CPU, compiler, flags, exo version
      "target": "avx512",          # the instruction set its steps emit (targets.py)
      "float_mode": "strict",      # or "relaxed": candidates may divide by reciprocals
      "threads": 1,                # OpenMP threads its parallel loops were timed with
      "origin": {"db": "...", "search_id": 3, "candidate_id": 57,
                 "numbers": "remeasured"}  # or "search_time": how speedup and seconds were measured
    }

The workload path is stored relative to the schedule file, so a repository can move. A
schedule file is data: its workload runs only when it lies inside the schedule file's folder
tree (or where the user allows, ``regress --workloads``) and matches ``source_sha256``
(see ``schedsearch.trust``); names and sizes are validated when the file is read.
Files written before targets existed have no ``target``: it is derived from their steps;
files without ``float_mode`` were strict, files without ``threads`` timed on one.
A file is data, never code: it is parsed, and every step's arguments are checked against
its kind's typed record (``transforms.rules``) before anything is replayed.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from schedsearch.core import INT64_MAX, FloatMode, MachineInfo, Rewrite, Schedule, is_identifier
from schedsearch.errors import ScheduleFileError
from schedsearch.targets import schedule_target
from schedsearch.trust import schedule_workload_path

FORMAT = "schedsearch-schedule"
VERSION = 1
#: The most threads a schedule file may ask for.
MAX_THREADS = 4096


@dataclass(frozen=True, slots=True)
class ScheduleFile:
    """A schedule with the workload it belongs to and what it achieved when recorded."""

    workload_file: str  # relative to the schedule file's folder (or absolute)
    proc: str
    sizes: tuple[tuple[str, int], ...]
    source_sha256: str
    schedule: Schedule
    fingerprint: str
    speedup: float | None
    seconds: float | None
    machine: MachineInfo
    origin: dict[str, Any] = field(default_factory=dict)
    target: str = ""  # the instruction set the steps emit; "" = derived from the steps
    float_mode: FloatMode = FloatMode.STRICT  # how candidates were compiled (files without it: strict)
    threads: int = 1  # the threads its parallel loops were timed with (files without it: 1)

    @property
    def needs_target(self) -> str:
        """The instruction set a machine must have to run this schedule."""
        return self.target or schedule_target(self.schedule)

    def workload_path(self, schedule_path: str | os.PathLike, allowed: tuple[str | os.PathLike, ...] = ()) -> Path:
        """Absolute path of the workload file, resolved against the schedule file.

        Raises UntrustedSourceError when it lies outside the schedule file's folder tree
        and is not one of (or inside one of) the ``allowed`` files and folders.
        """
        return schedule_workload_path(schedule_path, self.workload_file, allowed)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": VERSION,
            "workload": {
                "file": self.workload_file,
                "proc": self.proc,
                "sizes": dict(self.sizes),
                "source_sha256": self.source_sha256,
            },
            "steps": [_step_json(s) for s in self.schedule.steps],
            "readable": [_describe(s) for s in self.schedule.steps],
            "fingerprint": self.fingerprint,
            "speedup": self.speedup,
            "seconds": self.seconds,
            "machine": self.machine.to_json(),
            "target": self.needs_target,
            "float_mode": self.float_mode.value,
            "threads": self.threads,
            "origin": self.origin,
        }


def _step_json(step: Rewrite) -> dict[str, Any]:
    # Arguments as an object: schedule files are meant to be read and edited by people.
    return {"kind": step.kind.value, "target": step.target, "args": dict(step.args)}


def _describe(step: Rewrite) -> str:
    # The rules know which arguments only name new loops; they load Exo, so only when needed.
    from schedsearch.transforms import describe_step

    return describe_step(step)


def _check_steps(path: Path, schedule: Schedule) -> None:
    """ScheduleFileError naming the first step whose arguments its kind cannot take."""
    from schedsearch.transforms import ArgError, decode_step

    for index, step in enumerate(schedule.steps):
        try:
            decode_step(step)
        except ArgError as e:
            raise ScheduleFileError(f"{path}: step {index} `{step.kind.value} {step.target}`: {e}") from None


def _step_from_json(data: dict[str, Any]) -> Rewrite:
    args = data.get("args") or {}
    pairs = sorted(args.items()) if isinstance(args, dict) else [tuple(a) for a in args]
    return Rewrite.from_json({"kind": data["kind"], "target": data["target"], "args": pairs})


def relative_workload_path(workload_path: str | os.PathLike, schedule_path: str | os.PathLike) -> str:
    """The workload path as it should be written into a schedule file at ``schedule_path``."""
    target = Path(workload_path).resolve()
    base = Path(schedule_path).resolve().parent
    return os.path.relpath(target, base)


def write_schedule_file(path: str | os.PathLike, data: ScheduleFile) -> None:
    """Write a schedule file (pretty JSON, trailing newline)."""
    Path(path).write_text(json.dumps(data.to_json(), indent=2) + "\n")


def read_schedule_file(path: str | os.PathLike) -> ScheduleFile:
    """Read and validate a schedule file; ``ScheduleFileError`` with one sentence otherwise."""
    p = Path(path)
    try:
        raw = json.loads(p.read_text())
    except FileNotFoundError:
        raise ScheduleFileError(f"schedule file {p} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ScheduleFileError(f"cannot read schedule file {p}: {e}") from None
    except json.JSONDecodeError as e:
        raise ScheduleFileError(f"{p} is not valid JSON (line {e.lineno}): {e.msg}") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise ScheduleFileError(
            f"{p} is not a schedsearch schedule file (export one with `schedsearch export ... --format json`)"
        )
    if raw.get("version") != VERSION:
        raise ScheduleFileError(
            f"{p} has schedule-file version {raw.get('version')!r}; this schedsearch reads version {VERSION}"
        )
    modes = [m.value for m in FloatMode]
    if raw.get("float_mode", FloatMode.STRICT.value) not in modes:
        raise ScheduleFileError(
            f"{p} is malformed: its float_mode {raw.get('float_mode')!r} is not one of " + ", ".join(modes)
        )
    try:
        wl = raw["workload"]
        sf = ScheduleFile(
            workload_file=str(wl["file"]),
            proc=str(wl["proc"]),
            sizes=tuple((str(k), int(v)) for k, v in wl["sizes"].items()),
            source_sha256=str(wl.get("source_sha256", "")),
            schedule=Schedule(tuple(_step_from_json(s) for s in raw["steps"])),
            fingerprint=str(raw.get("fingerprint", "")),
            speedup=None if raw.get("speedup") is None else float(raw["speedup"]),
            seconds=None if raw.get("seconds") is None else float(raw["seconds"]),
            machine=MachineInfo.from_json(raw.get("machine") or {}),
            origin=dict(raw.get("origin") or {}),
            target=str(raw.get("target") or ""),
            float_mode=FloatMode(raw.get("float_mode") or FloatMode.STRICT),
            threads=int(raw.get("threads", 1)),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ScheduleFileError(f"{p} is malformed: {type(e).__name__}: {e}") from None
    problem = _problem(sf)
    if problem:
        raise ScheduleFileError(f"{p} is malformed: {problem}")
    _check_steps(p, sf.schedule)
    return sf


def _problem(sf: ScheduleFile) -> str | None:
    """What makes a parsed schedule file unusable before anything runs, or None."""
    # The proc and size names are pasted into exported scripts: names only.
    if not is_identifier(sf.proc):
        return f"its proc name {sf.proc!r} is not an identifier"
    for name, value in sf.sizes:
        if not is_identifier(name):
            return f"its size name {name!r} is not an identifier"
        if not 0 < value <= INT64_MAX:
            return f"its size {name}={value} is not a positive 64-bit integer"
    if not 1 <= sf.threads <= MAX_THREADS:
        return f"its threads {sf.threads} is not a number of threads in [1, {MAX_THREADS}]"
    return None
