"""Leases as both stores decide them: may a driver take a search, and what to tell the user.

Kept free of SQLAlchemy so that the in-memory twin and the SQL store judge a lease the
same way; the SQL store adds only the atomic conditional UPDATE around ``judge``.

A lease read from a database is data, never trusted: its fields are checked, a heartbeat
dated in the future counts as now, and a timeout is capped at ``MAX_TIMEOUT_SECONDS``, so
that no row, however it was written, can hold a search for longer than a day.
"""

from __future__ import annotations

import math
import os
import socket
import time

from schedsearch.core import Lease, LeaseOwner, LeaseState
from schedsearch.errors import LeaseLostError, SearchBusyError

#: The longest timeout a stored lease is taken to have (seconds).
MAX_TIMEOUT_SECONDS = 86_400.0
#: Linux's largest pid is 2**22; anything outside (1, 2**31) cannot name a process to ask about.
_MAX_PID = 2**31 - 1


def check_timeout(timeout: float) -> float:
    """A lease timeout a store accepts: a finite number of seconds in (0, one day]."""
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= MAX_TIMEOUT_SECONDS:
        raise ValueError(
            f"a lease timeout must be a number of seconds in (0, {MAX_TIMEOUT_SECONDS:.0f}], got {timeout!r}"
        )
    return float(timeout)


def stored_lease(
    search_id: int,
    token: object,
    host: object,
    pid: object,
    acquired_at: object,
    heartbeat_at: object,
    timeout: object,
    now: float,
) -> Lease | None:
    """The lease of a stored row, or None when the row holds none (no token).

    Whatever else the row holds, a lease comes back: a field that makes no sense makes it
    a lease that lapsed long ago (a damaged row must not keep a search from being resumed).
    """
    if token is None:
        return None
    text_host = host if isinstance(host, str) else "?"
    number_pid = pid if isinstance(pid, int) and not isinstance(pid, bool) else 0
    times = [
        t if isinstance(t, int | float) and not isinstance(t, bool) and math.isfinite(t) else None
        for t in (acquired_at, heartbeat_at, timeout)
    ]
    acquired, beat, span = times
    if acquired is None or beat is None or span is None or span <= 0:
        return Lease(search_id, LeaseOwner(text_host, number_pid, str(token)), 0.0, 0.0, 0.0)
    return Lease(
        search_id,
        LeaseOwner(text_host, number_pid, str(token)),
        min(acquired, now),
        min(beat, now),
        min(span, MAX_TIMEOUT_SECONDS),
    )


def holder_alive(owner: LeaseOwner) -> bool | None:
    """Whether the holder's process still exists: None when this host cannot tell (another
    host, a pid that names no single process)."""
    if owner.host != socket.gethostname() or not 1 < owner.pid <= _MAX_PID:
        return None
    try:
        os.kill(owner.pid, 0)  # signal 0: nothing is sent, the kernel only says whether it exists
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    except OSError:
        return None
    return True


def judge(current: Lease | None, owner: LeaseOwner, now: float) -> LeaseState:
    """How ``owner`` finds the search's lease ``current`` at ``now``.

    A lease whose holder was a process on this host that no longer exists is ``GONE`` at
    once (a killed ``run`` can be resumed right away); one from another host lapses only
    after its timeout. A pid taken since by another process reads as alive: the lease
    then waits out its timeout, which errs on the safe side.
    """
    if current is None:
        return LeaseState.FREE
    if current.owner.token == owner.token:
        return LeaseState.MINE
    if now > current.expires_at:
        return LeaseState.STALE
    if holder_alive(current.owner) is False:
        return LeaseState.GONE
    return LeaseState.LIVE


def clock_text(unix: float) -> str:
    """A unix time as local ``YYYY-MM-DD HH:MM:SS``."""
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(unix))
    except (OverflowError, OSError, ValueError):
        return "an unknown time"


def busy(where: str, lease: Lease, now: float) -> SearchBusyError:
    """The refusal of a search another live driver runs."""
    ago = max(0.0, now - lease.heartbeat_at)
    return SearchBusyError(
        f"search {lease.search_id} in {where} is being run by {lease.owner.label} since "
        f"{clock_text(lease.acquired_at)} (last heartbeat {ago:.0f} s ago); wait for it or stop it"
    )


def lost(where: str, search_id: int, current: Lease | None) -> LeaseLostError:
    """What a driver whose lease was taken from it says as it stops."""
    if current is None:
        how = "its lease was freed by another process"
    else:
        how = (
            f"it was taken over by {current.owner.label} at {clock_text(current.acquired_at)}, which found "
            "this run's driver stopped (no heartbeat within the lease's timeout)"
        )
    return LeaseLostError(
        f"search {search_id} in {where} is no longer this run's: {how}; this run stops and writes nothing "
        "more to it (everything it recorded before is kept)"
    )
