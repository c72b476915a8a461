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
queries have their part of the contract in ``store_contract_reuse``, leases theirs in
``store_contract_lease``.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

from schedsearch.core import (
    Candidate,
    CandidateRecord,
    Counters,
    FeatureVector,
    MachineInfo,
    ModelAccuracy,
    Paired,
    Rewrite,
    RewriteKind,
    SearchStatus,
    Status,
    Store,
    Workload,
    sha256_text,
)
from schedsearch.errors import NotFoundError, StoreError
from schedsearch.testing.builders import (
    make_candidate,
    make_config,
    make_machine,
    make_measurement,
    make_schedule,
    make_timing,
    make_workload,
)
from schedsearch.testing.store_contract_lease import LeaseContract
from schedsearch.testing.store_contract_reuse import ReuseContract

__all__ = [
    "LeaseContract",
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


# --------------------------------------------------------------------------- the contract


def _tree(store: Any) -> tuple[int, dict[str, CandidateRecord]]:
    """root -> a -> a1, root -> b: returns the search id and records by tag."""
    sid = store.create_search(make_workload(), make_config(), make_machine())
    root = make_candidate("root")
    a = make_candidate("a", root)
    b = make_candidate("b", root)
    a1 = make_candidate("a1", a)
    recs = {}
    for tag, cand in (("root", root), ("a", a), ("b", b), ("a1", a1)):
        recs[tag] = store.add_candidate(sid, cand)
    return sid, recs


class StoreContract(ReuseContract, LeaseContract):
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

    # ---------------------------------------------------------------- candidates

    def test_add_candidate_resolves_parents(self, store: Any) -> None:
        sid, recs = _tree(store)
        root, a, b, a1 = recs["root"], recs["a"], recs["b"], recs["a1"]
        assert root.parent_id is None and root.depth == 0
        assert a.parent_id == root.id and b.parent_id == root.id and a1.parent_id == a.id
        assert a1.depth == 2
        assert a1.schedule == make_candidate("a1", make_candidate("a", make_candidate("root"))).schedule
        assert all(r.status is Status.PENDING and r.timing is None and not r.expanded for r in recs.values())
        assert all(r.search_id == sid for r in recs.values())
        assert len({r.id for r in recs.values()}) == 4

    def test_candidate_records_round_trip(self, store: Any) -> None:
        sid, recs = _tree(store)
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
        sid, recs = _tree(store)
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

    def test_paired_measurement_round_trips(self, store: Any) -> None:
        sid, _ = _tree(store)
        yardstick = Paired(make_candidate("yardstick").fingerprint, make_timing(0.002), seconds=0.0025)
        m = dataclasses.replace(make_measurement(make_candidate("root"), 0.005), paired=yardstick)
        rec = store.record_measurement(sid, m, None, None)
        assert rec.paired == yardstick and rec.paired.factor == pytest.approx(1.25)
        assert rec.timing == m.timing  # stored as given: the driver already put it on the search's scale
        assert store.get_candidate(rec.id) == rec
        assert store.candidate_by_fingerprint(sid, rec.fingerprint) == rec
        assert store.top_candidates(sid) == [rec]
        # Placed round by round, and an also-ran whose yardstick was spared: the factor is kept.
        a, b = make_candidate("a", make_candidate("root")), make_candidate("b", make_candidate("root"))
        rounds = dataclasses.replace(yardstick, scaled_by=1.1)
        rec = store.record_measurement(sid, dataclasses.replace(make_measurement(a, 0.05), paired=rounds), None, None)
        assert rec.paired == rounds and rec.paired.factor == 1.1 and store.get_candidate(rec.id) == rec
        spared = Paired(yardstick.fingerprint, None, seconds=0.0025, scaled_by=0.9)
        rec = store.record_measurement(sid, dataclasses.replace(make_measurement(b, 0.05), paired=spared), None, None)
        assert rec.paired == spared and rec.paired.spared and rec.paired.factor == 0.9
        assert store.get_candidate(rec.id) == rec

    def test_lone_measurement_is_unpaired(self, store: Any) -> None:
        sid, recs = _tree(store)
        rec = store.record_measurement(sid, make_measurement(make_candidate("root"), 0.005), None, None)
        assert rec.paired is None and store.get_candidate(rec.id).paired is None
        assert all(r.paired is None for r in store.candidates(sid))  # pending ones too
        # Measured again alone after a paired run: the pair goes with the times it scaled.
        a = make_candidate("a", make_candidate("root"))
        yardstick = Paired(make_candidate("yardstick").fingerprint, make_timing(0.002))
        store.record_measurement(sid, dataclasses.replace(make_measurement(a, 0.5), paired=yardstick), None, None)
        again = store.record_measurement(sid, make_measurement(a, 0.25), None, None)
        assert again.paired is None and store.get_candidate(recs["a"].id) == again

    @pytest.mark.parametrize(
        "status", [Status.BUILD_ERROR, Status.WRONG_RESULT, Status.TIMEOUT, Status.ILLEGAL, Status.TAMPERED]
    )
    def test_record_measurement_failure(self, store: Any, status: Status) -> None:
        sid, recs = _tree(store)
        rec = store.record_measurement(sid, make_measurement(make_candidate("root"), None, status), None, None)
        assert rec.id == recs["root"].id
        assert rec.status is status and rec.status.failed
        assert rec.error == f"{status.value}: boom\nline 2"
        assert rec.timing is None and rec.gflops is None and rec.speedup is None and rec.max_error is None
        assert store.get_candidate(rec.id) == rec

    def test_remeasurement_replaces_timing(self, store: Any) -> None:
        sid, _ = _tree(store)
        store.record_measurement(sid, make_measurement(make_candidate("root"), 0.5), 1.0, 1.0)
        rec = store.record_measurement(
            sid, make_measurement(make_candidate("root"), None, Status.RUN_ERROR), None, None
        )
        assert rec.timing is None and rec.status is Status.RUN_ERROR
        assert store.get_candidate(rec.id) == rec

    def test_record_measurement_unknown_fingerprint(self, store: Any) -> None:
        sid, _ = _tree(store)
        with pytest.raises(StoreError, match="fingerprint"):
            store.record_measurement(sid, make_measurement(make_candidate("stranger"), 0.1), None, None)

    def test_candidates_in_insertion_order(self, store: Any) -> None:
        sid, recs = _tree(store)
        other = store.create_search(make_workload("other"), make_config(), make_machine())
        store.add_candidate(other, make_candidate("zzz"))
        assert store.candidates(sid) == [recs[t] for t in ("root", "a", "b", "a1")]
        assert store.seen_fingerprints(sid) == {r.fingerprint for r in recs.values()}
        assert store.seen_fingerprints(other) == {make_candidate("zzz").fingerprint}

    def test_candidates_without_code(self, store: Any) -> None:
        sid, _recs = _tree(store)
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
        sid, recs = _tree(store)
        for tag, secs in (("root", 1.0), ("a", 0.5), ("a1", 0.25)):
            store.record_measurement(sid, make_measurement(make_candidate(tag), secs), None, None)
        store.record_measurement(sid, make_measurement(make_candidate("b"), None, Status.BUILD_ERROR), None, None)
        assert [r.id for r in store.frontier(sid)] == [recs["root"].id, recs["a"].id, recs["a1"].id]
        store.mark_expanded(sid, recs["root"].id)
        assert store.get_candidate(recs["root"].id).expanded
        assert [r.id for r in store.frontier(sid)] == [recs["a"].id, recs["a1"].id]
        assert all(not r.expanded for r in store.frontier(sid))

    def test_mark_expanded_wrong_search(self, store: Any) -> None:
        sid, recs = _tree(store)
        other = store.create_search(make_workload(), make_config(), make_machine())
        with pytest.raises(StoreError, match=str(recs["a"].id)):
            store.mark_expanded(other, recs["a"].id)
        with pytest.raises(StoreError, match="999"):
            store.mark_expanded(sid, 999)
        assert not store.get_candidate(recs["a"].id).expanded

    # ---------------------------------------------------------------- queries

    def test_top_candidates(self, store: Any) -> None:
        sid, recs = _tree(store)
        times = {"root": 0.9, "a": 0.3, "b": 0.3, "a1": None}
        for tag, secs in times.items():
            status = Status.OK if secs is not None else Status.WRONG_RESULT
            store.record_measurement(sid, make_measurement(make_candidate(tag), secs, status), None, None)
        top = store.top_candidates(sid, k=10)
        assert [r.id for r in top] == [recs["a"].id, recs["b"].id, recs["root"].id]  # tie: older first
        assert [r.id for r in store.top_candidates(sid, k=1)] == [recs["a"].id]
        assert top[0] == store.get_candidate(recs["a"].id)

    def test_top_candidates_skip_pending(self, store: Any) -> None:
        sid, _ = _tree(store)
        assert store.top_candidates(sid) == []

    def test_best_for_workload_spans_searches(self, store: Any) -> None:
        w, other = make_workload("sgemm"), make_workload("sgemv")
        s1 = store.create_search(w, make_config(), make_machine())
        s2 = store.create_search(w, make_config(), make_machine())
        s3 = store.create_search(other, make_config(), make_machine())
        for sid, tag, secs in ((s1, "x", 0.5), (s2, "y", 0.2), (s3, "z", 0.01), (s2, "w", 0.7)):
            store.add_candidate(sid, make_candidate(tag))
            store.record_measurement(sid, make_measurement(make_candidate(tag), secs), None, None)
        best = store.best_for_workload(w.key, k=2)
        assert [(r.search_id, r.seconds) for r in best] == [(s2, 0.2), (s1, 0.5)]
        assert [r.seconds for r in store.best_for_workload(other.key)] == [0.01]
        assert store.best_for_workload("no-such-key") == []

    def test_lineage_root_first(self, store: Any) -> None:
        _, recs = _tree(store)
        assert store.lineage(recs["a1"].id) == [recs["root"], recs["a"], recs["a1"]]
        assert store.lineage(recs["root"].id) == [recs["root"]]

    def test_progress_one_point_per_improvement(self, store: Any) -> None:
        sid = store.create_search(make_workload(), make_config(), make_machine())
        # (tag, seconds or None for a failure), measured in insertion order.
        plan = [("p0", 1.0), ("p1", None), ("p2", 0.5), ("p3", 0.7), ("p4", 0.5), ("p5", 0.1)]
        ids = {}
        for tag, _secs in plan:
            ids[tag] = store.add_candidate(sid, make_candidate(tag)).id
        store.add_candidate(sid, make_candidate("never-measured"))
        for tag, secs in plan:
            status = Status.OK if secs is not None else Status.RUN_ERROR
            store.record_measurement(sid, make_measurement(make_candidate(tag), secs, status), None, 10.0 / (secs or 1))
        points = store.progress(sid)
        assert [(p.count, p.candidate_id, p.seconds) for p in points] == [
            (1, ids["p0"], 1.0),
            (3, ids["p2"], 0.5),
            (6, ids["p5"], 0.1),
        ]
        assert [p.speedup for p in points] == [10.0, 20.0, 100.0]
        started = store.get_search(sid).started_at
        elapsed = [p.elapsed for p in points]
        assert elapsed == sorted(elapsed) and elapsed[0] >= 0
        # No elapsed time was recorded: the wall clock since the start stands in.
        assert elapsed[-1] == store.get_candidate(ids["p5"]).measured_unix - started

    def test_progress_uses_the_searchs_elapsed_time(self, store: Any) -> None:
        sid = store.create_search(make_workload(), make_config(), make_machine())
        for tag, secs, at in (("q0", 1.0, 3.5), ("q1", 0.5, 250.0)):
            store.add_candidate(sid, make_candidate(tag))
            m = dataclasses.replace(make_measurement(make_candidate(tag), secs), measured_at=at)
            store.record_measurement(sid, m, None, None)
        assert [p.elapsed for p in store.progress(sid)] == [3.5, 250.0]

    # ---------------------------------------------------------------- the cost model's data

    def test_features_and_prediction_round_trip(self, store: Any) -> None:
        sid = store.create_search(make_workload(), make_config(), make_machine())
        vector = FeatureVector("v9-test", (1.0, 0.0, -2.5, 1e-9))
        cand = dataclasses.replace(make_candidate("root"), features=vector)
        rec = store.add_candidate(sid, cand, predicted=-0.75)
        assert (rec.features, rec.predicted) == (vector, -0.75)
        assert store.get_candidate(rec.id) == rec
        plain = store.add_candidate(sid, make_candidate("a", make_candidate("root")))
        assert (plain.features, plain.predicted) == (None, None)

    def test_model_accuracy_round_trips(self, store: Any) -> None:
        sid = store.create_search(make_workload(), make_config(), make_machine())
        assert store.get_search(sid).model_accuracy is None
        accuracy = ModelAccuracy(spearman=0.625, pairs=40, window=50, trained_on=120)
        assert store.update_search(sid, model_accuracy=accuracy).model_accuracy == accuracy
        assert store.get_search(sid).model_accuracy == accuracy
        with pytest.raises(TypeError, match="ModelAccuracy"):
            store.update_search(sid, model_accuracy={"spearman": 1.0})

    def test_training_samples_same_machine_any_workload(self, store: Any) -> None:
        import math

        here, elsewhere = make_machine(), MachineInfo(cpu_model="another cpu", cores=64)
        other_workload = Workload(
            path="/w/other.py",
            source="# other\n",
            source_sha256=sha256_text("# other\n"),
            proc="other",
            sizes=(("N", 8),),
            args=(),
        )
        plan = [(make_workload(), here, 0.5), (other_workload, here, 0.25), (make_workload(), elsewhere, 0.5)]
        for n, (workload, machine, seconds) in enumerate(plan):
            sid = store.create_search(workload, make_config(), machine)
            store.update_search(sid, baseline_seconds=1.0)
            for tag, version, secs, status in (
                (f"s{n}-ok", "v1", seconds, Status.OK),
                (f"s{n}-old", "v0", seconds, Status.OK),  # another feature version
                (f"s{n}-bad", "v1", None, Status.WRONG_RESULT),
            ):
                cand = dataclasses.replace(make_candidate(tag), features=FeatureVector(version, (float(n), 1.0)))
                store.add_candidate(sid, cand)
                store.record_measurement(sid, make_measurement(cand, secs, status), None, None)
            store.add_candidate(
                sid, dataclasses.replace(make_candidate(f"s{n}-pending"), features=FeatureVector("v1", (9.0, 9.0)))
            )
        samples = store.training_samples(here.fingerprint, "v1")
        assert [s.features.values for s in samples] == [(0.0, 1.0), (1.0, 1.0)]
        assert [s.log_ratio for s in samples] == [math.log(0.5), math.log(0.25)]
        assert [s.workload_key for s in samples] == [make_workload().key, other_workload.key]
        assert store.training_samples(here.fingerprint, "v1", limit=1) == samples[1:]
        assert store.training_samples("no-such-machine", "v1") == []

    def test_progress_of_empty_search(self, store: Any) -> None:
        sid, _ = _tree(store)
        assert store.progress(sid) == []

    # ---------------------------------------------------------------- errors

    @pytest.mark.parametrize(
        "call",
        [
            "get_search",
            "candidates",
            "top_candidates",
            "progress",
            "seen_fingerprints",
            "frontier",
            "update_search",
        ],
    )
    def test_unknown_search_is_a_store_error(self, store: Any, call: str) -> None:
        with pytest.raises(StoreError, match=r"no search 4242 in .*schedsearch list"):
            getattr(store, call)(4242)

    def test_unknown_search_on_writes(self, store: Any) -> None:
        with pytest.raises(StoreError, match="no search 77"):
            store.add_candidate(77, make_candidate("root"))
        with pytest.raises(StoreError, match="no search 77"):
            store.record_measurement(77, make_measurement(make_candidate("root"), 0.1), None, None)
        with pytest.raises(StoreError, match="no search 77"):
            store.candidate_by_fingerprint(77, "abc")

    @pytest.mark.parametrize("call", ["get_candidate", "lineage"])
    def test_unknown_candidate_is_a_store_error(self, store: Any, call: str) -> None:
        with pytest.raises(StoreError, match="no candidate 31337"):
            getattr(store, call)(31337)

    # ---------------------------------------------------------------- volume

    def test_hundreds_of_results(self, store: Any) -> None:
        sid = store.create_search(make_workload(), make_config(), make_machine())
        parent = make_candidate("n0")
        store.add_candidate(sid, parent)
        for i in range(1, 200):
            cand = make_candidate(f"n{i}", parent if i % 3 else None)
            store.add_candidate(sid, cand)
            store.record_measurement(sid, make_measurement(cand, 1.0 / i), None, None)
        assert len(store.candidates(sid)) == 200
        assert [r.seconds for r in store.top_candidates(sid, 3)] == [1 / 199, 1 / 198, 1 / 197]
        assert len(store.progress(sid)) == 199
