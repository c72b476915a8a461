"""LeaseKeeper and run_search with a lease, over the in-memory store: one driver per search."""

from __future__ import annotations

import re
import time

import pytest

from schedsearch.core import LeaseOwner, LeaseState, SearchConfig, SearchEvent, SearchStatus, Status
from schedsearch.errors import LeaseLostError, SearchBusyError
from schedsearch.search import make_strategy, run_search
from schedsearch.search.lease import LeaseKeeper, takeover_note
from schedsearch.store import InMemoryStore
from schedsearch.testing.builders import make_config, make_machine, make_workload
from schedsearch.testing.fake_executor import FakeExecutor
from schedsearch.testing.fake_tree import FakeTree, fake_root, fake_workload


def _pause(keeper: LeaseKeeper) -> None:
    """Stop the keeper's heartbeat without releasing its lease (a driver stopped by SIGSTOP)."""
    keeper._stop.set()
    assert keeper._thread is not None
    keeper._thread.join(timeout=5)


def test_a_held_lease_is_renewed_until_released() -> None:
    store = InMemoryStore()
    sid = store.create_search(make_workload(), make_config(), make_machine())
    with LeaseKeeper(store, timeout=0.3) as keeper:
        grant = keeper.hold(sid)
        assert grant is not None and grant.found is LeaseState.FREE and keeper.note() is None
        assert keeper.hold(sid) is grant  # holding it again changes nothing
        time.sleep(0.5)  # longer than its timeout: alive only through the heartbeat
        lease = store.lease(sid)
        assert lease is not None and lease.owner == keeper.owner and time.time() - lease.heartbeat_at < 0.3
        with pytest.raises(SearchBusyError):
            store.twin().acquire_lease(sid, LeaseOwner.here())
        with pytest.raises(ValueError, match=f"holds search {sid}"):
            keeper.hold(sid + 1)
    assert store.lease(sid) is None


def test_a_created_search_is_born_leased_and_freed_at_release() -> None:
    store = InMemoryStore()
    keeper = LeaseKeeper(store, timeout=0.3)
    sid = keeper.create(make_workload(), make_config(), make_machine())
    lease = store.lease(sid)
    assert lease is not None and lease.owner == keeper.owner and keeper.grant is None
    keeper.release()
    assert store.lease(sid) is None


def test_a_paused_driver_is_taken_over_and_its_heartbeat_finds_out() -> None:
    store = InMemoryStore()
    keeper = LeaseKeeper(store, timeout=0.2)
    sid = keeper.create(make_workload(), make_config(), make_machine())
    _pause(keeper)
    time.sleep(0.3)
    taker = LeaseKeeper(store.twin())
    grant = taker.hold(sid)
    assert grant is not None and grant.found is LeaseState.STALE and grant.previous is not None
    note = taker.note()
    assert note is not None and note.startswith(f"search {sid}: taking it over from its last driver, pid ")
    assert re.search(r", silent for \d+ s \(its lease times out after 0.2 s\)$", note)
    keeper._stop.clear()
    keeper._start()  # the paused driver wakes up
    deadline = time.monotonic() + 5
    while keeper.lost is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert isinstance(keeper.lost, LeaseLostError)
    keeper.release()  # releases nothing: the lease is the taker's
    assert store.lease(sid) is not None and store.lease(sid).owner == taker.owner  # type: ignore[union-attr]
    taker.release()


def test_takeover_notes_say_why() -> None:
    store = InMemoryStore()
    sid = store.create_search(make_workload(), make_config(), make_machine())
    assert takeover_note(store.acquire_lease(sid, LeaseOwner.here())) is None
    far = LeaseOwner("another-host.invalid", 77, "far")
    sid2 = store.create_search(make_workload(), make_config(), make_machine(), lease=far, lease_timeout=0.05)
    time.sleep(0.1)
    note = takeover_note(store.acquire_lease(sid2, LeaseOwner.here()))
    assert note is not None
    assert note.startswith(f"search {sid2}: taking it over from its last driver, pid 77 on host another-host.invalid, "
                           "silent for 0 s (its lease times out after 0.05 s)")


def _config(**kw) -> SearchConfig:
    return SearchConfig(max_seconds=None, **kw)


def test_run_search_with_a_lease_creates_the_search_leased() -> None:
    store = InMemoryStore()
    leases: list[object] = []
    keeper = LeaseKeeper(store)
    cfg = _config(max_candidates=10)

    def observe(event: SearchEvent) -> None:
        leases.append(store.lease(event.search_id))

    outcome = run_search(fake_workload(), fake_root(), make_strategy(cfg), FakeExecutor(FakeTree()), store, cfg,
                         observe, lease=keeper)
    assert outcome.status is SearchStatus.COMPLETED
    assert leases and all(lease is not None and lease.owner == keeper.owner  # type: ignore[attr-defined]
                          for lease in leases)
    keeper.release()
    assert store.lease(outcome.search_id) is None


def test_run_search_refuses_a_search_another_driver_runs_and_leaves_it_untouched() -> None:
    store = InMemoryStore()
    cfg = _config(max_candidates=5)
    first = run_search(fake_workload(), fake_root(), make_strategy(cfg), FakeExecutor(FakeTree()), store, cfg)
    other = LeaseOwner("another-host.invalid", 77, "far")
    store.acquire_lease(first.search_id, other)
    before = (store.get_search(first.search_id), store.candidates(first.search_id))
    more = _config(max_candidates=10)
    with pytest.raises(SearchBusyError, match="wait for it or stop it"):
        run_search(fake_workload(), fake_root(), make_strategy(more), FakeExecutor(FakeTree()), store, more,
                   search_id=first.search_id, lease=LeaseKeeper(store.twin()))
    assert (store.get_search(first.search_id), store.candidates(first.search_id)) == before


def test_a_driver_whose_search_is_taken_over_stops_and_writes_nothing_more() -> None:
    store = InMemoryStore()
    keeper = LeaseKeeper(store, timeout=0.2)
    cfg = _config(max_candidates=40)
    taken: dict[str, object] = {}

    def observe(event: SearchEvent) -> None:
        # After a few measurements the driver stalls past its lease's timeout, and another
        # driver takes the search over.
        if event.record is not None and event.record.status is not Status.PENDING and not taken and \
                event.counters.evaluated >= 5:
            _pause(keeper)
            time.sleep(0.3)
            twin = store.twin()
            taken["grant"] = twin.acquire_lease(event.search_id, LeaseOwner.here())
            taken["rows"] = twin.candidates(event.search_id)
            taken["search"] = twin.get_search(event.search_id)

    with pytest.raises(LeaseLostError, match="no longer this run's") as info:
        run_search(fake_workload(), fake_root(), make_strategy(cfg), FakeExecutor(FakeTree()), store, cfg, observe,
                   lease=keeper)
    sid = info.value.search_id
    assert sid is not None and taken["grant"].found is LeaseState.STALE  # type: ignore[attr-defined]
    # Nothing was written after the takeover: not a row, not a "failed" status.
    assert store.candidates(sid) == taken["rows"] and store.get_search(sid) == taken["search"]
    assert store.get_search(sid).status is SearchStatus.RUNNING
    keeper.release()
