"""The store contract's part on queries over what is stored: the fastest candidates of a
search and of a workload, lineage, progress, the cost model's data (features, predictions,
accuracy, training samples), the errors for unknown ids, and a few hundred results.
``StoreContract`` includes these tests; they use the same ``store`` fixture.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from schedsearch.core import FeatureVector, MachineInfo, ModelAccuracy, Status, Workload, sha256_text
from schedsearch.errors import StoreError
from schedsearch.testing.builders import (
    make_candidate,
    make_config,
    make_machine,
    make_measurement,
    make_workload,
    stored_tree,
)


class QueryContract:
    """Behaviour every store must have when asked about what it holds."""

    def test_top_candidates(self, store: Any) -> None:
        sid, recs = stored_tree(store)
        times = {"root": 0.9, "a": 0.3, "b": 0.3, "a1": None}
        for tag, secs in times.items():
            status = Status.OK if secs is not None else Status.WRONG_RESULT
            store.record_measurement(sid, make_measurement(make_candidate(tag), secs, status), None, None)
        top = store.top_candidates(sid, k=10)
        assert [r.id for r in top] == [recs["a"].id, recs["b"].id, recs["root"].id]  # tie: older first
        assert [r.id for r in store.top_candidates(sid, k=1)] == [recs["a"].id]
        assert top[0] == store.get_candidate(recs["a"].id)

    def test_top_candidates_skip_pending(self, store: Any) -> None:
        sid, _ = stored_tree(store)
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
        _, recs = stored_tree(store)
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
        sid, _ = stored_tree(store)
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
