"""Sweep up a private Ray cluster whose driver is gone.

Ray's own agents outlive a driver killed with SIGKILL for a minute or more (raylet and
gcs_server go at once, the dashboard and runtime-env agents linger while they retry the dead
GCS). ``ray_cluster`` starts this program beside a private cluster, by path and with ``python
-I`` (no site packages, no ``PYTHONPATH``)::

    python -I .../schedsearch/evaluate/watchdog.py DRIVER_PID MARKER

so it is standard library only, and imports nothing of schedsearch. Every half second it
learns the driver's Ray processes: children of ``DRIVER_PID`` whose command line contains
``MARKER`` (the ray package's directory), and all their descendants. When its stdin reaches
EOF - the driver closed it or died - it terminates, then kills, every one of them still
running, matched by pid and start time so a recycled pid is never hit. It ignores SIGINT (a
Ctrl-C reaches the driver's whole terminal) and reads ``/proc``: Linux only.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

#: A process as /proc shows it: parent pid, start time (clock ticks after boot), command line.
Proc = tuple[int, int, bytes]


def table() -> dict[int, Proc]:
    """Every process readable in /proc, by pid."""
    procs = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
            rest = stat[stat.rindex(b")") + 2 :].split()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read()
            procs[int(name)] = (int(rest[1]), int(rest[19]), cmd)
        except (OSError, ValueError, IndexError):
            continue
    return procs


def snapshot(driver: int, marker: bytes, tracked: dict[int, int]) -> None:
    """Add the driver's marked children and their descendants to ``tracked`` (pid -> start)."""
    procs = table()
    kids: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in procs.items():
        kids.setdefault(ppid, []).append(pid)
    todo = [p for p in kids.get(driver, []) if marker in procs[p][2] and p != os.getpid()]
    while todo:
        p = todo.pop()
        tracked[p] = procs[p][1]
        todo.extend(kids.get(p, []))


def alive(tracked: dict[int, int]) -> list[int]:
    """The tracked processes still running: the same pid with the same start time."""
    procs = table()
    return [p for p, start in tracked.items() if p in procs and procs[p][1] == start]


def sweep(tracked: dict[int, int]) -> None:
    """SIGTERM every tracked process still alive, wait up to a second, then SIGKILL the rest."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in alive(tracked):
            try:
                os.kill(p, sig)
            except OSError:
                pass
        deadline = time.monotonic() + 1.0
        while alive(tracked) and time.monotonic() < deadline:
            time.sleep(0.1)


def main(argv: list[str]) -> None:
    """``argv``: the driver's pid and the marker. Returns once the processes are swept."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    driver, marker = int(argv[0]), argv[1].encode()
    tracked: dict[int, int] = {}
    while True:
        ready, _, _ = select.select([0], [], [], 0.5)
        if ready and not os.read(0, 4096):
            break
        snapshot(driver, marker, tracked)
    sweep(tracked)


if __name__ == "__main__":
    main(sys.argv[1:])
