"""Opening an older database upgrades it in place, after a backup: schema version 1
(tests/data/db/schema_v1.db, a small simulated search written by the first schedsearch
schema), version 3 (schema_v3.db: the same database as the version 3 schedsearch left it)
version 4 (schema_v4.db: that one opened by the version 4 schedsearch, which then ran a
second search of two candidates, its root measured and one measurement reused from search 1)
and version 5 (schema_v5.db: that one opened by the version 5 schedsearch, which recorded a
third search, its root measured beside a yardstick (a pairing no longer read), left ``running`` as a killed driver
leaves it) and version 6 (schema_v6.db: that one opened by the version 6 schedsearch, which
took the third search's lease, measured its root again and completed it)."""

from __future__ import annotations

import dataclasses
import shutil
import sqlite3
from pathlib import Path

import pytest

from schedsearch.core import LeaseOwner, LeaseState, Measurement, ReuseScope, SearchStatus, Status
from schedsearch.store import SCHEMA_VERSION, SqlStore
from schedsearch.testing.fake_executor import FakeExecutor
from schedsearch.testing.fake_tree import fake_root, fake_workload

V1 = Path(__file__).resolve().parents[1] / "data" / "db" / "schema_v1.db"
V3 = V1.with_name("schema_v3.db")
V4 = V1.with_name("schema_v4.db")
V5 = V1.with_name("schema_v5.db")
V6 = V1.with_name("schema_v6.db")


def _version(path: Path) -> int:
    with sqlite3.connect(path) as raw:
        return raw.execute("SELECT version FROM schema_info").fetchone()[0]


@pytest.fixture
def old_db(tmp_path: Path) -> Path:
    path = tmp_path / "old.db"
    shutil.copyfile(V1, path)
    assert _version(path) == 1
    return path


def _dump(path: Path) -> list[str]:
    with sqlite3.connect(path) as raw:
        return list(raw.iterdump())


def test_a_version_1_database_opens_upgraded_with_a_backup(old_db: Path) -> None:
    before = _dump(old_db)
    store = SqlStore(f"sqlite:///{old_db}", create=False)
    try:
        search = store.get_search(1)
        records = store.candidates(1)
        measured = [r for r in records if r.status is not Status.PENDING]
        assert search.counters.evaluated == len(measured) == 12
        assert search.model_accuracy is None
        # The unix time moved to measured_unix; measured_at is now seconds into the search.
        for r in measured:
            assert r.measured_unix is not None and r.measured_unix > 1e9
            assert r.measured_at == pytest.approx(r.measured_unix - search.started_at)
            assert 0 <= r.measured_at < 600
            assert r.features is None and r.predicted is None
            assert r.reused_search_id is None and r.reused_candidate_id is None
        assert store.progress(1)[-1].elapsed == pytest.approx(
            store.get_candidate(store.progress(1)[-1].candidate_id).measured_at)
        # It takes new searches with the new columns.
        sid = store.create_search(fake_workload(), search.config, FakeExecutor().machine())
        rec = store.add_candidate(sid, fake_root(), predicted=0.0)
        assert rec.predicted == 0.0
    finally:
        store.close()
    assert _version(old_db) == SCHEMA_VERSION
    backup = old_db.with_name("old.db.v1.bak")
    assert _dump(backup) == before and _version(backup) == 1
    # A second open finds nothing to do.
    SqlStore(f"sqlite:///{old_db}", create=False).close()
    assert not old_db.with_name("old.db.v2.bak").exists()


def test_the_fixtures_themselves_are_never_changed() -> None:
    assert (_version(V1), _version(V3), _version(V4), _version(V5), _version(V6)) == (1, 3, 4, 5, 6)


def _indexes(path: Path) -> set[str]:
    with sqlite3.connect(path) as raw:
        return {row[0] for row in raw.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}


def test_a_version_3_database_opens_upgraded_with_a_backup(tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    shutil.copyfile(V3, path)
    before = _dump(path)
    assert "ix_candidates_fingerprint" not in _indexes(path)
    store = SqlStore(f"sqlite:///{path}", create=False)
    try:
        search = store.get_search(1)
        records = store.candidates(1)
        assert len(records) == 16 and all(r.reused_candidate_id is None for r in records)
        # Its measurements are original ones, reusable by a new search measuring the same way.
        root = next(r for r in records if r.parent_id is None)
        scope = ReuseScope.of(search.config, search.machine.fingerprint, root.fingerprint)
        found = store.reusable_measurements([r.fingerprint for r in records], scope)
        assert sorted(r.id for r in found.values()) == sorted(
            r.id for r in records if r.status in (Status.OK, Status.WRONG_RESULT))
        # A new search records where a reused measurement came from.
        sid = store.create_search(search.workload, search.config, search.machine)
        new_root = fake_root()
        store.add_candidate(sid, new_root)
        source = found[root.fingerprint]
        m = Measurement(new_root.fingerprint, Status.OK, source.timing, reused_search_id=1,
                        reused_candidate_id=source.id)
        rec = store.record_measurement(sid, m, None, None)
        assert (rec.reused_search_id, rec.reused_candidate_id) == (1, source.id)
    finally:
        store.close()
    assert _version(path) == SCHEMA_VERSION
    assert "ix_candidates_fingerprint" in _indexes(path)
    backup = path.with_name("v3.db.v3.bak")
    assert _dump(backup) == before and _version(backup) == 3
    # The upgraded tables are the ones a new database gets.
    fresh = tmp_path / "fresh.db"
    SqlStore(f"sqlite:///{fresh}").close()
    assert _columns(path) == _columns(fresh) and _indexes(path) == _indexes(fresh)


def test_a_version_4_database_opens_upgraded_with_a_backup(tmp_path: Path) -> None:
    path = tmp_path / "v4.db"
    shutil.copyfile(V4, path)
    before = _dump(path)
    store = SqlStore(f"sqlite:///{path}", create=False)
    try:
        assert [s.id for s in store.list_searches()] == [1, 2]
        first, second = store.candidates(1), store.candidates(2)
        assert len(first) == 16 and len(second) == 2
        # Every row is kept as it was, the version 4 columns included.
        reused = second[1]
        assert (reused.reused_search_id, reused.reused_candidate_id) == (1, first[1].id)
        assert reused.timing == first[1].timing and reused.status is Status.OK
        assert store.get_search(2).best_candidate_id == reused.id
        # A new search records its measurements.
        search = store.get_search(1)
        sid = store.create_search(search.workload, search.config, search.machine)
        new_root = fake_root()
        store.add_candidate(sid, new_root)
        rec = store.record_measurement(sid, Measurement(new_root.fingerprint, Status.OK, first[1].timing), None, None)
        assert rec.timing == first[1].timing and store.get_candidate(rec.id) == rec
    finally:
        store.close()
    assert _version(path) == SCHEMA_VERSION
    with sqlite3.connect(path) as raw:  # old rows hold SQL NULL (measured alone), not JSON 'null'
        assert raw.execute("SELECT count(*) FROM candidates WHERE paired IS NULL").fetchone()[0] == 19
    backup = path.with_name("v4.db.v4.bak")
    assert _dump(backup) == before and _version(backup) == 4
    fresh = tmp_path / "fresh.db"
    SqlStore(f"sqlite:///{fresh}").close()
    assert _columns(path) == _columns(fresh) and _indexes(path) == _indexes(fresh)


def test_a_version_5_database_opens_upgraded_with_a_backup(tmp_path: Path) -> None:
    path = tmp_path / "v5.db"
    shutil.copyfile(V5, path)
    before = _dump(path)
    store = SqlStore(f"sqlite:///{path}", create=False)
    try:
        searches = store.list_searches()
        assert [(s.id, s.status) for s in searches] == [
            (1, SearchStatus.COMPLETED), (2, SearchStatus.COMPLETED), (3, SearchStatus.RUNNING)]
        assert [len(store.candidates(s.id)) for s in searches] == [16, 2, 1]
        third = store.candidates(3)[0]
        # Its root was timed beside a yardstick: it reads with the time it was stored with, and
        # the pair stays in its column, unread.
        assert third.status is Status.OK and third.timing is not None and third.timing.median > 0
        with sqlite3.connect(path) as raw:
            kept = raw.execute("SELECT json_extract(paired, '$.fingerprint') FROM candidates WHERE search_id = 3")
            assert kept.fetchall() == [(store.candidates(1)[0].fingerprint,)]
        # No old search is leased: the one an older schedsearch left running can be resumed.
        assert [store.lease(s.id) for s in searches] == [None, None, None]
        owner = LeaseOwner.here()
        grant = store.acquire_lease(3, owner)
        assert grant.found is LeaseState.FREE and store.lease(3) == grant.lease
        store.record_measurement(3, dataclasses.replace(
            Measurement(third.fingerprint, Status.OK, third.timing), measured_at=2.0), None, None)
        assert store.release_lease(3, owner) and store.lease(3) is None
    finally:
        store.close()
    assert _version(path) == SCHEMA_VERSION
    backup = path.with_name("v5.db.v5.bak")
    assert _dump(backup) == before and _version(backup) == 5
    fresh = tmp_path / "fresh.db"
    SqlStore(f"sqlite:///{fresh}").close()
    assert _columns(path) == _columns(fresh) and _indexes(path) == _indexes(fresh)


def test_a_version_6_database_opens_upgraded_with_a_backup(tmp_path: Path) -> None:
    path = tmp_path / "v6.db"
    shutil.copyfile(V6, path)
    before = _dump(path)
    store = SqlStore(f"sqlite:///{path}", create=False)
    try:
        searches = store.list_searches()
        assert [(s.id, s.status) for s in searches] == [
            (1, SearchStatus.COMPLETED), (2, SearchStatus.COMPLETED), (3, SearchStatus.COMPLETED)]
        old = [r for s in searches for r in store.candidates(s.id)]
        assert len(old) == 19
        # Old rows do not say where they were measured: the search's machine, no node.
        assert all((r.machine, r.node, r.built_node) == (None, "", "") for r in old)
        # A new measurement records the node that timed it, the one that built it and its machine.
        search = store.get_search(1)
        sid = store.create_search(search.workload, search.config, search.machine)
        new_root = fake_root()
        store.add_candidate(sid, new_root)
        machine = dataclasses.replace(search.machine, hostname="node-b")
        m = Measurement(new_root.fingerprint, Status.OK, old[1].timing, machine=machine, node="b" * 56,
                        built_node="b" * 56)
        rec = store.record_measurement(sid, m, None, None)
        assert (rec.machine, rec.node, rec.built_node) == (machine, "b" * 56, "b" * 56)
        assert store.get_candidate(rec.id) == rec
    finally:
        store.close()
    assert _version(path) == SCHEMA_VERSION == 7
    with sqlite3.connect(path) as raw:  # old rows hold SQL NULL, not JSON 'null'
        assert raw.execute("SELECT count(*) FROM candidates WHERE machine IS NULL AND node IS NULL").fetchone()[0] == 19
        assert raw.execute("SELECT machine_fingerprint FROM candidates WHERE node IS NOT NULL").fetchall() == [
            (machine.fingerprint,)]
    backup = path.with_name("v6.db.v6.bak")
    assert _dump(backup) == before and _version(backup) == 6
    fresh = tmp_path / "fresh.db"
    SqlStore(f"sqlite:///{fresh}").close()
    assert _columns(path) == _columns(fresh) and _indexes(path) == _indexes(fresh)


def _columns(path: Path) -> dict[str, set[str]]:
    with sqlite3.connect(path) as raw:
        tables = [row[0] for row in raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {t: {row[1] for row in raw.execute(f"PRAGMA table_info({t})")} for t in tables}


def test_a_read_command_upgrades_an_old_database_it_may_write(old_db: Path) -> None:
    from schedsearch.store import open_store

    store = open_store(str(old_db), create=False, read_only=True)
    try:
        searches = store.list_searches()
        assert searches and all(s.failure == "" for s in searches)
    finally:
        store.close()
    assert _version(old_db) == SCHEMA_VERSION
    assert old_db.with_name("old.db.v1.bak").exists()
