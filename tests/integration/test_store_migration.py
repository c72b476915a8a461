"""Opening a schema version 1 database (tests/data/db/schema_v1.db, a small simulated search
written by the first schedsearch schema) upgrades it in place, after a backup."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from schedsearch.core import Status
from schedsearch.store import SCHEMA_VERSION, SqlStore
from schedsearch.testing.fakes import FakeExecutor, fake_root, fake_workload

V1 = Path(__file__).resolve().parents[1] / "data" / "db" / "schema_v1.db"


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


def test_the_fixture_itself_is_never_changed() -> None:
    assert _version(V1) == 1


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
