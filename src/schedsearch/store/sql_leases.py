"""SqlStore's lease operations: each is one conditional UPDATE of the search's row.

Private to ``schedsearch.store``: ``LeaseMethods`` is the part of ``SqlStore`` that takes,
renews, frees and reads leases and fences writes. Every function runs inside one of SqlStore's write
transactions, which already serialise writers to the row (SQLite: ``BEGIN IMMEDIATE``;
PostgreSQL: the row read ``FOR UPDATE``). The UPDATEs are conditional all the same - on the
lease as it was read, or on the caller's token - and their row counts are checked: a lease
changes hands only from the exact state it was judged in, whatever the isolation level.
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager
from typing import Any, cast

from sqlalchemy import ColumnElement, CursorResult, update
from sqlalchemy.orm import Session

from schedsearch.core import LEASE_TIMEOUT_SECONDS, Lease, LeaseGrant, LeaseOwner, LeaseState
from schedsearch.errors import StoreError
from schedsearch.store import leases
from schedsearch.store.models import SearchRow

#: The lease columns of a free search.
FREE: dict[str, Any] = {
    "lease_token": None,
    "lease_host": None,
    "lease_pid": None,
    "lease_acquired_at": None,
    "lease_heartbeat_at": None,
    "lease_timeout": None,
}


def columns(owner: LeaseOwner, acquired_at: float, heartbeat_at: float, timeout: float) -> dict[str, Any]:
    """The lease columns of a search held by ``owner``."""
    return {
        "lease_token": owner.token,
        "lease_host": owner.host,
        "lease_pid": owner.pid,
        "lease_acquired_at": acquired_at,
        "lease_heartbeat_at": heartbeat_at,
        "lease_timeout": timeout,
    }


def read(row: SearchRow, now: float) -> Lease | None:
    """The row's lease (checked: see ``leases.stored_lease``), or None when it is free."""
    return leases.stored_lease(
        row.id,
        row.lease_token,
        row.lease_host,
        row.lease_pid,
        row.lease_acquired_at,
        row.lease_heartbeat_at,
        row.lease_timeout,
        now,
    )


def _as_read(row: SearchRow) -> list[ColumnElement[bool]]:
    """The row's lease is still the one read: same token, same last heartbeat."""
    same = [SearchRow.id == row.id]
    for column, value in (
        (SearchRow.lease_token, row.lease_token),
        (SearchRow.lease_heartbeat_at, row.lease_heartbeat_at),
    ):
        same.append(column.is_(None) if value is None else column == value)
    return same


def acquire(s: Session, row: SearchRow, owner: LeaseOwner, timeout: float, now: float, where: str) -> LeaseGrant:
    """Take the lease of ``row``'s search for ``owner`` (see ``Store.acquire_lease``)."""
    current = read(row, now)
    found = leases.judge(current, owner, now)
    if found is LeaseState.LIVE:
        assert current is not None
        raise leases.busy(where, current, now)
    acquired = current.acquired_at if found is LeaseState.MINE and current is not None else now
    taken = cast(
        "CursorResult[Any]",
        s.execute(
            update(SearchRow)
            .where(*_as_read(row))
            .values(columns(owner, acquired, now, timeout))
            .execution_options(synchronize_session=False)
        ),
    )
    if taken.rowcount != 1:  # unreachable under the transaction's lock; never hand a lease out twice
        raise StoreError(f"the lease of search {row.id} in {where} changed while it was being taken; try again")
    previous = current if found in (LeaseState.STALE, LeaseState.GONE) else None
    return LeaseGrant(Lease(row.id, owner, acquired, now, timeout), found, previous)


def renew(s: Session, search_id: int, owner: LeaseOwner, now: float) -> bool:
    """Move ``owner``'s heartbeat to ``now``; False when ``owner`` does not hold the lease."""
    beat = cast(
        "CursorResult[Any]",
        s.execute(
            update(SearchRow)
            .where(SearchRow.id == search_id, SearchRow.lease_token == owner.token)
            .values(lease_heartbeat_at=now)
            .execution_options(synchronize_session=False)
        ),
    )
    return beat.rowcount == 1


def release(s: Session, search_id: int, owner: LeaseOwner) -> bool:
    """Free the lease if ``owner`` holds it."""
    freed = cast(
        "CursorResult[Any]",
        s.execute(
            update(SearchRow)
            .where(SearchRow.id == search_id, SearchRow.lease_token == owner.token)
            .values(FREE)
            .execution_options(synchronize_session=False)
        ),
    )
    return freed.rowcount == 1


class LeaseMethods:
    """The lease half of ``SqlStore`` (see ``core.Store``). It remembers, per search, the
    token of the lease this store took (``_held``), and ``_writable`` refuses a write to a
    search whose lease another owner took since: a driver presumed dead that wakes up
    cannot write beside the one that took over."""

    where: str
    _held: dict[int, str]

    def _session(self, *, write: bool = False) -> AbstractContextManager[Session]:  # pragma: no cover - SqlStore's
        raise NotImplementedError

    def _search_row(self, s: Session, search_id: int, *, lock: bool = False) -> SearchRow:  # pragma: no cover
        raise NotImplementedError

    def acquire_lease(self, search_id: int, owner: LeaseOwner, timeout: float = LEASE_TIMEOUT_SECONDS) -> LeaseGrant:
        """Take the search's lease for ``owner``: ``SearchBusyError`` when another live
        driver holds it."""
        timeout = leases.check_timeout(timeout)
        with self._session(write=True) as s:
            grant = acquire(s, self._search_row(s, search_id, lock=True), owner, timeout, time.time(), self.where)
        self._held[search_id] = owner.token
        return grant

    def renew_lease(self, search_id: int, owner: LeaseOwner) -> Lease:
        """A heartbeat of ``owner``'s lease: ``LeaseLostError`` when it holds it no more."""
        with self._session(write=True) as s:
            now = time.time()
            if not renew(s, search_id, owner, now):
                raise leases.lost(self.where, search_id, read(self._search_row(s, search_id), now))
            lease = read(self._search_row(s, search_id), now)
        assert lease is not None
        return lease

    def release_lease(self, search_id: int, owner: LeaseOwner) -> bool:
        """Free the search's lease if ``owner`` holds it; whether it did."""
        with self._session(write=True) as s:
            freed = release(s, search_id, owner)
        if self._held.get(search_id) == owner.token:
            del self._held[search_id]
        return freed

    def lease(self, search_id: int) -> Lease | None:
        """The search's lease, or None when it is free."""
        with self._session() as s:
            return read(self._search_row(s, search_id), time.time())

    def _writable(self, s: Session, search_id: int) -> SearchRow:
        """The search's row, locked, for a write: ``LeaseLostError`` when this store took the
        search's lease and another owner holds it now (or nobody does)."""
        row = self._search_row(s, search_id, lock=True)
        held = self._held.get(search_id)
        if held is not None and row.lease_token != held:
            raise leases.lost(self.where, search_id, read(row, time.time()))
        return row
