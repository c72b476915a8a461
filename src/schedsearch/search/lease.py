"""A driver's hold on its search: the lease taken, kept alive by a heartbeat, released.

One search has one driver at a time. ``LeaseKeeper`` takes the search's lease when a search
is created (born leased, in the same transaction) or resumed (``SearchBusyError`` when
another live driver runs it), renews it from a daemon thread every ``LEASE_BEAT_SHARE`` of
its timeout - a thread, not the search loop, because the loop may wait minutes in one call
(a finalists' re-measurement, a cluster starting) - and frees it when released.

A heartbeat that fails for a passing reason (the database locked past its busy timeout, a
server restarting) is tried again at the next beat: several can fail before the lease lapses.
One that finds the lease taken over stops beating; the store itself then refuses this
driver's next write (``LeaseLostError``), which stops the search loop.
"""

from __future__ import annotations

import contextlib
import threading
import time

from schedsearch.core import (
    LEASE_BEAT_SHARE,
    LEASE_TIMEOUT_SECONDS,
    LeaseGrant,
    LeaseOwner,
    LeaseState,
    MachineInfo,
    SearchConfig,
    Store,
    Workload,
)
from schedsearch.errors import LeaseLostError


class LeaseKeeper:
    """One driver's lease on one search, in ``store``. A context manager that releases it."""

    def __init__(self, store: Store, owner: LeaseOwner | None = None, timeout: float = LEASE_TIMEOUT_SECONDS) -> None:
        self.store = store
        self.owner = owner if owner is not None else LeaseOwner.here()
        self.timeout = timeout
        self.search_id: int | None = None
        self.grant: LeaseGrant | None = None  # how the lease was taken (None: born with the search)
        self.lost: LeaseLostError | None = None  # set by the heartbeat that found the lease taken over
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> LeaseKeeper:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def hold(self, search_id: int) -> LeaseGrant | None:
        """Take the search's lease and keep it alive; ``SearchBusyError`` when another live
        driver holds it. Holding the search this keeper holds already changes nothing."""
        if self.search_id == search_id:
            return self.grant
        if self.search_id is not None:
            raise ValueError(f"this keeper holds search {self.search_id}, not search {search_id}")
        self.grant = self.store.acquire_lease(search_id, self.owner, self.timeout)
        self.search_id = search_id
        self._start()
        return self.grant

    def create(self, workload: Workload, config: SearchConfig, machine: MachineInfo) -> int:
        """Record a new running search, born leased to this keeper's owner, and keep it alive."""
        if self.search_id is not None:
            raise ValueError(f"this keeper holds search {self.search_id} already")
        self.search_id = self.store.create_search(
            workload, config, machine, lease=self.owner, lease_timeout=self.timeout
        )
        self._start()
        return self.search_id

    def release(self) -> None:
        """Stop the heartbeat and free the lease. Best effort: a database failing now leaves
        a lease that lapses after its timeout (or at once, for a process that has ended)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
            self._thread = None
        if self.search_id is not None and self.lost is None:
            with contextlib.suppress(Exception):  # the run's own outcome is what to report
                self.store.release_lease(self.search_id, self.owner)

    def note(self) -> str | None:
        """One line when the lease was taken over from a driver that stopped, else None."""
        return takeover_note(self.grant) if self.grant is not None else None

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._beat, name=f"schedsearch-lease-{self.search_id}", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        assert self.search_id is not None
        interval = self.timeout * LEASE_BEAT_SHARE
        while not self._stop.wait(interval):
            try:
                self.store.renew_lease(self.search_id, self.owner)
            except LeaseLostError as e:
                self.lost = e
                return
            except Exception:  # noqa: BLE001 - passing: locked, server restarting; beat again soon
                continue


def takeover_note(grant: LeaseGrant) -> str | None:
    """The line that says a search was taken over from a driver that stopped, or None."""
    previous = grant.previous
    if previous is None or grant.found not in (LeaseState.STALE, LeaseState.GONE):
        return None
    who = previous.owner.label
    if grant.found is LeaseState.GONE:
        why = "whose process no longer exists"
    else:
        silent = max(0.0, time.time() - previous.heartbeat_at)
        why = f"silent for {silent:.0f} s (its lease times out after {previous.timeout:g} s)"
    return f"search {grant.lease.search_id}: taking it over from its last driver, {who}, {why}"
