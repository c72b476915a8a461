"""Run a child process in its own process group with a hard time limit."""

from __future__ import annotations

import contextlib
import gc
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass

#: The line a child prints (and then waits for one line on stdin) to pass a ``gate``.
READY = b"ready\n"
#: Niceness of background work (compilers, expansions): the lowest CPU priority, so that
#: on a busy node a kernel being verified or timed gets its CPU when it wants it.
BACKGROUND_NICENESS = 19


def run_in_background() -> None:
    """Lower this process to ``BACKGROUND_NICENESS`` (for processes that only expand)."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, 0, BACKGROUND_NICENESS)


#: The cycle collector's thresholds in a process that expands: a young collection every
#: 10,000 net allocations (Python's default is 700), and full collections rarer.
EXPANDER_GC_THRESHOLDS = (10_000, 10, 100)


def collect_cycles_less() -> tuple[int, int, int]:
    """Raise this process's cycle collector thresholds to ``EXPANDER_GC_THRESHOLDS`` (none
    is lowered) and return the ones it had. For the processes that host expanders, never
    a caller's own.

    Exo allocates millions of short-lived IR nodes, cursors and effect formulas, nearly
    all freed by reference counting as they go. With Python's default thresholds the
    collector still made 14 full passes over a few hundred megabytes of live procs in one
    root and two register-tiled expansions of SGEMM 256: 3.4 s of 20 s on a Zen 4 core.
    With these, 0.7 s, at the same peak memory."""
    before = gc.get_threshold()
    gc.set_threshold(*(max(old, new) for old, new in zip(before, EXPANDER_GC_THRESHOLDS, strict=True)))
    return before


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
    background: bool = False,
    gate: Callable[[], AbstractContextManager[object]] | None = None,
) -> ChildResult:
    """Run ``argv`` to completion or kill its whole process group after ``timeout`` seconds.

    The child gets a new process group so that the kill also reaches anything it spawned
    (the compiler's cc1/as/ld, OpenMP threads live in the process itself). Not a new
    session: Linux's autogroup scheduling gives each session an equal share of the CPU
    whatever its processes' niceness, so a kernel in its own session would compete with
    each compiler as an equal, and a niced compiler in its own would not yield to it.
    ``background``: it runs at the lowest CPU priority (a compiler must not take the CPU
    from a kernel being timed). ``gate``: the child may print ``ready`` once and wait for a
    line on stdin; the rest of its run then happens inside ``gate()`` (the benchmark runner
    pauses the node's builders there, for the timing only). A child that never says
    ``ready`` runs without the gate; the time limit covers both parts. Raises OSError if
    the program cannot be started at all.
    """
    start = time.perf_counter()
    deadline = start + timeout
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE if gate is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        process_group=0,
        env=dict(env) if env is not None else None,
        cwd=cwd,
    )
    _LIVE.add(proc.pid)
    if background:
        # Right after the start, before the compiler driver starts its stages (they inherit it).
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, proc.pid, BACKGROUND_NICENESS)
    out, err = bytearray(), bytearray()
    try:
        ready = gate is not None and _read_until_ready(proc, out, err, deadline)
        with gate() if ready and gate is not None else contextlib.nullcontext():
            if gate is not None:
                _go_on(proc)
            try:
                rest_out, rest_err = proc.communicate(timeout=max(0.0, deadline - time.perf_counter()))
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                rest_out, rest_err = proc.communicate()
                return ChildResult(
                    None,
                    _text(out + (rest_out or b"")),
                    _text(err + (rest_err or b"")),
                    time.perf_counter() - start,
                    timed_out=True,
                )
    except BaseException:
        # KeyboardInterrupt or a cancelled worker: never leave a runaway kernel behind.
        _kill_group(proc)
        proc.wait()
        raise
    finally:
        _LIVE.discard(proc.pid)
    _kill_group(proc)  # stragglers the child left in its group
    return ChildResult(proc.returncode, _text(out + rest_out), _text(err + rest_err), time.perf_counter() - start)


def _go_on(proc: subprocess.Popen[bytes]) -> None:
    """Send the line a gated child waits for, and close its stdin."""
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError):  # it did not wait for the line
        proc.stdin.write(b"\n")
        proc.stdin.flush()
    with contextlib.suppress(BrokenPipeError):
        proc.stdin.close()
    proc.stdin = None  # communicate() must not flush it again


def _read_until_ready(proc: subprocess.Popen[bytes], out: bytearray, err: bytearray, deadline: float) -> bool:
    """Collect the child's output until it prints ``READY`` (True), or closes its stdout or
    runs out of time (False: the caller's ``communicate`` finishes or kills it)."""
    assert proc.stdout is not None and proc.stderr is not None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ, out)
        sel.register(proc.stderr, selectors.EVENT_READ, err)
        while sel.get_map():
            left = deadline - time.perf_counter()
            if left <= 0:
                return False
            for key, _ in sel.select(left):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    if key.data is out:
                        return False
                    continue
                key.data.extend(chunk)
                if key.data is out and (out.startswith(READY) or b"\n" + READY in out):
                    return True
    return False


def _text(data: bytes | bytearray) -> str:
    return data.decode(errors="replace")


def _kill_group(proc: subprocess.Popen[str] | subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
