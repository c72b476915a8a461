"""A resumed search builds nothing a stored row holds: the rows it builds are rebuilt from
their schedules (``search.inherited``), and rows whose schedule does not give their C are
marked tampered and never used. Fake tree and executor: no exo, cc or sql."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from schedsearch.core import (
    Candidate,
    Job,
    JobKind,
    Measurement,
    Rewrite,
    RewriteKind,
    Schedule,
    SearchConfig,
    SearchStatus,
    Status,
    Timing,
    Workload,
    sha256_text,
)
from schedsearch.search import make_strategy, rebuild_inherited, run_search
from schedsearch.store import InMemoryStore
from schedsearch.testing.fake_executor import FakeExecutor
from schedsearch.testing.fake_tree import FakeTree, fake_inherited, fake_replay, fake_root, fake_workload

EVIL = "__attribute__((constructor)) static void evil(void) { system(\"touch /tmp/x\"); }\n"


class Watching(FakeExecutor):
    """A fake executor that keeps the C of everything it is asked to build or expand."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.built: list[str] = []
        self.parents: list[Candidate] = []

    def submit(self, workload: Workload, reference: Candidate, jobs: Sequence[Job]) -> None:
        for job in jobs:
            if job.kind is JobKind.EXPAND:
                self.parents += job.candidates
            else:
                self.built += [c.c_source for c in job.candidates]
        super().submit(workload, reference, jobs)


def config(**kw) -> SearchConfig:
    kw.setdefault("max_seconds", None)
    return SearchConfig(**kw)


def interrupted(store: InMemoryStore, after: int = 12) -> int:
    """A search stopped mid-round (pending rows left behind); its id."""
    stop = threading.Event()
    first = FakeExecutor(FakeTree(failure_rate=0.0), shuffle_seed=4)
    first.on_evaluate = lambda c: stop.set() if len(first.evaluated) >= after else None
    cfg = config(max_candidates=40)
    outcome = run_search(fake_workload(), fake_root(), make_strategy(cfg), first, store, cfg, stop=stop)
    assert outcome.status is SearchStatus.INTERRUPTED
    assert any(r.status is Status.PENDING for r in store.candidates(outcome.search_id))
    return outcome.search_id


def forge(store: InMemoryStore, sid: int, moves: tuple[str, ...], seconds: float | None) -> int:
    """A row someone wrote into the database: a real schedule of the tree, hostile C (its
    fingerprint is that C's), pending or with a forged time; its id."""
    schedule = Schedule(tuple(Rewrite.make(RewriteKind.SPLIT, m) for m in moves))
    c_source = EVIL + "/* " + ",".join(moves) + " */"
    evil = Candidate(schedule, c_source, sha256_text(c_source), "forged", parent=fake_root().fingerprint,
                     depth=len(moves))
    record = store.add_candidate(sid, evil)
    if seconds is not None:
        timing = Timing(seconds, seconds, seconds, seconds, (seconds,) * 3)
        record = store.record_measurement(sid, Measurement(evil.fingerprint, Status.OK, timing=timing), None, 1e6)
    return record.id


def test_forged_rows_are_marked_tampered_never_built_nor_best() -> None:
    store = InMemoryStore()
    sid = interrupted(store)
    pending_id = forge(store, sid, ("m7", "m8", "m9"), None)
    fast_id = forge(store, sid, ("m6", "m9"), 1e-12)  # faster than anything: the first finalist
    cfg = config(max_candidates=60)
    inherited = fake_inherited(store, sid, cfg)
    assert set(inherited.tampered) == {pending_id, fast_id}
    ex = Watching(FakeTree(failure_rate=0.0), shuffle_seed=4)
    outcome = run_search(fake_workload(), fake_root(), make_strategy(cfg), ex, store, cfg, search_id=sid,
                         inherited=inherited)
    assert outcome.status is SearchStatus.COMPLETED
    assert ex.built and not any("constructor" in c for c in ex.built)
    assert not any("constructor" in p.c_source for p in ex.parents)
    for rid in (pending_id, fast_id):
        row = store.get_candidate(rid)
        assert row.status is Status.TAMPERED and row.timing is None and "replays to C" in row.error
        assert row.fingerprint not in ex.evaluated and all(row.fingerprint not in r for r in ex.remeasured)
    assert outcome.best is not None and outcome.best.id not in (pending_id, fast_id)
    assert store.get_search(sid).best_candidate_id not in (pending_id, fast_id)
    assert all(r.id not in (pending_id, fast_id) for r in store.top_candidates(sid, 100))


def test_the_pending_rows_are_measured_from_their_replayed_schedules() -> None:
    store = InMemoryStore()
    sid = interrupted(store)
    pending = {r.fingerprint for r in store.candidates(sid) if r.status is Status.PENDING}
    cfg = config(max_candidates=60)
    ex = Watching(FakeTree(failure_rate=0.0), shuffle_seed=4)
    run_search(fake_workload(), fake_root(), make_strategy(cfg), ex, store, cfg, search_id=sid,
               inherited=fake_inherited(store, sid, cfg))
    assert pending <= set(ex.evaluated)
    assert not any(r.status is Status.TAMPERED for r in store.candidates(sid))


def test_without_rebuilt_rows_a_resume_builds_nothing_an_earlier_run_stored() -> None:
    store = InMemoryStore()
    sid = interrupted(store)
    earlier = {r.fingerprint for r in store.candidates(sid)} - {fake_root().fingerprint}
    cfg = config(max_candidates=60)
    ex = Watching(FakeTree(failure_rate=0.0), shuffle_seed=4)
    outcome = run_search(fake_workload(), fake_root(), make_strategy(cfg), ex, store, cfg, search_id=sid)
    assert outcome.status is SearchStatus.COMPLETED
    assert not earlier & set(ex.evaluated)
    assert not any(earlier & set(r) for r in ex.remeasured)
    # Parents of earlier runs are expanded from their schedules alone.
    assert all(p.c_source == "" for p in ex.parents if p.fingerprint in earlier)


def test_only_the_rows_a_resume_will_build_are_replayed() -> None:
    store = InMemoryStore()
    cfg = config(max_candidates=80, finalists=3)
    first = FakeExecutor(FakeTree(failure_rate=0.0, moves=9), shuffle_seed=2)
    done = run_search(fake_workload(), fake_root(), make_strategy(cfg), first, store, cfg)
    records = store.candidates(done.search_id)
    pending = [r for r in records if r.status is Status.PENDING]
    assert len(pending) >= 2
    replayed: list[Schedule] = []

    def counting(schedule: Schedule) -> Candidate:
        replayed.append(schedule)
        return fake_replay(schedule)

    # Resumed for one more candidate: the fastest, their ancestors and the first pending row.
    more = config(max_candidates=done.counters.measured + 1, finalists=3)
    inherited = rebuild_inherited(store, done.search_id, fake_root(), more, counting)
    fastest = [r for r in store.top_candidates(done.search_id, 3) if r.parent_id is not None]
    ancestors = {r.id for f in fastest for r in store.lineage(f.id)[1:-1]}
    assert set(inherited.rebuilt) == {r.id for r in fastest} | ancestors | {pending[0].id}
    assert inherited.left == len(pending) - 1 and "pending left for a later run" in inherited.summary()[0]
    assert len(replayed) == len(inherited.rebuilt) < len(records) / 4
    assert not inherited.tampered
    # Within a quarter of the time budget left (8 s more: 2 s), one second a look at the clock.
    ticks = iter(range(100))
    timed = config(max_seconds=store.get_search(done.search_id).elapsed_seconds + 8.0, finalists=3)
    inherited = rebuild_inherited(store, done.search_id, fake_root(), timed, fake_replay, clock=lambda: next(ticks))
    assert inherited.left == len(pending) - 1


def test_a_schedule_that_does_not_replay_is_tampered() -> None:
    store = InMemoryStore()
    sid = interrupted(store)
    row = next(r for r in store.candidates(sid) if r.status is Status.PENDING)

    def failing(schedule: Schedule) -> Candidate:
        if schedule == row.schedule:
            raise ValueError("step 0 (split m1)\ndoes not apply")
        return fake_replay(schedule)

    inherited = rebuild_inherited(store, sid, fake_root(), config(), failing)
    assert inherited.tampered[row.id] == "its schedule does not replay: step 0 (split m1) does not apply"
    assert any("tampered" in line for line in inherited.summary())


def test_a_row_whose_c_does_not_hash_to_its_fingerprint_is_tampered_without_a_replay() -> None:
    store = InMemoryStore()
    sid = interrupted(store)
    genuine = fake_replay(Schedule((Rewrite.make(RewriteKind.SPLIT, "m8"),)))
    edited = Candidate(genuine.schedule, EVIL, genuine.fingerprint, "edited", parent=fake_root().fingerprint, depth=1)
    assert store.candidate_by_fingerprint(sid, genuine.fingerprint) is None  # m8: beyond the tree's moves
    row = store.add_candidate(sid, edited)
    replayed: list[Schedule] = []

    def counting(schedule: Schedule) -> Candidate:
        replayed.append(schedule)
        return fake_replay(schedule)

    inherited = rebuild_inherited(store, sid, fake_root(), config(max_candidates=100), counting)
    assert "does not hash to its fingerprint" in inherited.tampered[row.id]
    assert row.id not in inherited.rebuilt and genuine.schedule not in replayed
