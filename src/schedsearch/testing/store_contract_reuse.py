"""The store contract's part on knowledge shared between searches: which earlier
measurement of the same C a new search may take instead of measuring
(``Store.reusable_measurements``), and which schedules of the same proc seed a warm start
(``Store.past_schedules``). ``StoreContract`` includes these tests; they use the same
``store`` fixture.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from schedsearch.core import (
    BenchConfig,
    ExpandOptions,
    MachineInfo,
    ReuseScope,
    SearchConfig,
    Status,
)
from schedsearch.testing.builders import (
    make_candidate,
    make_config,
    make_machine,
    make_measurement,
    make_workload,
)

#: (seconds or None, status) per tag; every tag is a child of the root.
Plan = dict[str, tuple[float | None, Status]]

_PLAN: Plan = {
    "a": (0.5, Status.OK),
    "b": (None, Status.WRONG_RESULT),
    "c": (None, Status.TIMEOUT),
    "d": (None, Status.BUILD_ERROR),
    "f": (None, Status.RUN_ERROR),
    "g": (None, Status.ILLEGAL),
    "h": (None, Status.TAMPERED),
}


def _search(
    store: Any,
    plan: Plan,
    *,
    config: SearchConfig | None = None,
    machine: MachineInfo | None = None,
    root: str = "root",
    n: int = 64,
    pending: tuple[str, ...] = ("e",),
) -> int:
    """A search whose root (measured, 1 s) has the children of ``plan`` measured as planned,
    and the ``pending`` ones never measured."""
    sid = store.create_search(make_workload(n=n), config or make_config(), machine or make_machine())
    root_candidate = make_candidate(root)
    store.add_candidate(sid, root_candidate)
    store.record_measurement(sid, make_measurement(root_candidate, 1.0), None, None)
    store.update_search(sid, baseline_seconds=1.0)
    for tag, (seconds, status) in plan.items():
        child = make_candidate(tag, root_candidate)
        store.add_candidate(sid, child)
        store.record_measurement(
            sid, make_measurement(child, seconds, status), None, 1.0 / seconds if seconds else None
        )
    for tag in pending:
        store.add_candidate(sid, make_candidate(tag, root_candidate))
    return sid


def _scope(exclude: int | None = None, config: SearchConfig | None = None) -> ReuseScope:
    return ReuseScope.of(
        config or make_config(), make_machine().fingerprint, make_candidate("root").fingerprint, exclude
    )


def _fps(*tags: str) -> list[str]:
    root = make_candidate("root")
    return [make_candidate(t, root).fingerprint for t in tags]


def _with(**changes: Any) -> SearchConfig:
    """``make_config()`` with bench or expand fields changed."""
    base = make_config()
    bench = {k: v for k, v in changes.items() if k in {f.name for f in dataclasses.fields(BenchConfig)}}
    expand = {k: v for k, v in changes.items() if k in {f.name for f in dataclasses.fields(ExpandOptions)}}
    return dataclasses.replace(
        base, bench=dataclasses.replace(base.bench, **bench), expand=dataclasses.replace(base.expand, **expand)
    )


class ReuseContract:
    """``reusable_measurements`` and ``past_schedules``. Subclasses provide a ``store`` fixture."""

    # ---------------------------------------------------------------- reuse

    def test_reusable_measurements_come_from_earlier_searches(self, store: Any) -> None:
        earlier = _search(store, _PLAN)
        asking = store.create_search(make_workload(), make_config(), make_machine())
        found = store.reusable_measurements(_fps(*"abcdefgh", "unknown"), _scope(asking))
        # ok, and the verdicts the same C always earns again; never a timeout, a crash, illegal, tampered or pending
        assert sorted(found) == sorted(_fps("a", "b", "d"))
        by_tag = dict(zip("abd", (found[fp] for fp in _fps("a", "b", "d")), strict=True))
        assert all(r.search_id == earlier for r in by_tag.values())
        assert by_tag["a"] == store.candidate_by_fingerprint(earlier, by_tag["a"].fingerprint)
        assert by_tag["a"].status is Status.OK and by_tag["a"].seconds == 0.5
        assert by_tag["b"].status is Status.WRONG_RESULT and by_tag["b"].error.startswith("wrong_result")
        assert by_tag["d"].status is Status.BUILD_ERROR
        assert store.reusable_measurements([], _scope(asking)) == {}

    def test_the_root_is_in_scope_too_and_any_size_whose_c_is_the_same(self, store: Any) -> None:
        earlier = _search(store, {}, n=128)  # another workload key, the same (fake) C
        found = store.reusable_measurements([make_candidate("root").fingerprint], _scope())
        assert [r.search_id for r in found.values()] == [earlier]

    @pytest.mark.parametrize(
        "other",
        [
            {"machine": MachineInfo(cpu_model="another cpu", cores=64)},
            {"config": _with(cflags=("-O3",))},
            {"config": _with(cc="clang")},
            {"config": _with(target="avx2")},
            {"config": _with(rtol=1e-6)},
            {"root": "another root"},  # verified against other unscheduled C
        ],
        ids=["machine", "flags", "compiler", "target", "tolerance", "reference"],
    )
    def test_measurements_made_another_way_are_not_reused(self, store: Any, other: dict[str, Any]) -> None:
        _search(store, _PLAN, **other)
        assert store.reusable_measurements(_fps(*"abcdefgh"), _scope()) == {}

    def test_the_latest_original_measurement_is_reused(self, store: Any) -> None:
        _search(store, {"a": (0.5, Status.OK)})
        latest = _search(store, {"a": (0.25, Status.OK), "b": (0.125, Status.OK)})
        # A search that took a's measurement from `latest` is not a source itself.
        copier = store.create_search(make_workload(), make_config(), make_machine())
        store.add_candidate(copier, make_candidate("root"))
        store.record_measurement(copier, make_measurement(make_candidate("root"), 1.0), None, None)
        a = make_candidate("a", make_candidate("root"))
        store.add_candidate(copier, a)
        source = store.candidate_by_fingerprint(latest, a.fingerprint)
        reused = dataclasses.replace(make_measurement(a, 0.25), reused_search_id=latest, reused_candidate_id=source.id)
        record = store.record_measurement(copier, reused, None, 4.0)
        assert (record.reused_search_id, record.reused_candidate_id) == (latest, source.id)
        assert store.get_candidate(record.id) == record
        found = store.reusable_measurements(_fps("a", "b"), _scope())
        assert found[a.fingerprint] == source and found[a.fingerprint].seconds == 0.25
        assert found[_fps("b")[0]].search_id == latest
        # Measured again later by its own search: the reuse mark goes.
        again = store.record_measurement(copier, make_measurement(a, 0.3), None, None)
        assert (again.reused_search_id, again.reused_candidate_id) == (None, None)

    def test_the_asking_search_is_left_out(self, store: Any) -> None:
        only = _search(store, _PLAN)
        assert store.reusable_measurements(_fps("a"), _scope(exclude=only)) == {}
        assert list(store.reusable_measurements(_fps("a"), _scope(exclude=only + 1))) == _fps("a")

    def test_many_fingerprints_at_once(self, store: Any) -> None:
        sid = store.create_search(make_workload(), make_config(), make_machine())
        root = make_candidate("root")
        store.add_candidate(sid, root)
        tags = [f"n{i}" for i in range(510)]  # more than one IN (...) list of the SQL store
        for i, tag in enumerate(tags):
            child = make_candidate(tag, root)
            store.add_candidate(sid, child)
            if i % 10 == 3:
                store.record_measurement(sid, make_measurement(child, 0.001 * (i + 1)), None, None)
        found = store.reusable_measurements(_fps(*tags), _scope())
        assert sorted(found) == sorted(_fps(*tags[3::10])) and len(found) == 51

    def test_best_for_workload_lists_each_c_once(self, store: Any) -> None:
        first = _search(store, {"a": (0.5, Status.OK), "b": (0.25, Status.OK)})
        second = _search(store, {"a": (0.5, Status.OK), "c": (0.75, Status.OK)})  # a again, the same time
        best = store.best_for_workload(make_workload().key, k=4)
        assert [(r.search_id, r.seconds) for r in best] == [(first, 0.25), (first, 0.5), (second, 0.75), (first, 1.0)]
        assert len(store.best_for_workload(make_workload().key, k=2)) == 2
        assert store.best_for_workload(make_workload().key, k=0) == []

    # ---------------------------------------------------------------- warm starts

    def test_past_schedules_of_the_same_source_any_size(self, store: Any) -> None:
        plan: Plan = {
            "a": (0.5, Status.OK),
            "b": (0.25, Status.OK),
            "c": (0.75, Status.OK),
            "d": (0.125, Status.OK),
            "x": (None, Status.WRONG_RESULT),
        }
        first = _search(store, plan, n=64)
        second = _search(store, {"a": (0.5, Status.OK)}, n=128)
        other_proc = store.create_search(make_workload("sgemv"), make_config(), make_machine())
        store.add_candidate(other_proc, make_candidate("root"))
        w = make_workload()
        got = store.past_schedules(w.source_sha256, w.proc, per_search=3)
        # newest search first, each one's fastest first; never the root, a failure or a pending one
        assert [(p.search_id, p.seconds) for p in got] == [(second, 0.5), (first, 0.125), (first, 0.25), (first, 0.5)]
        d = store.candidate_by_fingerprint(first, _fps("d")[0])
        assert got[1].candidate_id == d.id and got[1].schedule == d.schedule and got[1].speedup == 8.0
        assert got[0].workload_key == make_workload(n=128).key and got[0].sizes == make_workload(n=128).sizes
        assert got[0].target == make_config().expand.target
        assert store.past_schedules(w.source_sha256, w.proc, per_search=1, searches=1) == got[:1]
        assert store.past_schedules(w.source_sha256, "sgemv") == []
        assert store.past_schedules("0" * 64, w.proc) == []

    def test_past_schedules_of_one_target(self, store: Any) -> None:
        avx2 = _search(store, {"a": (0.5, Status.OK)}, config=_with(target="avx2"))
        _search(store, {"b": (0.5, Status.OK)})
        _search(store, {}, pending=("c",))  # nothing measured: does not use up a search
        w = make_workload()
        got = store.past_schedules(w.source_sha256, w.proc, target="avx2", searches=1)
        assert [(p.search_id, p.target) for p in got] == [(avx2, "avx2")]
        assert len(store.past_schedules(w.source_sha256, w.proc, searches=2)) == 2
