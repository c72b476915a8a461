"""The lease part of the store contract: one driver per search, on every backend, and
drivers that start at once.

``StoreContract`` includes ``LeaseContract``; a backend's test class gives it, besides
``store``, a ``second`` fixture: another handle on the same database (what a second process
opening it would have), with leases of its own.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from schedsearch.core import LeaseOwner, LeaseState, Status
from schedsearch.errors import LeaseLostError, SearchBusyError, StoreError
from schedsearch.testing.builders import make_candidate, make_config, make_machine, make_measurement, make_workload

#: A holder on another host: this one cannot tell whether its process lives, so only its
#: timeout can end its lease.
ELSEWHERE = "another-host.invalid"
BUSY = (
    r"search \d+ in .+ is being run by pid \d+ on host .+ since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d .*; "
    r"wait for it or stop it"
)


def _far(pid: int = 4242, token: str = "far") -> LeaseOwner:
    return LeaseOwner(ELSEWHERE, pid, token)


def _dead_pid() -> int:
    """The pid of a process of this host that has ended (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _search(store: Any, **lease: Any) -> int:
    return store.create_search(make_workload(), make_config(), make_machine(), **lease)


class LeaseContract:
    """Leases every store must keep. Subclasses provide ``store`` and ``second`` fixtures."""

    @pytest.fixture
    def second(self, store: Any) -> Any:  # pragma: no cover - always overridden
        raise NotImplementedError("a StoreContract subclass must define a `second` fixture")

    def test_a_new_search_is_free_unless_born_leased(self, store: Any) -> None:
        assert store.lease(_search(store)) is None
        owner = LeaseOwner.here()
        before = time.time()
        sid = _search(store, lease=owner, lease_timeout=30.0)
        lease = store.lease(sid)
        assert lease is not None and lease.owner == owner and lease.search_id == sid and lease.timeout == 30.0
        assert before <= lease.acquired_at == lease.heartbeat_at <= time.time()
        with pytest.raises(SearchBusyError, match=BUSY):
            store.acquire_lease(sid, LeaseOwner.here())

    def test_taking_a_free_lease_and_taking_it_again(self, store: Any) -> None:
        sid = _search(store)
        owner = LeaseOwner.here()
        first = store.acquire_lease(sid, owner, timeout=20.0)
        assert first.found is LeaseState.FREE and first.previous is None
        assert store.lease(sid) == first.lease and first.lease.owner == owner
        time.sleep(0.01)
        again = store.acquire_lease(sid, owner, timeout=20.0)
        assert again.found is LeaseState.MINE and again.previous is None
        assert again.lease.acquired_at == first.lease.acquired_at < again.lease.heartbeat_at
        renewed = store.renew_lease(sid, owner)
        assert renewed.heartbeat_at >= again.lease.heartbeat_at and store.lease(sid) == renewed

    def test_a_live_lease_is_refused_and_left_as_it_is(self, store: Any, second: Any) -> None:
        sid = _search(store)
        held = store.acquire_lease(sid, _far()).lease
        for handle in (store, second):
            with pytest.raises(SearchBusyError, match=BUSY) as info:
                handle.acquire_lease(sid, LeaseOwner.here())
            assert f"pid 4242 on host {ELSEWHERE}" in str(info.value) and "\n" not in str(info.value)
        assert store.lease(sid) == second.lease(sid) == held

    def test_a_stale_lease_is_taken_over(self, store: Any) -> None:
        sid = _search(store)
        old = store.acquire_lease(sid, _far(), timeout=0.05).lease
        time.sleep(0.15)
        new_owner = LeaseOwner.here()
        grant = store.acquire_lease(sid, new_owner)
        assert grant.found is LeaseState.STALE and grant.previous == old
        assert grant.lease.owner == new_owner and store.lease(sid) == grant.lease
        with pytest.raises(LeaseLostError, match=rf"search {sid} .*taken over by pid {new_owner.pid}"):
            store.renew_lease(sid, old.owner)
        assert store.release_lease(sid, old.owner) is False and store.lease(sid) == grant.lease

    def test_a_holder_on_this_host_that_is_gone_is_taken_over_at_once(self, store: Any) -> None:
        sid = _search(store)
        gone = LeaseOwner.here()
        gone = LeaseOwner(gone.host, _dead_pid(), "gone")
        old = store.acquire_lease(sid, gone, timeout=3600.0).lease
        grant = store.acquire_lease(sid, LeaseOwner.here())
        assert grant.found is LeaseState.GONE and grant.previous == old

    def test_a_holder_elsewhere_keeps_its_lease_until_it_times_out(self, store: Any) -> None:
        sid = _search(store)
        store.acquire_lease(sid, _far(pid=_dead_pid()), timeout=3600.0)  # its pid means nothing here
        with pytest.raises(SearchBusyError):
            store.acquire_lease(sid, LeaseOwner.here())

    def test_release_frees_the_lease(self, store: Any, second: Any) -> None:
        sid = _search(store)
        owner = LeaseOwner.here()
        store.acquire_lease(sid, owner)
        assert store.release_lease(sid, LeaseOwner.here()) is False  # someone else's release changes nothing
        assert store.release_lease(sid, owner) is True and store.lease(sid) is None
        assert store.release_lease(sid, owner) is False
        assert second.acquire_lease(sid, LeaseOwner.here()).found is LeaseState.FREE

    def test_a_handle_whose_lease_was_taken_over_writes_nothing_more(self, store: Any, second: Any) -> None:
        mine = LeaseOwner.here()
        sid = _search(store, lease=mine, lease_timeout=0.05)
        root = make_candidate("root")
        store.add_candidate(sid, root)
        time.sleep(0.15)
        taker = LeaseOwner.here()
        assert second.acquire_lease(sid, taker).found is LeaseState.STALE
        before = (second.get_search(sid), second.candidates(sid))
        child = make_candidate("child", root)
        for write in (
            lambda: store.add_candidate(sid, child),
            lambda: store.record_measurement(sid, make_measurement(root, 0.5), None, None),
            lambda: store.mark_expanded(sid, before[1][0].id),
            lambda: store.update_search(sid, failure="late"),
        ):
            with pytest.raises(LeaseLostError, match=rf"search {sid} .*no longer this run's.*writes nothing more"):
                write()
        assert (second.get_search(sid), second.candidates(sid)) == before
        # The new holder writes as ever.
        assert second.record_measurement(sid, make_measurement(root, 0.25), None, None).status is Status.OK

    def test_one_of_many_racing_drivers_gets_the_lease(self, store: Any) -> None:
        sid = _search(store)
        owners = [LeaseOwner.here() for _ in range(8)]
        outcomes: list[str] = []
        start = threading.Barrier(len(owners))

        def take(owner: LeaseOwner) -> None:
            start.wait()
            try:
                store.acquire_lease(sid, owner)
                outcomes.append("taken")
            except SearchBusyError:
                outcomes.append("busy")

        threads = [threading.Thread(target=take, args=(o,)) for o in owners]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert sorted(outcomes) == ["busy"] * 7 + ["taken"]

    def test_leases_of_an_unknown_search(self, store: Any) -> None:
        with pytest.raises(StoreError, match="no search 4242"):
            store.acquire_lease(4242, LeaseOwner.here())
        with pytest.raises(StoreError, match="no search 4242"):
            store.renew_lease(4242, LeaseOwner.here())
        with pytest.raises(StoreError, match="no search 4242"):
            store.lease(4242)

    @pytest.mark.parametrize("timeout", [0, -1.0, float("nan"), float("inf"), 1e9, True, "60"])
    def test_a_timeout_must_be_a_sensible_number(self, store: Any, timeout: Any) -> None:
        sid = _search(store)
        with pytest.raises(ValueError, match="lease timeout"):
            store.acquire_lease(sid, LeaseOwner.here(), timeout=timeout)
        with pytest.raises(ValueError, match="lease timeout"):
            _search(store, lease=LeaseOwner.here(), lease_timeout=timeout)
        assert store.lease(sid) is None

    def test_drivers_starting_searches_of_one_workload_at_once(self, store: Any) -> None:
        ids: list[int] = []
        errors: list[str] = []
        start = threading.Barrier(8)

        def create() -> None:
            start.wait()
            try:
                ids.append(_search(store, lease=LeaseOwner.here()))
            except Exception as exc:  # noqa: BLE001 - asserted empty below
                errors.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=create) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert errors == [], errors
        assert len(set(ids)) == 8
        assert {store.get_search(i).workload for i in ids} == {make_workload()}
