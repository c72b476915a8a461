"""Leases: which driver runs a search, until when, and how a driver that wants the search
found it. Standard library only."""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass

# Imported at run time, not under TYPE_CHECKING: the codec resolves the records'
# annotations by name in this module (``codec.decode``).
from schedsearch.core.codec import JsonRecord
from schedsearch.core.enums import LeaseState

#: How long a search's lease lives without a heartbeat before another driver may take the
#: search over. Its holder renews it every ``LEASE_BEAT_SHARE`` of that (10 s): beats may be
#: missed - one waiting out SQLite's whole busy timeout (30 s), a loaded machine - before it
#: lapses. A holder on the same host whose process has ended is taken over at once.
LEASE_TIMEOUT_SECONDS = 60.0
LEASE_BEAT_SHARE = 1 / 6


@dataclass(frozen=True, slots=True)
class LeaseOwner(JsonRecord):
    """One driver of a search: a process on a host, and a random token that tells apart two
    drivers in one process (and a new process that got a dead one's pid)."""

    host: str
    pid: int
    token: str

    @staticmethod
    def here() -> LeaseOwner:
        """A new owner for a driver in this process."""
        return LeaseOwner(socket.gethostname(), os.getpid(), secrets.token_hex(8))

    @property
    def label(self) -> str:
        """``pid 4242 on host ws-1``, on one line whatever a database row said the host was."""
        host = "".join(ch if ch.isprintable() else "?" for ch in self.host)[:64] or "?"
        return f"pid {self.pid} on host {host}"


@dataclass(frozen=True, slots=True)
class Lease(JsonRecord):
    """Who runs a search: the search is theirs while ``heartbeat_at + timeout`` (unix
    seconds, the holder's clock) lies ahead."""

    search_id: int
    owner: LeaseOwner
    acquired_at: float
    heartbeat_at: float
    timeout: float

    @property
    def expires_at(self) -> float:
        """When the lease lapses unless renewed (unix seconds)."""
        return self.heartbeat_at + self.timeout


@dataclass(frozen=True, slots=True)
class LeaseGrant(JsonRecord):
    """A lease taken: the new ``lease``, how the search's lease was found (``FREE``,
    ``MINE``, ``STALE`` or ``GONE``) and, for the last two, the ``previous`` one taken over."""

    lease: Lease
    found: LeaseState = LeaseState.FREE
    previous: Lease | None = None
