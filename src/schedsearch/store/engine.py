"""Opening a database safely: SQLite pragmas, a read-only look before any write, schema checks.

Private to ``schedsearch.store``. The order matters: an existing SQLite file is first looked
at through a read-only connection, because merely switching a database to WAL rewrites its
header, and a file that is not ours (or a damaged one) must come out of ``open``
byte-for-byte unchanged. That look includes SQLite's ``quick_check``: a damaged file is
refused before anything reads from it or writes to it.
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import URL, Engine, create_engine, event, make_url
from sqlalchemy.exc import ArgumentError, DatabaseError, DBAPIError, NoSuchModuleError, SQLAlchemyError
from sqlalchemy.pool import NullPool

from schedsearch.errors import StoreError
from schedsearch.store import schema

#: How long a connection waits for another one's lock before giving up (milliseconds).
#: Writes begin IMMEDIATE, so every writer queues here rather than failing at once. A write
#: transaction holds the lock for about a millisecond (at most ~15 ms with 60 KB of C); with
#: 16 processes writing results flat out on one file (2-core Zen 5) the longest wait was
#: 2.0 s - SQLite's busy handler is not fair: a writer can lose a few dozen times in a row.
#: Thirty seconds is 15 times that; it is also what a search waits on a lock that is really
#: stuck before it stops (marked failed, resumable).
BUSY_TIMEOUT_MS = 30_000
#: How often a file that changes while it is checked is looked at again.
_PROBE_ATTEMPTS = 4


def parse_url(url: str) -> URL:
    """A SQLAlchemy URL, or a StoreError that says what is wrong with the text."""
    try:
        return make_url(url)
    except ArgumentError as exc:
        raise StoreError(
            f"{url!r} is not a database URL or path ({exc}); pass a file path or a URL such as sqlite:///schedsearch.db"
        ) from None


def describe(url: URL) -> str:
    """How error messages name the database: the file path for SQLite, else the URL sans password."""
    if url.get_backend_name() == "sqlite":
        return url.database or ":memory:"
    return url.render_as_string(hide_password=True)


def sqlite_path(url: URL) -> Path | None:
    """The file of an SQLite URL, or None for in-memory / non-SQLite databases."""
    if url.get_backend_name() != "sqlite":
        return None
    database = url.database or ""
    if database in ("", ":memory:") or database.startswith("file:"):
        return None
    return Path(database)


def _sqlite_connect(read_only: bool) -> Any:
    def on_connect(dbapi_conn: Any, _record: Any) -> None:
        # The driver's own transaction handling is off: SQLAlchemy's "begin" event below
        # issues BEGIN itself, so that DDL (schema creation) is transactional too.
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        # busy_timeout first, so that the journal switch itself waits for a concurrent writer.
        cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        if read_only:
            cursor.execute("PRAGMA query_only=ON")
        else:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    return on_connect


def _sqlite_begin(conn: Any) -> None:
    # "IMMEDIATE" takes the write lock at once: creators of a new database queue up here.
    mode = conn.get_execution_options().get(schema.SQLITE_BEGIN_OPTION, "")
    conn.exec_driver_sql(f"BEGIN {mode}".strip())


def first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _folder_writable(path: Path) -> bool:
    return os.access(path.resolve().parent, os.W_OK)


def _readonly_uri(path: Path, *, immutable: bool) -> str:
    resolved = path.resolve()
    return f"file:{quote(str(resolved))}?mode=ro" + ("&immutable=1" if immutable else "")


def _sqlite_engine(uri: str, *, pool: type | None = NullPool) -> Engine:
    """An engine on a read-only URI (file:...?mode=ro), connecting through sqlite3 directly."""
    return create_engine(
        "sqlite://",
        creator=lambda: sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False),
        poolclass=pool,
    )


#: How much of SQLite's own diagnosis an error quotes: the advice after it must survive a
#: one-line message's length limit, whatever SQLite found.
_DETAIL_CHARS = 160


def _damaged(where: str, detail: str) -> StoreError:
    detail = " ".join(detail.split())
    if len(detail) > _DETAIL_CHARS:
        detail = detail[: _DETAIL_CHARS - 1].rstrip() + "…"
    return StoreError(
        f"{where} cannot be read as an SQLite database: it is damaged ({detail}), and was left exactly as it was; "
        f"recover what SQLite can with `sqlite3 {where} .recover | sqlite3 recovered.db`, or restore a backup"
    )


def _probe_once(path: Path, where: str, *, create: bool) -> tuple[bool, int | None]:
    problem = schema.sqlite_file_problem(path)
    if problem:
        raise StoreError(f"{where} {problem}; pass a schedsearch database or a new file path with --db")
    # With no -wal beside it the file holds every committed page, so it can be read as
    # immutable: SQLite then creates no -shm/-wal files next to a file that may not be ours.
    # A live -wal (a search is writing) needs the shared-memory index, hence plain read-only.
    resolved = path.resolve()
    wal = resolved.with_name(resolved.name + "-wal")
    probe = _sqlite_engine(_readonly_uri(path, immutable=not wal.exists()))
    try:
        with probe.connect() as conn:
            # Before anything is trusted or written: a damaged file is refused, never worsened.
            rows = [r[0] for r in conn.exec_driver_sql("PRAGMA quick_check").fetchall()]
            if rows != ["ok"]:
                raise _damaged(where, f"SQLite's quick_check: {rows[0] if rows else 'no answer'}")
            state = schema.read_state(conn)
    except DatabaseError as exc:
        raise _damaged(where, first_line(exc)) from None
    except SQLAlchemyError as exc:
        raise StoreError(
            f"{where} cannot be read as an SQLite database ({first_line(exc)}); pass another file with --db"
        ) from None
    finally:
        probe.dispose()
    return schema.needs_creation(state, where, create=create), state.version


def _file_state(path: Path) -> tuple[int, int, bool]:
    resolved = path.resolve()
    st = resolved.stat()
    return st.st_size, st.st_mtime_ns, resolved.with_name(resolved.name + "-wal").exists()


def _probe_sqlite(path: Path, where: str, *, create: bool) -> tuple[bool, int | None]:
    """Check an existing SQLite file without writing to it: whether its tables must be
    created, and the schema version it has.

    A file that changes while it is being checked is being written by another process (a
    concurrent creator checkpointing its first transaction): look again rather than call
    a half-written page damage.
    """
    for attempt in range(_PROBE_ATTEMPTS):
        before = _file_state(path)
        try:
            return _probe_once(path, where, create=create)
        except StoreError:
            if attempt + 1 == _PROBE_ATTEMPTS or _file_state(path) == before:
                raise
            time.sleep(0.05 * (attempt + 1))
    raise AssertionError("unreachable")


def _upgrade(url: URL, engine: Engine, path: Path | None, where: str, version: int, *, read_only: bool) -> None:
    """Bring an older database to the current schema (an SQLite file is first copied to
    ``<name>.v<version>.bak``). A read-only opening upgrades through a separate writable
    connection when the file may be written, and otherwise says what to do."""
    if not read_only:
        if path is not None:
            schema.backup_sqlite(path.resolve(), version)
        schema.upgrade(engine, where)
        return
    if path is None or not os.access(path.resolve(), os.W_OK) or not _folder_writable(path):
        raise StoreError(
            f"{where} has schema version {version} and this schedsearch reads version {schema.SCHEMA_VERSION}; "
            "it cannot be upgraded here (read-only): copy it somewhere writable and open it there once"
        )
    writer = create_engine(url)
    event.listen(writer, "connect", _sqlite_connect(False))
    event.listen(writer, "begin", _sqlite_begin)
    try:
        schema.backup_sqlite(path.resolve(), version)
        schema.upgrade(writer, where)
    finally:
        writer.dispose()


class _Locked(Exception):
    """SQLite answered "database is locked" while the database was being opened."""

    def __init__(self, error: StoreError) -> None:
        super().__init__(str(error))
        self.error = error


#: Openings retried when SQLite reports a lock at once instead of waiting (it does so, busy
#: timeout or not, when waiting could deadlock, e.g. while another process switches a new
#: file to WAL or recovers its index); the delays add up to about 3 seconds.
_LOCKED_RETRIES = 6


def open_engine(url: URL, *, create: bool, read_only: bool = False) -> Engine:
    """An engine on a checked database with the schedsearch tables in it (see ``_open_once``);
    an opening that meets a lock SQLite would not wait for is tried again."""
    for attempt in range(_LOCKED_RETRIES):
        try:
            return _open_once(url, create=create, read_only=read_only)
        except _Locked as locked:
            if attempt + 1 == _LOCKED_RETRIES:
                raise locked.error from None
            time.sleep(0.1 * 2**attempt)
    raise AssertionError("unreachable")


def _open_once(url: URL, *, create: bool, read_only: bool = False) -> Engine:
    """An engine on a checked database with the schedsearch tables in it.

    ``read_only`` (the read commands) opens an SQLite file with ``mode=ro`` and
    ``query_only``, adding ``immutable=1`` when its folder is not writable (read-only media,
    someone else's folder) so that SQLite needs no -shm/-wal files there.
    """
    where = describe(url)
    path = sqlite_path(url)
    must_create = False
    version: int | None = None
    if path is not None:
        if path.exists():
            must_create, version = _probe_sqlite(path, where, create=create and not read_only)
        elif not create or read_only:
            raise StoreError(f"no results database at {where}; run `schedsearch run` to create one or pass --db")
        elif not path.parent.exists():
            raise StoreError(f"cannot create {where}: the folder {path.parent} does not exist")
        else:
            must_create = True
    sqlite = url.get_backend_name() == "sqlite"
    try:
        if path is not None and read_only:
            wal = path.resolve().with_name(path.resolve().name + "-wal")
            immutable = not _folder_writable(path) and not wal.exists()
            engine = _sqlite_engine(_readonly_uri(path, immutable=immutable))
        else:
            engine = create_engine(url)
    except (NoSuchModuleError, ImportError) as exc:
        raise StoreError(
            f"cannot open {where}: no database driver ({first_line(exc)}); install the driver the URL names"
        ) from None
    if sqlite:
        event.listen(engine, "connect", _sqlite_connect(read_only))
        event.listen(engine, "begin", _sqlite_begin)
    try:
        if path is None:
            with engine.connect() as conn:
                state = schema.read_state(conn)
                must_create = schema.needs_creation(state, where, create=create and not read_only)
                version = state.version
        if must_create:
            schema.create_schema(engine, where)
        elif version is not None and version < schema.SCHEMA_VERSION:
            _upgrade(url, engine, path, where, version, read_only=read_only)
    except StoreError:
        engine.dispose()
        raise
    except DBAPIError as exc:
        engine.dispose()
        if read_only and path is not None:
            hint = "check that the file is readable (a database on read-only media must have no -wal file beside it)"
        elif path:
            hint = "check that the file and its folder are writable"
        else:
            hint = "check the URL and that the server is running"
        error = StoreError(f"cannot open {where}: {first_line(exc)}; {hint}")
        if sqlite and "database is locked" in first_line(exc):
            raise _Locked(error) from None
        raise error from None
    return engine
