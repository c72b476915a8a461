"""Many processes opening the same new database at once: exactly one schema, no errors.

Each round forks 8 processes that wait on a barrier and then all call ``open_store`` on
the same database that does not exist yet (SQLite: a new file; PostgreSQL: a new, empty
database, in test_store_postgres.py). Every one must succeed, and the database must end with one schema_info row.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path

import pytest

from schedsearch.store import SCHEMA_VERSION, open_store

PROCESSES = 8
ROUNDS = 20


def _open(url: str, barrier: multiprocessing.synchronize.Barrier, results: multiprocessing.Queue) -> None:
    try:
        barrier.wait(timeout=30)
        open_store(url).close()
        results.put("ok")
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        results.put(f"{type(exc).__name__}: {exc}")


def _race(url: str) -> list[str]:
    """Fork PROCESSES openers of ``url`` that start together; what each one reported."""
    ctx = multiprocessing.get_context("fork")  # cheap: the children inherit the imports
    barrier = ctx.Barrier(PROCESSES)
    results = ctx.Queue()
    procs = [ctx.Process(target=_open, args=(url, barrier, results)) for _ in range(PROCESSES)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    return outcomes


@pytest.mark.slow
def test_eight_processes_create_one_sqlite_database_twenty_times(tmp_path: Path) -> None:
    for round_ in range(ROUNDS):
        path = tmp_path / f"new{round_}.db"
        outcomes = _race(str(path))
        assert outcomes == ["ok"] * PROCESSES, (round_, outcomes)
        with sqlite3.connect(path) as conn:
            assert conn.execute("SELECT version FROM schema_info").fetchall() == [(SCHEMA_VERSION,)]
            assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
