"""SqlStore on real SQLite files: the contract, persistence, safety of foreign files, WAL readers."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from schedsearch.errors import StoreError
from schedsearch.store import DEFAULT_DB, SCHEMA_VERSION, InMemoryStore, SqlStore, open_store
from schedsearch.testing.store_contract import (
    StoreContract,
    make_candidate,
    make_config,
    make_machine,
    make_measurement,
    make_workload,
)


class TestSqliteStore(StoreContract):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[SqlStore]:
        s = SqlStore(f"sqlite:///{tmp_path / 'contract.db'}")
        yield s
        s.close()

    @pytest.fixture
    def second(self, store: SqlStore, tmp_path: Path) -> Iterator[SqlStore]:
        s = SqlStore(f"sqlite:///{tmp_path / 'contract.db'}", create=False)
        yield s
        s.close()


def _fill(store: SqlStore | InMemoryStore) -> int:
    sid = store.create_search(make_workload(), make_config(), make_machine())
    root = make_candidate("root")
    store.add_candidate(sid, root)
    store.record_measurement(sid, make_measurement(root, 0.01), 5.0, 1.0)
    for i in range(5):
        child = make_candidate(f"c{i}", root)
        store.add_candidate(sid, child)
        store.record_measurement(sid, make_measurement(child, 0.01 / (i + 2)), 10.0 * i, float(i + 2))
    store.mark_expanded(sid, 1)
    store.update_search(sid, baseline_seconds=0.01, best_candidate_id=6, elapsed_seconds=3.5)
    return sid


def _snapshot(store: SqlStore, sid: int) -> tuple:
    return (
        store.get_search(sid),
        store.candidates(sid),
        store.top_candidates(sid),
        store.progress(sid),
        store.frontier(sid),
        store.lineage(6),
    )


# --------------------------------------------------------------------------- persistence


def test_reopen_keeps_everything(tmp_path: Path) -> None:
    path = tmp_path / "results.db"
    store = open_store(str(path))
    sid = _fill(store)
    before = _snapshot(store, sid)
    store.close()
    again = open_store(str(path), create=False)
    assert _snapshot(again, sid) == before
    assert len(before[1]) == 6 and before[0].best_candidate_id == 6
    again.close()


def test_file_is_in_wal_mode_with_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "wal.db"
    store = open_store(str(path))
    _fill(store)
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert raw.execute("SELECT version FROM schema_info").fetchall() == [(SCHEMA_VERSION,)]
        tables = {r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"workloads", "searches", "candidates", "schema_info"} <= tables
    store.close()


def test_a_pair_an_older_version_stored_is_kept_unread_until_the_row_is_measured_again(tmp_path: Path) -> None:
    path = tmp_path / "paired.db"
    store = open_store(str(path))
    sid = store.create_search(make_workload(), make_config(), make_machine())
    root = make_candidate("root")
    store.add_candidate(sid, root)
    first = store.record_measurement(sid, make_measurement(root, 0.125), None, None)
    with sqlite3.connect(path) as raw:  # as an older version wrote a measurement timed beside a yardstick
        raw.execute("""UPDATE candidates SET paired = '{"fingerprint": "y", "timing": null, "seconds": 0.25}'""")
    assert store.get_candidate(first.id) == first  # read as ever: the time it was stored with
    store.record_measurement(sid, make_measurement(root, 0.0625), None, None)
    store.close()
    # The pair described the times a new measurement replaced: SQL NULL, not the JSON text 'null'.
    with sqlite3.connect(path) as raw:
        assert raw.execute("SELECT paired IS NULL FROM candidates").fetchall() == [(1,)]


def test_open_store_dispatch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    default = open_store()
    assert isinstance(default, SqlStore) and (tmp_path / DEFAULT_DB).exists()
    default.close()
    by_url = open_store(f"sqlite:///{tmp_path / 'u.db'}")
    assert isinstance(by_url, SqlStore) and (tmp_path / "u.db").exists()
    by_url.close()
    spaced = open_store(str(tmp_path / "with space.db"))
    assert spaced.where == str(tmp_path / "with space.db")
    spaced.close()


# --------------------------------------------------------------------------- refusing files


def _refuses_unchanged(path: Path, match: str, *, create: bool) -> None:
    before = path.read_bytes()
    names = sorted(os.listdir(path.parent))
    with pytest.raises(StoreError, match=match) as info:
        open_store(str(path), create=create)
    assert path.read_bytes() == before
    assert sorted(os.listdir(path.parent)) == names  # no -wal / -shm / journal left behind
    message = str(info.value)
    assert str(path) in message and "\n" not in message


@pytest.mark.parametrize("create", [True, False])
def test_random_bytes_are_refused_untouched(tmp_path: Path, create: bool) -> None:
    path = tmp_path / "noise.db"
    path.write_bytes(os.urandom(8192))
    _refuses_unchanged(path, "is not an SQLite database", create=create)


@pytest.mark.parametrize("create", [True, False])
def test_corrupt_database_is_refused_untouched(tmp_path: Path, create: bool) -> None:
    path = tmp_path / "corrupt.db"
    path.write_bytes(b"SQLite format 3\x00" + os.urandom(8192))
    _refuses_unchanged(path, "cannot be read as an SQLite database", create=create)


@pytest.mark.parametrize("create", [True, False])
def test_text_file_is_refused_untouched(tmp_path: Path, create: bool) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("these are my notes, not a database\n" * 20)
    _refuses_unchanged(path, "is not an SQLite database", create=create)


def test_newer_schema_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    store = open_store(str(path))
    _fill(store)
    store.close()
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE schema_info SET version = ?", (SCHEMA_VERSION + 1,))
    raw.close()
    _refuses_unchanged(path, rf"schema version {SCHEMA_VERSION + 1}.*upgrade schedsearch", create=False)
    _refuses_unchanged(path, rf"schema version {SCHEMA_VERSION + 1}", create=True)


def test_garbled_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "odd.db"
    open_store(str(path)).close()
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE schema_info SET version = 'seven'")
    raw.close()
    _refuses_unchanged(path, "unreadable schema version", create=True)


def test_someone_elses_database_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "theirs.db"
    with sqlite3.connect(path) as raw:
        raw.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
        raw.execute("INSERT INTO invoices VALUES (1, 9.5)")
    raw.close()
    _refuses_unchanged(path, "not a schedsearch one.*invoices", create=True)


@pytest.mark.parametrize("make_empty", ["zero-bytes", "sqlite-no-tables"])
def test_empty_database_is_adopted(tmp_path: Path, make_empty: str) -> None:
    path = tmp_path / "empty.db"
    if make_empty == "zero-bytes":
        path.write_bytes(b"")
    else:
        sqlite3.connect(path).execute("PRAGMA user_version = 0").connection.close()
        with sqlite3.connect(path) as raw:
            raw.execute("VACUUM")
        raw.close()
    store = open_store(str(path))
    assert _fill(store) == 1
    store.close()


def test_missing_file_for_reading(tmp_path: Path) -> None:
    path = tmp_path / "typo.db"
    with pytest.raises(StoreError, match=f"no results database at {path}"):
        open_store(str(path), create=False)
    assert not path.exists()


def test_empty_database_for_reading(tmp_path: Path) -> None:
    path = tmp_path / "blank.db"
    path.write_bytes(b"")
    with pytest.raises(StoreError, match="holds no schedsearch results"):
        open_store(str(path), create=False)
    assert path.read_bytes() == b""


def test_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="does not exist"):
        open_store(str(tmp_path / "nope" / "x.db"))


def test_unknown_search_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "named.db"
    store = open_store(str(path))
    with pytest.raises(StoreError, match=f"no search 7 in {path}; `schedsearch list` shows the searches"):
        store.get_search(7)
    store.close()


# --------------------------------------------------------------------------- concurrent reader

#: Rows the writer commits per step, and the number of steps. Each step is paced by the
#: reader's signals, never by a sleep: the test holds on a fast or a slow, busy or quiet machine.
BATCH, ROUNDS = 20, 6
#: How long either side waits for the other's signal before calling the run broken. Only a
#: hung or blocked peer reaches it; a healthy run never waits on it.
SIGNAL_TIMEOUT = 120.0


def _reader(path: str, conn) -> None:
    """Read from another process while the writer commits, like a notebook would.

    Each round: the writer has committed up to ``n`` rows; this side checks that a store
    read sees exactly ``n``, opens a raw read transaction (a slow pandas query), and tells
    the writer it holds the snapshot. The writer commits another batch *while* the snapshot
    is held and reports the new total; inside the transaction the count must not have moved,
    and after it ends the new rows must be visible. Then it tells the writer to go on. The
    report (or the first error) is sent back to the parent.
    """
    errors: list[str] = []
    seen: list[int] = []
    try:
        store = open_store(path, create=False)
        raw = sqlite3.connect(path, isolation_level=None)
        conn.send("ready")
        for _ in range(ROUNDS):
            if not conn.poll(SIGNAL_TIMEOUT):
                errors.append("the writer sent nothing")
                break
            committed = conn.recv()
            n = len(store.candidates(1))
            store.top_candidates(1, 5)
            store.progress(1)
            seen.append(n)
            if n != committed:
                errors.append(f"a store read saw {n} rows after the writer committed {committed}")
            raw.execute("BEGIN")
            first = raw.execute("SELECT count(*) FROM candidates").fetchone()[0]
            conn.send("holding")
            # The writer commits its next batch now. If a commit had to wait for this
            # snapshot to end, it would never arrive: we release only after it reports.
            if not conn.poll(SIGNAL_TIMEOUT):
                errors.append("the writer could not commit while a reader held a snapshot")
                raw.execute("COMMIT")
                break
            during = conn.recv()
            second = raw.execute("SELECT count(*) FROM candidates").fetchone()[0]
            raw.execute("COMMIT")
            after = raw.execute("SELECT count(*) FROM candidates").fetchone()[0]
            if first != second:
                errors.append(f"the snapshot moved from {first} to {second} while held")
            if after != during:
                errors.append(f"after the snapshot a read saw {after} rows, the writer had committed {during}")
            seen.append(after)
            conn.send("released")
        raw.close()
        store.close()
    except Exception as exc:  # noqa: BLE001 - the parent asserts on errors
        errors.append(f"{type(exc).__name__}: {exc}")
    conn.send((seen, errors))


@pytest.mark.slow
def test_second_process_reads_while_this_one_writes(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.db")
    store = open_store(path)
    sid = store.create_search(make_workload(), make_config(), make_machine())
    root = make_candidate("root")
    store.add_candidate(sid, root)
    ctx = multiprocessing.get_context("spawn")
    here, there = ctx.Pipe()
    reader = ctx.Process(target=_reader, args=(path, there))
    reader.start()
    assert here.poll(SIGNAL_TIMEOUT) and here.recv() == "ready"
    write_errors: list[str] = []
    written = 1

    def write_batch() -> None:
        nonlocal written
        for _ in range(BATCH):
            cand = make_candidate(f"n{written}", root)
            try:
                store.add_candidate(sid, cand)
                store.record_measurement(sid, make_measurement(cand, 1.0 / written), None, None)
            except Exception as exc:  # noqa: BLE001 - collected and asserted empty
                write_errors.append(f"{type(exc).__name__}: {exc}")
            written += 1

    def answer() -> object:
        assert here.poll(SIGNAL_TIMEOUT), "the reader stopped answering"
        return here.recv()

    report = None
    for _ in range(ROUNDS):
        write_batch()
        here.send(written)
        if (reply := answer()) != "holding":  # the reader failed and sent its report early
            report = reply
            break
        write_batch()  # commits while the reader's snapshot is open
        here.send(written)
        if (reply := answer()) != "released":
            report = reply
            break
    seen, read_errors = report if report is not None else answer()
    reader.join(timeout=30)
    store.close()
    # With WAL every commit above went through while a reader held a snapshot; with a
    # rollback journal the first such commit waits for the reader, which waits for it, and
    # the busy timeout turns that into "database is locked" in write_errors.
    assert write_errors == [] and read_errors == []
    expected = [1 + BATCH * step for step in range(1, 2 * ROUNDS + 1)]
    assert seen == expected  # it saw every commit, in order: the table grew and never shrank


def test_generic_insert_path(tmp_path: Path) -> None:
    """Dialects without ON CONFLICT (neither SQLite nor PostgreSQL) insert through a savepoint."""
    store = SqlStore(f"sqlite:///{tmp_path / 'generic.db'}")
    store._insert_candidate = None
    sid = store.create_search(make_workload(), make_config(), make_machine())
    root = make_candidate("root")
    first = store.add_candidate(sid, root)
    child = store.add_candidate(sid, make_candidate("child", root))
    assert store.add_candidate(sid, root) == first
    assert child.parent_id == first.id and len(store.candidates(sid)) == 2
    store.close()


def test_lock_timeout_is_a_store_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer locked out past the busy timeout gets one sentence, not a driver traceback."""
    from schedsearch.store import engine

    monkeypatch.setattr(engine, "BUSY_TIMEOUT_MS", 50)
    path = tmp_path / "locked.db"
    store = open_store(str(path))
    sid = store.create_search(make_workload(), make_config(), make_machine())
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # a second writer holds the write lock
    try:
        with pytest.raises(StoreError, match=f"{path} failed: database is locked"):
            store.add_candidate(sid, make_candidate("root"))
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert store.add_candidate(sid, make_candidate("root")).id == 1
    store.close()
