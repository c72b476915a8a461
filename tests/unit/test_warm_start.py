"""Warm starts: the best schedules of earlier searches of the same proc (other sizes) are
replayed with Exo on the new sizes; those that no longer apply are counted and skipped."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from schedsearch.core import (
    Candidate,
    ExpandOptions,
    MachineInfo,
    Measurement,
    Rewrite,
    RewriteKind,
    Schedule,
    SearchConfig,
    Status,
    Timing,
    Workload,
)
from schedsearch.store import InMemoryStore
from schedsearch.errors import ReplayError
from schedsearch.transforms import Expander, build_proc, kernel_c, load_workload, propose, root_candidate
from schedsearch.warm_start import warm_start

MATMUL = Path(__file__).resolve().parents[2] / "examples" / "matmul.py"

#: 16 divides 32; at 12 neither this split nor a variant of it (another tail) applies.
SPLIT_I16 = Rewrite.make(RewriteKind.SPLIT, "i #0", factor=16, outer="io", inner="ii", tail="perfect")
SPLIT_J4 = Rewrite.make(RewriteKind.SPLIT, "j #0", factor=4, outer="jo", inner="ji", tail="perfect")
REORDER_JK = Rewrite.make(RewriteKind.REORDER, "j k")
PARALLEL_I = Rewrite.make(RewriteKind.PARALLELIZE, "i #0")
REORDER_KJ = Rewrite.make(RewriteKind.REORDER, "k j")  # after REORDER_JK: the unscheduled C again

OPTIONS = ExpandOptions(target="scalar")


def sgemm(n: int) -> Workload:
    return load_workload(MATMUL, "sgemm", {"M": n, "N": n, "K": n})


def _record_search(store: InMemoryStore, workload: Workload, schedules: dict[Schedule, float],
                   target: str = "scalar") -> int:
    """An earlier search of ``workload`` that measured each schedule at the given seconds
    (each schedule applies there; its stored fingerprint is made up, warm starts replay)."""
    config = SearchConfig(expand=ExpandOptions(target=target))
    sid = store.create_search(workload, config, MachineInfo(cpu_model="cpu"))
    root = root_candidate(workload)
    store.add_candidate(sid, root)
    store.record_measurement(sid, _ok(root, 1e-3), None, 1.0)
    for schedule, seconds in schedules.items():
        c = kernel_c(build_proc(workload, schedule))
        child = Candidate(schedule, c, f"fp-{sid}-{schedule.dumps()}", "proc", parent=root.fingerprint,
                          depth=len(schedule))
        store.add_candidate(sid, child)
        store.record_measurement(sid, _ok(child, seconds), None, 1e-3 / seconds)
    return sid


def _ok(candidate: Candidate, seconds: float) -> Measurement:
    return Measurement(candidate.fingerprint, Status.OK, Timing(seconds, seconds, seconds, seconds))


@pytest.fixture(scope="module")
def earlier() -> tuple[InMemoryStore, int]:
    store = InMemoryStore()
    sid = _record_search(store, sgemm(32), {
        Schedule((SPLIT_I16,)): 1e-4,  # the fastest, and it no longer applies at 12
        Schedule((REORDER_JK, SPLIT_J4)): 2e-4,
        Schedule((REORDER_JK,)): 4e-4,
    })
    return store, sid


def test_schedules_of_other_sizes_replay_and_those_that_no_longer_apply_are_skipped(earlier) -> None:
    store, sid = earlier
    workload = sgemm(12)
    root = root_candidate(workload)
    warm = warm_start(store, workload, root, OPTIONS)
    assert [p.schedule for p in warm.sources] == [Schedule((REORDER_JK, SPLIT_J4)), Schedule((REORDER_JK,))]
    assert [s.schedule for s in warm.seeds] == [p.schedule for p in warm.sources]
    assert all(p.search_id == sid and p.sizes == (("M", 32), ("N", 32), ("K", 32)) for p in warm.sources)
    # Each seed is this workload's own candidate: its C and fingerprint at 12, its depth its length.
    expander = Expander(workload, OPTIONS)
    for seed in warm.seeds:
        assert seed == expander.candidate(seed.schedule)
        assert seed.depth == len(seed.schedule) and seed.parent is None
        assert seed.fingerprint != root.fingerprint and seed.features is not None
    [skipped] = warm.skipped
    assert skipped.past.schedule == Schedule((SPLIT_I16,))
    assert "step 0" in skipped.reason and "split i #0" in skipped.reason
    assert (warm.duplicates, warm.left_out, warm.considered) == (0, 0, 3)
    lines = warm.summary()
    assert lines[0] == f"warm start: 3 schedules from search {sid}: 2 replay here, 1 no longer applies"
    assert lines[1].startswith(
        f"  skipped candidate {skipped.past.candidate_id} of search {sid} (M=32,N=32,K=32): step 0")
    data = warm.to_json()
    assert [s["reason"] for s in data["skipped"]] == [skipped.reason]
    assert data["seeds"][0] == {"search_id": sid, "candidate_id": warm.sources[0].candidate_id,
                                "sizes": {"M": 32, "N": 32, "K": 32}}


def test_the_same_sizes_replay_everything(earlier) -> None:
    store, _ = earlier
    warm = warm_start(store, sgemm(32), root_candidate(sgemm(32)), OPTIONS)
    assert len(warm.seeds) == 3 and not warm.skipped
    assert warm.sources[0].schedule == Schedule((SPLIT_I16,))  # most speedup first


def test_other_targets_other_procs_and_parallel_loops_are_left_out() -> None:
    store = InMemoryStore()
    _record_search(store, sgemm(16), {Schedule((REORDER_JK,)): 1e-4}, target="avx2")
    _record_search(store, sgemm(16), {Schedule((PARALLEL_I,)): 1e-4})
    workload = sgemm(8)
    warm = warm_start(store, workload, root_candidate(workload), OPTIONS)
    assert warm.seeds == () and [s.reason for s in warm.skipped] == [
        "uses OpenMP loops; search with --threads N to try it"]
    other_proc = dataclasses.replace(workload, proc="matmul_i8", sizes=())
    assert warm_start(store, other_proc, root_candidate(workload), OPTIONS).considered == 0


def test_duplicates_and_the_time_limit() -> None:
    store = InMemoryStore()
    _record_search(store, sgemm(16), {Schedule((REORDER_JK, REORDER_KJ)): 1e-4, Schedule((REORDER_JK,)): 2e-4,
                                      Schedule((SPLIT_J4,)): 3e-4})
    workload = sgemm(8)
    warm = warm_start(store, workload, root_candidate(workload), OPTIONS)
    assert (len(warm.seeds), warm.duplicates) == (2, 1)
    ticks = iter(range(100))
    slow = warm_start(store, workload, root_candidate(workload), OPTIONS, seconds=2.5, clock=lambda: next(ticks))
    assert (len(slow.seeds) + slow.duplicates, slow.left_out) == (2, 1)
    assert "1 not replayed (out of time)" in slow.summary()[0]
    assert warm_start(store, workload, root_candidate(workload), OPTIONS, max_seeds=1).considered == 1


def test_a_step_whose_size_derived_arguments_changed_is_adapted() -> None:
    """A register tile with a row tail records its rows loop's trip count: at another M it
    is replayed as the tile proposed there, the same in everything but that count."""
    options = ExpandOptions(target="avx2")
    recorded_at = load_workload(MATMUL, "sgemm", {"M": 50, "N": 48, "K": 16})
    tiles = [r for r in propose(build_proc(recorded_at), options)
             if r.kind is RewriteKind.REGISTER_TILE and r.arg("trip") % r.arg("rows")]
    assert tiles, "expected a register tile with a row tail at M=50"
    tile = tiles[0]
    here = load_workload(MATMUL, "sgemm", {"M": 98, "N": 48, "K": 16})
    seed = Expander(here, options).adapt(Schedule((tile,)))
    [step] = seed.schedule.steps
    assert step.arg("trip") == 98
    assert {k: v for k, v in step.args if k not in ("trip", "names", "tail_names")} == \
        {k: v for k, v in tile.args if k not in ("trip", "names", "tail_names")}
    assert seed.fingerprint != root_candidate(here).fingerprint
    with pytest.raises(ReplayError):  # as recorded, the step no longer applies at M=98
        Expander(here, options).candidate(Schedule((tile,)))
