"""Schema version of the results database: checking it, creating it, upgrading it.

Versions and migrations
-----------------------
Every database records the version of its tables in ``schema_info`` (one row). This build
reads and writes ``SCHEMA_VERSION``; it refuses, without changing a byte, a database whose
version is newer than that or unknown, a file that is not a database, and a database that
holds someone else's tables. Any change to the tables, even an added column, bumps the
version, so a version number always names one exact schema.

An older schedsearch database is upgraded when it is opened: each version step is one
function in ``MIGRATIONS`` (plain ``ALTER TABLE`` statements that SQLite and PostgreSQL
both run), all steps and the new version stamp commit in one transaction, and an SQLite
file is first copied (with SQLite's online backup) to ``<name>.v<old version>.bak``. The
steps so far only add and rename columns, so a hand-written step is simpler than Alembic's
revision machinery; a step that rebuilds tables would be the time to bring Alembic in.

- 1 -> 2: candidates get ``features`` (the cost model's input), ``predicted`` (its
  prediction before measuring) and ``measured_at`` in seconds of the search's own elapsed
  time; the unix time of a measurement moves to ``measured_unix`` (old rows get
  ``measured_at = measured_unix - started_at``, exact for searches never resumed).
  Searches get ``model_accuracy``.
- 2 -> 3: searches get ``failure``, the one-line reason a search was marked failed.
- 3 -> 4: candidates get ``reused_search_id`` and ``reused_candidate_id``, naming the earlier
  measurement of the same C a candidate's was taken from (NULL: measured by its own
  search, as every older row was), and an index on ``fingerprint`` to find those.
- 4 -> 5: candidates get ``paired``, the yardstick kernel timed beside the candidate in
  the same run (``core.Paired`` as JSON: its fingerprint, its timing as measured and its
  time on the search's one scale); when set, the row's own timing is on that scale. Older
  rows get NULL: measured alone. No longer read or written: every candidate is now timed
  alone, and the column stays so that databases of either kind open unchanged.
- 5 -> 6: searches get the ``lease_*`` columns: which driver (host, pid, random token) runs
  the search, since when, its last heartbeat and its timeout (``core.Lease``). Older rows
  get NULL: free, so a search an older schedsearch left ``running`` can be resumed.
- 6 -> 7: candidates get where their latest measurement was taken: ``machine`` (the timing
  node's ``core.MachineInfo`` as JSON) and its ``machine_fingerprint``, ``node`` (the Ray
  node that verified and timed the kernel) and ``built_node`` (the one that compiled it).
  Older rows get NULL: the search's own machine, node unknown.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import cast

from sqlalchemy import Connection, Engine, Table, inspect, select, text, update
from sqlalchemy.exc import DBAPIError

from schedsearch.errors import StoreError
from schedsearch.store.models import Base, SchemaInfoRow

#: Version of the tables this build reads and writes.
SCHEMA_VERSION = 7


def _v1_to_v2(conn: Connection) -> None:
    for statement in (
        "ALTER TABLE candidates RENAME COLUMN measured_at TO measured_unix",
        "ALTER TABLE candidates ADD COLUMN measured_at DOUBLE PRECISION",
        "ALTER TABLE candidates ADD COLUMN features JSON",
        "ALTER TABLE candidates ADD COLUMN predicted DOUBLE PRECISION",
        "ALTER TABLE searches ADD COLUMN model_accuracy JSON",
        "UPDATE candidates SET measured_at = measured_unix - "
        "(SELECT started_at FROM searches WHERE searches.id = candidates.search_id) WHERE measured_unix IS NOT NULL",
    ):
        conn.execute(text(statement))


def _v2_to_v3(conn: Connection) -> None:
    conn.execute(text("ALTER TABLE searches ADD COLUMN failure TEXT NOT NULL DEFAULT ''"))


def _v3_to_v4(conn: Connection) -> None:
    for statement in (
        "ALTER TABLE candidates ADD COLUMN reused_search_id INTEGER",
        "ALTER TABLE candidates ADD COLUMN reused_candidate_id INTEGER",
        "CREATE INDEX ix_candidates_fingerprint ON candidates (fingerprint)",
    ):
        conn.execute(text(statement))


def _v4_to_v5(conn: Connection) -> None:
    # JSON is a type name both SQLite and PostgreSQL accept, as the 1 -> 2 step's columns are.
    conn.execute(text("ALTER TABLE candidates ADD COLUMN paired JSON"))


def _v5_to_v6(conn: Connection) -> None:
    # VARCHAR, TEXT, BIGINT and DOUBLE PRECISION: type names SQLite and PostgreSQL both accept,
    # the ones ``create_all`` gives these columns on PostgreSQL.
    for statement in (
        "ALTER TABLE searches ADD COLUMN lease_token VARCHAR(64)",
        "ALTER TABLE searches ADD COLUMN lease_host TEXT",
        "ALTER TABLE searches ADD COLUMN lease_pid BIGINT",
        "ALTER TABLE searches ADD COLUMN lease_acquired_at DOUBLE PRECISION",
        "ALTER TABLE searches ADD COLUMN lease_heartbeat_at DOUBLE PRECISION",
        "ALTER TABLE searches ADD COLUMN lease_timeout DOUBLE PRECISION",
    ):
        conn.execute(text(statement))


def _v6_to_v7(conn: Connection) -> None:
    for statement in (
        "ALTER TABLE candidates ADD COLUMN machine JSON",
        "ALTER TABLE candidates ADD COLUMN machine_fingerprint VARCHAR(32)",
        "ALTER TABLE candidates ADD COLUMN node VARCHAR(64)",
        "ALTER TABLE candidates ADD COLUMN built_node VARCHAR(64)",
    ):
        conn.execute(text(statement))


#: ``MIGRATIONS[v]`` upgrades a database of version ``v`` to ``v + 1``.
MIGRATIONS: dict[int, Callable[[Connection], None]] = {
    1: _v1_to_v2,
    2: _v2_to_v3,
    3: _v3_to_v4,
    4: _v4_to_v5,
    5: _v5_to_v6,
    6: _v6_to_v7,
}

#: Execution option read by the SQLite "begin" listener: how to BEGIN (e.g. "IMMEDIATE").
SQLITE_BEGIN_OPTION = "schedsearch_sqlite_begin"
#: PostgreSQL advisory-lock key that serialises schema creation (any fixed 64-bit number).
_CREATE_LOCK_KEY = 0x5C4ED5EA2C4


def _package_version() -> str:
    try:
        return metadata.version("schedsearch")
    except metadata.PackageNotFoundError:  # running from a source tree that is not installed
        return "unknown"


_SQLITE_MAGIC = b"SQLite format 3\x00"
_SCHEMA_TABLES = frozenset(Base.metadata.tables)


@dataclass(frozen=True, slots=True)
class SchemaState:
    """What an existing database holds, read without changing anything."""

    tables: frozenset[str]
    version: int | None  # None when there is no schema_info row
    raw_version: object = None


def sqlite_file_problem(path: Path) -> str | None:
    """Why ``path`` cannot be an SQLite database, or None when it can (or is empty).

    Reads at most the 16-byte header; never opens the file for writing.
    """
    if path.is_dir():
        return "is a directory, not a database file"
    size = path.stat().st_size
    if size == 0:
        return None
    with path.open("rb") as handle:
        head = handle.read(len(_SQLITE_MAGIC))
    if head != _SQLITE_MAGIC:
        return "is not an SQLite database"
    return None


def read_state(conn: Connection) -> SchemaState:
    """Inspect the tables and the recorded schema version (read only)."""
    tables = frozenset(inspect(conn).get_table_names())
    if SchemaInfoRow.__tablename__ not in tables:
        return SchemaState(tables=tables, version=None)
    raw = conn.execute(select(SchemaInfoRow.version).order_by(SchemaInfoRow.id).limit(1)).scalar()
    version = raw if isinstance(raw, int) and not isinstance(raw, bool) else None
    return SchemaState(tables=tables, version=version, raw_version=raw)


def needs_creation(state: SchemaState, where: str, *, create: bool) -> bool:
    """Decide from ``state`` whether the tables must be created; raise if the database is unusable.

    An older version is usable (``upgrade`` brings it to ``SCHEMA_VERSION``).

    Every refusal is one sentence naming the database, the problem and what to do.
    """
    if SchemaInfoRow.__tablename__ in state.tables:
        if state.version is None:
            raise StoreError(
                f"{where} records an unreadable schema version ({state.raw_version!r}); "
                "it was not written by schedsearch, so pass another database with --db"
            )
        if state.version > SCHEMA_VERSION:
            raise StoreError(
                f"{where} uses schema version {state.version} but this schedsearch "
                f"({_package_version()}) reads only version {SCHEMA_VERSION}; upgrade schedsearch "
                "(pip install -U schedsearch) to open it"
            )
        if state.version < 1:
            raise StoreError(
                f"{where} records an unknown schema version {state.version}; pass another database with --db"
            )
        if state.version < SCHEMA_VERSION and any(v not in MIGRATIONS for v in range(state.version, SCHEMA_VERSION)):
            raise StoreError(
                f"{where} uses schema version {state.version}, which this schedsearch cannot upgrade; "
                "open it with the schedsearch that wrote it or pass another database with --db"
            )
        missing = sorted(_SCHEMA_TABLES - state.tables)
        if missing:
            raise StoreError(
                f"{where} is a schedsearch database with missing tables ({', '.join(missing)}); "
                "restore it from a backup or pass another database with --db"
            )
        return False
    if state.tables:
        shown = ", ".join(sorted(state.tables)[:5])
        raise StoreError(
            f"{where} is a database but not a schedsearch one (it has tables {shown}); "
            "pass an empty database or a new file with --db"
        )
    if not create:
        raise StoreError(
            f"{where} holds no schedsearch results yet; run `schedsearch run` to create them "
            "or pass another database with --db"
        )
    return True


def create_schema(engine: Engine, where: str) -> None:
    """Create every table and stamp the schema version in one transaction, at most once.

    Any number of processes may open the same new database at once. Creators queue on a
    lock (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: a transaction-level advisory lock), and
    each one looks at the tables again once it holds the lock: the first creates them, the
    others find them made and simply use them. Another backend gets one more look after
    a failed attempt instead.
    """
    dialect = engine.dialect.name
    for attempt in range(2):
        try:
            with engine.connect() as conn:
                if dialect == "sqlite":
                    conn.execution_options(**{SQLITE_BEGIN_OPTION: "IMMEDIATE"})
                with conn.begin():
                    if dialect == "postgresql":
                        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _CREATE_LOCK_KEY})
                    if not needs_creation(read_state(conn), where, create=True):
                        return
                    Base.metadata.create_all(conn)
                    conn.execute(
                        cast(Table, SchemaInfoRow.__table__)
                        .insert()
                        .values(
                            id=1,
                            version=SCHEMA_VERSION,
                            created_at=time.time(),
                            created_by=f"schedsearch {_package_version()}",
                        )
                    )
                return
        except DBAPIError:
            if attempt or dialect in ("sqlite", "postgresql"):
                raise


def backup_sqlite(path: Path, version: int) -> Path:
    """Copy an SQLite database (committed WAL pages included) to ``<name>.v<version>.bak``."""
    target = path.with_name(f"{path.name}.v{version}.bak")
    source = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        copy = sqlite3.connect(target)
        try:
            source.backup(copy)
        finally:
            copy.close()
    finally:
        source.close()
    return target


def upgrade(engine: Engine, where: str) -> int | None:
    """Bring an older database to ``SCHEMA_VERSION`` in one transaction; the old version, or
    None when it was current. Raises StoreError (nothing changed) when a step fails.

    Openers of one old database queue on the write lock (SQLite: ``BEGIN IMMEDIATE``) and
    read the version once they hold it: the first upgrades, the others find nothing to do."""
    with engine.connect() as conn, conn.execution_options(**{SQLITE_BEGIN_OPTION: "IMMEDIATE"}).begin():
        state = read_state(conn)
        if state.version is None or state.version >= SCHEMA_VERSION:
            return None
        old = state.version
        try:
            for version in range(old, SCHEMA_VERSION):
                MIGRATIONS[version](conn)
            conn.execute(update(SchemaInfoRow).values(version=SCHEMA_VERSION))
        except Exception as exc:  # the transaction rolls back: the database stays as it was
            raise StoreError(
                f"{where} could not be upgraded from schema version {old} to {SCHEMA_VERSION} "
                f"({type(exc).__name__}: {str(exc).splitlines()[0]}); it is unchanged"
            ) from exc
    return old
