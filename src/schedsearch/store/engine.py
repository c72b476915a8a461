"""Opening a database safely: SQLite pragmas, a read-only look before any write, schema checks.

Private to ``schedsearch.store``. The order matters: an existing SQLite file is first looked
at through a read-only connection, because merely switching a database to WAL rewrites its
header, and a file that is not ours must come out of ``open`` byte-for-byte unchanged.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import URL, Engine, create_engine, event, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, SQLAlchemyError
from sqlalchemy.pool import NullPool

from schedsearch.errors import StoreError
from schedsearch.store import schema

#: How long a connection waits for another one's lock before giving up (milliseconds).
BUSY_TIMEOUT_MS = 10_000


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


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    # busy_timeout first, so that the journal switch itself waits for a concurrent writer.
    cursor = dbapi_conn.cursor()
    cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _probe_sqlite(path: Path, where: str, *, create: bool) -> tuple[bool, int | None]:
    """Check an existing SQLite file without writing to it: whether its tables must be
    created, and the schema version it has."""
    problem = schema.sqlite_file_problem(path)
    if problem:
        raise StoreError(f"{where} {problem}; pass a schedsearch database or a new file path with --db")
    resolved = path.resolve()
    # With no -wal beside it the file holds every committed page, so it can be read as
    # immutable: SQLite then creates no -shm/-wal files next to a file that may not be ours.
    # A live -wal (a search is writing) needs the shared-memory index, hence plain read-only.
    wal = resolved.with_name(resolved.name + "-wal")
    uri = f"file:{quote(str(resolved))}?" + ("mode=ro" if wal.exists() else "mode=ro&immutable=1")
    probe = create_engine(
        "sqlite://",
        creator=lambda: sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000),
        poolclass=NullPool,
    )
    try:
        with probe.connect() as conn:
            state = schema.read_state(conn)
    except SQLAlchemyError as exc:
        raise StoreError(
            f"{where} cannot be read as an SQLite database ({first_line(exc)}); pass another file with --db"
        ) from None
    finally:
        probe.dispose()
    return schema.needs_creation(state, where, create=create), state.version


def open_engine(url: URL, *, create: bool) -> Engine:
    """An engine on a checked database with the schedsearch tables in it."""
    where = describe(url)
    path = sqlite_path(url)
    version: int | None = None
    if path is not None:
        if path.exists():
            must_create, version = _probe_sqlite(path, where, create=create)
        elif not create:
            raise StoreError(f"no results database at {where}; run `schedsearch run` to create one or pass --db")
        elif not path.parent.exists():
            raise StoreError(f"cannot create {where}: the folder {path.parent} does not exist")
        else:
            must_create = True
    try:
        engine = create_engine(url)
    except (NoSuchModuleError, ImportError) as exc:
        raise StoreError(
            f"cannot open {where}: no database driver ({first_line(exc)}); install the driver the URL names"
        ) from None
    if url.get_backend_name() == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    try:
        if path is None:
            with engine.connect() as conn:
                state = schema.read_state(conn)
                must_create, version = schema.needs_creation(state, where, create=create), state.version
        if must_create:
            schema.create_schema(engine)
        elif version is not None and version < schema.SCHEMA_VERSION:
            if path is not None:
                schema.backup_sqlite(path.resolve(), version)
            schema.upgrade(engine, where)
    except StoreError:
        engine.dispose()
        raise
    except DBAPIError as exc:
        engine.dispose()
        hint = (
            "check that the file and its folder are writable"
            if path
            else "check the URL and that the server is running"
        )
        raise StoreError(f"cannot open {where}: {first_line(exc)}; {hint}") from None
    return engine
