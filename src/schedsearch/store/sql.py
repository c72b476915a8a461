"""SqlStore: the results store on SQLAlchemy, SQLite (WAL) by default, any SQLAlchemy URL.

Every call is one transaction. Reads begin deferred: in WAL mode they never wait for a
writer, so a notebook or ``schedsearch show`` reads while searches run. Writes begin
``IMMEDIATE`` on SQLite: a write transaction that began deferred reads first and then asks to
write, and when another process committed in between SQLite cannot upgrade its snapshot and
answers "database is locked" at once, busy timeout or not; one that takes the write lock at
its start waits out the busy timeout instead. So any number of searches can share one file.
On PostgreSQL a write reads the search's row ``FOR UPDATE``, which orders it with the
search's lease changes.

This module opens the database and runs those transactions (turning a database's failure into
one ``StoreError``); the calls themselves are in ``sql_writes``, ``sql_reads`` and
``sql_leases``, the parts ``SqlStore`` is made of.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Self

from sqlalchemy.exc import DatabaseError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from schedsearch.core import SearchRecord
from schedsearch.errors import StoreError
from schedsearch.store import convert, engine, rules, schema
from schedsearch.store.models import SearchRow, WorkloadRow
from schedsearch.store.sql_reads import ReadMethods
from schedsearch.store.sql_writes import WriteMethods, candidate_insert


class SqlStore(WriteMethods, ReadMethods):
    """A ``core.Store`` in a SQL database.

    ``url`` is any SQLAlchemy URL (``sqlite:///schedsearch.db``,
    ``postgresql+psycopg://user@host/db``). With ``create=False`` the database must already
    hold schedsearch tables; ``read_only`` opens it so that nothing can be written (SQLite:
    ``mode=ro``, and ``immutable`` on read-only media). Raises ``StoreError`` for a file that
    is not a database or is damaged, a newer schema, someone else's tables, or a server
    that cannot be reached.
    """

    def __init__(self, url: str, *, create: bool = True, read_only: bool = False) -> None:
        parsed = engine.parse_url(url)
        self.url = parsed
        self.where = engine.describe(parsed)
        self._engine = engine.open_engine(parsed, create=create, read_only=read_only)
        self._sessions = sessionmaker(self._engine, expire_on_commit=False)
        # The same pool, with the option the SQLite "begin" listener reads (other dialects ignore it).
        writer = self._engine.execution_options(**{schema.SQLITE_BEGIN_OPTION: "IMMEDIATE"})
        self._write_sessions = sessionmaker(writer, expire_on_commit=False)
        self._held: dict[int, str] = {}  # search id -> token of the lease this store took on it
        self._insert_candidate = candidate_insert(self._engine.dialect.name)

    def __repr__(self) -> str:
        return f"SqlStore({self.where!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _session(self, *, write: bool = False) -> Iterator[Session]:
        # One transaction per call: the driver commits each result as it is recorded.
        try:
            with (self._write_sessions if write else self._sessions)() as session, session.begin():
                yield session
        except OperationalError as exc:
            # Locked past the busy timeout, disk full, server gone: infrastructure, not data.
            raise StoreError(f"{self.where} failed: {engine.first_line(exc)}; check the database and retry") from exc
        except DatabaseError as exc:
            # A page damaged after the database was opened (its check passed): stop, write nothing more.
            raise StoreError(
                f"{self.where} failed: {engine.first_line(exc)}; the database may be damaged — check it with "
                f"`sqlite3 {self.where} 'PRAGMA integrity_check'` or restore a backup"
            ) from exc

    def close(self) -> None:
        """Release every connection (SQLite checkpoints its WAL when the last one closes)."""
        self._engine.dispose()

    # ------------------------------------------------------------------ helpers

    def _search_row(self, s: Session, search_id: int, *, lock: bool = False) -> SearchRow:
        # FOR UPDATE on PostgreSQL (SQLite's compiler leaves it out: IMMEDIATE already locks).
        row = s.get(SearchRow, search_id, with_for_update=lock)
        if row is None:
            raise rules.no_search(self.where, search_id)
        return row

    def _search_record(self, s: Session, search_id: int) -> SearchRecord:
        row = self._search_row(s, search_id)
        return convert.search_record(row, s.get_one(WorkloadRow, row.workload_id))
