"""Quiet timing: a node's builds and expansions pause while one of its kernels is timed.

Why: on a 2-vCPU KVM guest (AMD EPYC, Zen 4) a pure-Python loop on the other vCPU made a
one-thread SGEMM 1.47x slower (median of 30 calls) while a memory-streaming loop did not
slow it at all: the two vCPUs share one physical core's execution units, although the
guest's topology reports one thread per core. A compiler or Exo on the other vCPU made
the same kernel measure anywhere from 2.6 to 6.8 ms in one search, so the search's own
numbers could not tell the near-best candidates apart. Nothing in the topology says when
this happens, so by default timing is quiet everywhere (``BenchConfig.quiet``).

How: a process about to do heavy work (a build task, an expansion) registers itself for
the duration (``working``): an empty file named by its pid and start time in the node's
lock directory. The benchmark runner, holding the node's benchmark lock, suspends every
registered process and its children (the compiler) with SIGSTOP for the length of one
timing (``quiet``) and resumes them after. What it paused is written down first, so if
the runner dies in between, the next ``quiet`` on that node (or ``resume_orphans``)
resumes them; SIGKILL - how busy workers are cancelled - ends a stopped process as well.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import psutil

# A process registered twice (nested ``working``) leaves the registry only when both end.
_depth = 0
_depth_lock = threading.Lock()
#: Processes this process has paused and not yet resumed (for a signal handler's last act).
_paused_here: list[psutil.Process] = []
# Start times are compared to this precision: a reused pid has a different start time.
_START_DIGITS = 2


def registry(cache_dir: Path) -> Path:
    """This node's directory of busy processes (the host name keeps nodes that share a
    cache directory over NFS apart)."""
    path = Path(cache_dir) / "locks" / f"busy-{socket.gethostname()}"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _name(proc: psutil.Process) -> str:
    return f"{proc.pid}-{round(proc.create_time(), _START_DIGITS)}"


def _process(name: str) -> psutil.Process | None:
    """The live process an entry names, or None (gone, or its pid reused since)."""
    pid, _, started = name.partition("-")
    try:
        proc = psutil.Process(int(pid))
        return proc if str(round(proc.create_time(), _START_DIGITS)) == started else None
    except (ValueError, psutil.Error):
        return None


@contextlib.contextmanager
def working(cache_dir: Path) -> Iterator[None]:
    """Register this process as doing heavy work on its node until the block ends.

    Best effort: a registry that cannot be written only means this work is not paused.
    """
    global _depth
    entry: Path | None = None
    with _depth_lock:
        _depth += 1
        first = _depth == 1
    try:
        if first:
            with contextlib.suppress(OSError, psutil.Error):
                entry = registry(cache_dir) / _name(psutil.Process())
                entry.touch()
        yield
    finally:
        with _depth_lock:
            _depth -= 1
        if entry is not None:
            with contextlib.suppress(OSError):
                entry.unlink()


def _suspend_tree(proc: psutil.Process, paused: list[psutil.Process], ledger: Path) -> None:
    """SIGSTOP ``proc``, then its descendants (again while new ones appear: a compiler
    driver may start its next stage between the listing and its own stop)."""
    seen = {p.pid for p in paused}
    todo = [proc]
    for _ in range(3):
        for p in todo:
            if p.pid in seen:
                continue
            with contextlib.suppress(psutil.Error):
                # Written down before it is stopped: whoever finds the ledger resumes it.
                with ledger.open("a") as f:
                    f.write(_name(p) + "\n")
                p.suspend()
                paused.append(p)
                _paused_here.append(p)
                seen.add(p.pid)
        try:
            todo = [c for c in proc.children(recursive=True) if c.pid not in seen]
        except psutil.Error:
            return
        if not todo:
            return


def _resume(procs: list[psutil.Process]) -> None:
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.resume()
        with contextlib.suppress(ValueError):
            _paused_here.remove(p)


def resume_orphans(cache_dir: Path) -> int:
    """Resume what a dead runner paused on this node (its ledger names them); returns how
    many processes were resumed. Cheap when there is nothing to do."""
    resumed = 0
    with contextlib.suppress(OSError):
        for ledger in registry(cache_dir).glob("paused-by-*"):
            owner = _process(ledger.name.removeprefix("paused-by-"))
            if owner is not None and owner.pid != os.getpid():
                continue  # its runner is alive and will resume them itself
            with contextlib.suppress(OSError):
                for line in ledger.read_text().split():
                    proc = _process(line)
                    if proc is not None:
                        with contextlib.suppress(psutil.Error):
                            proc.resume()
                            resumed += 1
                ledger.unlink()
    return resumed


def resume_paused_here() -> None:
    """Resume whatever this process paused (for a signal handler about to exit)."""
    _resume(list(_paused_here))


@contextlib.contextmanager
def quiet(cache_dir: Path, enabled: bool = True) -> Iterator[int]:
    """Pause this node's registered busy processes (not this one) until the block ends;
    yields how many processes were paused. Call it holding the node's benchmark lock, so
    that only one process pauses the others at a time."""
    if not enabled:
        yield 0
        return
    resume_orphans(cache_dir)
    paused: list[psutil.Process] = []
    ledger: Path | None = None
    try:
        reg = registry(cache_dir)
        me = psutil.Process()
        ledger = reg / f"paused-by-{_name(me)}"
        ancestors = {p.pid for p in me.parents()}
        for entry in list(reg.iterdir()):
            if entry.name.startswith("paused-by-"):
                continue
            proc = _process(entry.name)
            if proc is None:
                with contextlib.suppress(OSError):
                    entry.unlink()  # a worker killed mid-work left it
                continue
            if proc.pid == me.pid or proc.pid in ancestors:
                continue
            _suspend_tree(proc, paused, ledger)
    except (OSError, psutil.Error):
        pass  # best effort: timing still happens, only less quietly
    try:
        yield len(paused)
    finally:
        _resume(paused)
        if ledger is not None:
            with contextlib.suppress(OSError):
                ledger.unlink()
