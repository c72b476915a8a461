"""Run a child process in its own process group with a hard time limit."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ChildResult:
    """What a finished (or killed) child left behind."""

    returncode: int | None  # None when it was killed for running too long
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False

    @property
    def signal_name(self) -> str | None:
        """Name of the signal that ended the child (``SIGSEGV``), if one did."""
        if self.returncode is None or self.returncode >= 0:
            return None
        try:
            return signal.Signals(-self.returncode).name
        except ValueError:
            return f"signal {-self.returncode}"


#: Process groups of the children ``run_child`` is waiting for (a worker's SIGTERM handler
#: kills them before the worker exits).
_LIVE: set[int] = set()


def kill_children() -> None:
    """SIGKILL the process group of every child ``run_child`` is waiting for, at once."""
    for pid in list(_LIVE):
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def run_child(
    argv: Sequence[str],
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> ChildResult:
    """Run ``argv`` to completion or kill its whole process group after ``timeout`` seconds.

    The child gets a new session so that the kill also reaches anything it spawned (the
    compiler's cc1/as/ld, OpenMP threads live in the process itself). Raises OSError if the
    program cannot be started at all.
    """
    start = time.perf_counter()
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        start_new_session=True,
        env=dict(env) if env is not None else None,
        cwd=cwd,
    )
    _LIVE.add(proc.pid)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        return ChildResult(None, out or "", err or "", time.perf_counter() - start, timed_out=True)
    except BaseException:
        # KeyboardInterrupt or a cancelled worker: never leave a runaway kernel behind.
        _kill_group(proc)
        proc.wait()
        raise
    finally:
        _LIVE.discard(proc.pid)
    _kill_group(proc)  # stragglers the child left in its group
    return ChildResult(proc.returncode, out or "", err or "", time.perf_counter() - start)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
