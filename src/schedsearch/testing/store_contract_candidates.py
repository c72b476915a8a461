"""The store contract's part on candidates and their measurements: adding them (parents
resolved, a fingerprint stored once per search), recording measurements (ok, failed,
re-measured), reading them back whole or as an outline, and marking them expanded.
``StoreContract`` includes these tests; they use the same ``store`` fixture.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

from schedsearch.core import Candidate, Rewrite, RewriteKind, Status
from schedsearch.errors import NotFoundError, StoreError
from schedsearch.testing.builders import (
    make_candidate,
    make_config,
    make_machine,
    make_measurement,
    make_workload,
    stored_tree,
)


class CandidateContract:
    """Behaviour every store must have with candidates and their measurements."""

    def test_add_candidate_resolves_parents(self, store: Any) -> None:
        sid, recs = stored_tree(store)
        root, a, b, a1 = recs["root"], recs["a"], recs["b"], recs["a1"]
        assert root.parent_id is None and root.depth == 0
        assert a.parent_id == root.id and b.parent_id == root.id and a1.parent_id == a.id
        assert a1.depth == 2
        assert a1.schedule == make_candidate("a1", make_candidate("a", make_candidate("root"))).schedule
        assert all(r.status is Status.PENDING and r.timing is None and not r.expanded for r in recs.values())
        assert all(r.search_id == sid for r in recs.values())
        assert len({r.id for r in recs.values()}) == 4

    def test_candidate_records_round_trip(self, store: Any) -> None:
        sid, recs = stored_tree(store)
        for rec in recs.values():
            assert store.get_candidate(rec.id) == rec
            assert store.candidate_by_fingerprint(sid, rec.fingerprint) == rec
        assert store.candidate_by_fingerprint(sid, "0" * 64) is None

    def test_duplicate_fingerprint_returns_existing(self, store: Any) -> None:
        sid = store.create_search(make_workload(), make_config(), make_machine())
        first = store.add_candidate(sid, make_candidate("root"))
        store.record_measurement(sid, make_measurement(make_candidate("root"), 0.5), 1.0, 1.0)
        stored = store.get_candidate(first.id)
        other = make_candidate("root")
        clash = Candidate(
            other.schedule.then(Rewrite.make(RewriteKind.SIMPLIFY, "")), "different", other.fingerprint, "x"
        )
        again = store.add_candidate(sid, clash)
        assert again == stored
        assert len(store.candidates(sid)) == 1

    def test_same_fingerprint_in_two_searches(self, store: Any) -> None:
        s1 = store.create_search(make_workload(), make_config(), make_machine())
        s2 = store.create_search(make_workload(), make_config(), make_machine())
        r1 = store.add_candidate(s1, make_candidate("root"))
        r2 = store.add_candidate(s2, make_candidate("root"))
        assert r1.id != r2.id and (r1.search_id, r2.search_id) == (s1, s2)
        store.record_measurement(s2, make_measurement(make_candidate("root"), 0.5), None, None)
        assert store.get_candidate(r1.id).status is Status.PENDING
        assert store.get_candidate(r2.id).status is Status.OK

    def test_missing_parent_is_an_error(self, store: Any) -> None:
        sid = store.create_search(make_workload(), make_config(), make_machine())
        orphan = make_candidate("child", make_candidate("never-added"))
        with pytest.raises(StoreError, match="parent"):
            store.add_candidate(sid, orphan)
        assert store.candidates(sid) == []

    def test_record_measurement_ok(self, store: Any) -> None:
        sid, recs = stored_tree(store)
        before = time.time()
        m = dataclasses.replace(make_measurement(make_candidate("root"), 0.004), measured_at=12.75)
        rec = store.record_measurement(sid, m, 123.25, 2.5)
        assert rec.id == recs["root"].id
        assert rec.status is Status.OK
        assert rec.timing == m.timing and rec.seconds == 0.004
        assert (rec.gflops, rec.speedup, rec.max_error) == (123.25, 2.5, 3.5e-7)
        assert (rec.build_seconds, rec.run_seconds, rec.error) == (0.25, 1.5, "")
        assert rec.measured_unix is not None and before - 1 <= rec.measured_unix <= time.time() + 1
        assert rec.measured_at == 12.75  # the search's elapsed seconds, as the driver gave them
        assert rec.created_at == recs["root"].created_at
        assert store.get_candidate(rec.id) == rec

    @pytest.mark.parametrize(
        "status", [Status.BUILD_ERROR, Status.WRONG_RESULT, Status.TIMEOUT, Status.ILLEGAL, Status.TAMPERED]
    )
    def test_record_measurement_failure(self, store: Any, status: Status) -> None:
        sid, recs = stored_tree(store)
        rec = store.record_measurement(sid, make_measurement(make_candidate("root"), None, status), None, None)
        assert rec.id == recs["root"].id
        assert rec.status is status and rec.status.failed
        assert rec.error == f"{status.value}: boom\nline 2"
        assert rec.timing is None and rec.gflops is None and rec.speedup is None and rec.max_error is None
        assert store.get_candidate(rec.id) == rec

    def test_remeasurement_replaces_timing(self, store: Any) -> None:
        sid, _ = stored_tree(store)
        store.record_measurement(sid, make_measurement(make_candidate("root"), 0.5), 1.0, 1.0)
        rec = store.record_measurement(
            sid, make_measurement(make_candidate("root"), None, Status.RUN_ERROR), None, None
        )
        assert rec.timing is None and rec.status is Status.RUN_ERROR
        assert store.get_candidate(rec.id) == rec

    def test_record_measurement_unknown_fingerprint(self, store: Any) -> None:
        sid, _ = stored_tree(store)
        with pytest.raises(StoreError, match="fingerprint"):
            store.record_measurement(sid, make_measurement(make_candidate("stranger"), 0.1), None, None)

    def test_candidates_in_insertion_order(self, store: Any) -> None:
        sid, recs = stored_tree(store)
        other = store.create_search(make_workload("other"), make_config(), make_machine())
        store.add_candidate(other, make_candidate("zzz"))
        assert store.candidates(sid) == [recs[t] for t in ("root", "a", "b", "a1")]
        assert store.seen_fingerprints(sid) == {r.fingerprint for r in recs.values()}
        assert store.seen_fingerprints(other) == {make_candidate("zzz").fingerprint}

    def test_candidates_without_code(self, store: Any) -> None:
        sid, _recs = stored_tree(store)
        store.record_measurement(sid, make_measurement(make_candidate("a"), 0.5), 12.5, 2.0)
        full = store.candidates(sid)
        outline = store.candidates(sid, code=False)
        assert [r.id for r in outline] == [r.id for r in full]
        for whole, light in zip(full, outline, strict=True):
            assert (light.c_source, light.proc_text, light.features) == ("", "", None)
            assert light.timing is None or light.timing.samples == ()
            timing = dataclasses.replace(whole.timing, samples=()) if whole.timing is not None else None
            assert light == dataclasses.replace(whole, c_source="", proc_text="", features=None, timing=timing)
        assert outline[1].timing is not None and outline[1].timing.median == 0.5 and outline[1].gflops == 12.5
        with pytest.raises(NotFoundError, match="no search 999"):
            store.candidates(999, code=False)
        with pytest.raises(NotFoundError, match="no candidate 999"):
            store.get_candidate(999)

    def test_mark_expanded_and_frontier(self, store: Any) -> None:
        sid, recs = stored_tree(store)
        for tag, secs in (("root", 1.0), ("a", 0.5), ("a1", 0.25)):
            store.record_measurement(sid, make_measurement(make_candidate(tag), secs), None, None)
        store.record_measurement(sid, make_measurement(make_candidate("b"), None, Status.BUILD_ERROR), None, None)
        assert [r.id for r in store.frontier(sid)] == [recs["root"].id, recs["a"].id, recs["a1"].id]
        store.mark_expanded(sid, recs["root"].id)
        assert store.get_candidate(recs["root"].id).expanded
        assert [r.id for r in store.frontier(sid)] == [recs["a"].id, recs["a1"].id]
        assert all(not r.expanded for r in store.frontier(sid))

    def test_mark_expanded_wrong_search(self, store: Any) -> None:
        sid, recs = stored_tree(store)
        other = store.create_search(make_workload(), make_config(), make_machine())
        with pytest.raises(StoreError, match=str(recs["a"].id)):
            store.mark_expanded(other, recs["a"].id)
        with pytest.raises(StoreError, match="999"):
            store.mark_expanded(sid, 999)
        assert not store.get_candidate(recs["a"].id).expanded
