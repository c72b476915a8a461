"""The store contract: one test suite every ``core.Store`` backend must pass.

Use it by subclassing ``StoreContract`` in a test module and giving the class a ``store``
fixture that yields a fresh, empty store::

    class TestMyStore(StoreContract):
        @pytest.fixture
        def store(self, tmp_path):
            s = MyStore(tmp_path / "x.db")
            yield s
            s.close()

The builders (``make_workload``, ``make_candidate``, ``make_measurement``, in
``schedsearch.testing.builders`` and importable from here) make plain core records without
Exo, for these tests and any other test that needs stored data. The reuse and warm-start
The tests are grouped by concern, one class each, and ``StoreContract`` includes them all:
searches are here; candidates and their measurements in ``store_contract_candidates``; queries,
the cost model's data and unknown ids in ``store_contract_queries``; the reuse and warm-start
queries in ``store_contract_reuse``; leases in ``store_contract_lease``; where each measurement
was taken (its machine and cluster nodes) in ``store_contract_node``.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

from schedsearch.core import Counters, SearchStatus, Store
from schedsearch.testing.builders import (
    make_candidate,
    make_config,
    make_machine,
    make_measurement,
    make_schedule,
    make_timing,
    make_workload,
)
from schedsearch.testing.store_contract_candidates import CandidateContract
from schedsearch.testing.store_contract_lease import LeaseContract
from schedsearch.testing.store_contract_node import NodeContract
from schedsearch.testing.store_contract_queries import QueryContract
from schedsearch.testing.store_contract_reuse import ReuseContract

__all__ = [
    "CandidateContract",
    "LeaseContract",
    "NodeContract",
    "QueryContract",
    "ReuseContract",
    "StoreContract",
    "make_candidate",
    "make_config",
    "make_machine",
    "make_measurement",
    "make_schedule",
    "make_timing",
    "make_workload",
]


class StoreContract(CandidateContract, QueryContract, ReuseContract, LeaseContract, NodeContract):
    """Behaviour every store must have. Subclasses provide a ``store`` fixture and a
    ``second`` one (another handle on the same database: see ``LeaseContract``)."""

    @pytest.fixture
    def store(self) -> Any:  # pragma: no cover - always overridden
        raise NotImplementedError("a StoreContract subclass must define a `store` fixture")

    # ---------------------------------------------------------------- searches

    def test_is_a_core_store(self, store: Any) -> None:
        assert callable(store.frontier)
        assert isinstance(store, Store)

    def test_create_search_round_trips(self, store: Any) -> None:
        before = time.time()
        sid = store.create_search(make_workload(), make_config(), make_machine())
        rec = store.get_search(sid)
        assert rec.id == sid
        assert rec.workload == make_workload()
        assert rec.config == make_config()
        assert rec.machine == make_machine()
        assert rec.status is SearchStatus.RUNNING
        assert before - 1 <= rec.started_at <= time.time() + 1
        assert rec.ended_at is None and rec.best_candidate_id is None and rec.baseline_seconds is None
        assert rec.counters == Counters()
        assert rec.elapsed_seconds == 0.0

    def test_list_searches_by_workload(self, store: Any) -> None:
        w1, w2 = make_workload("sgemm"), make_workload("sgemv")
        s1 = store.create_search(w1, make_config(1), make_machine())
        s2 = store.create_search(w2, make_config(2), make_machine())
        s3 = store.create_search(w1, make_config(3), make_machine())
        assert [s.id for s in store.list_searches()] == [s1, s2, s3]
        assert [s.id for s in store.list_searches(w1.key)] == [s1, s3]
        assert [s.config.seed for s in store.list_searches(w2.key)] == [2]
        assert store.list_searches("no-such-key") == []

    def test_same_workload_key_keeps_first_record(self, store: Any) -> None:
        first = make_workload(path="/a/matmul.py")
        moved = make_workload(path="/b/matmul.py")
        assert first.key == moved.key
        store.create_search(first, make_config(), make_machine())
        sid = store.create_search(moved, make_config(), make_machine())
        assert store.get_search(sid).workload == first

    def test_update_search_sets_fields(self, store: Any) -> None:
        sid = store.create_search(make_workload(), make_config(), make_machine())
        rec = store.add_candidate(sid, make_candidate("root"))
        counters = Counters(generated=10, duplicates=3, illegal=2, evaluated=5, ok=4, failed=1)
        updated = store.update_search(
            sid,
            status=SearchStatus.COMPLETED,
            ended_at=1234.5,
            counters=counters,
            baseline_seconds=0.02,
            best_candidate_id=rec.id,
            best_seconds=0.001,
            best_speedup=20.0,
            elapsed_seconds=61.25,
        )
        assert updated == store.get_search(sid)
        assert updated.status is SearchStatus.COMPLETED
        assert updated.counters == counters
        assert (updated.ended_at, updated.baseline_seconds, updated.best_candidate_id) == (1234.5, 0.02, rec.id)
        assert (updated.best_seconds, updated.best_speedup, updated.elapsed_seconds) == (0.001, 20.0, 61.25)
        again = store.update_search(sid, status=SearchStatus.INTERRUPTED)
        assert again.status is SearchStatus.INTERRUPTED and again.counters == counters
        assert again.failure == ""
        failed = store.update_search(sid, status=SearchStatus.FAILED, failure="disk full\ntraceback lines")
        assert store.get_search(sid).failure == failed.failure == "disk full"  # one line
        assert store.update_search(sid, status=SearchStatus.RUNNING, failure="").failure == ""

    def test_a_resumed_search_stores_the_config_it_runs_with(self, store: Any) -> None:
        sid = store.create_search(make_workload(), make_config(), make_machine())
        extended = dataclasses.replace(make_config(), max_seconds=300.0, max_candidates=90, early_stop=25)
        assert store.update_search(sid, config=extended).config == extended == store.get_search(sid).config
        with pytest.raises(TypeError, match="SearchConfig"):
            store.update_search(sid, config={"max_seconds": 1.0})
        assert store.get_search(sid).config == extended

    def test_update_search_rejects_unknown_fields(self, store: Any) -> None:
        sid = store.create_search(make_workload(), make_config(), make_machine())
        with pytest.raises(TypeError, match="nonsense"):
            store.update_search(sid, nonsense=1)
        assert store.get_search(sid).status is SearchStatus.RUNNING
