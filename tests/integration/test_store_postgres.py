"""SqlStore on a real PostgreSQL server: the same contract as SQLite, plus the schema checks.

The server comes from, in order: ``SCHEDSEARCH_TEST_POSTGRES_URL`` (an existing server, e.g.
a CI service container; each test creates and drops its own database in it), the ``pgserver``
package (a private PostgreSQL in a temp folder, dev extra), or the system's PostgreSQL binaries
(``apt-get install -y postgresql``; found under /usr/lib/postgresql/*/bin). Set
``SCHEDSEARCH_TEST_POSTGRES=system`` to skip pgserver. When no server can be had the tests
fail, they do not skip.
"""

from __future__ import annotations

import dataclasses
import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import make_url

from schedsearch.core import LeaseOwner, LeaseState
from schedsearch.errors import StoreError
from schedsearch.store import SCHEMA_VERSION, SqlStore, open_store
from tests.integration.test_store_concurrent_create import PROCESSES as RACERS
from tests.integration.test_store_concurrent_create import ROUNDS as RACE_ROUNDS
from tests.integration.test_store_concurrent_create import _race
from schedsearch.testing.store_contract import (
    StoreContract,
    make_candidate,
    make_config,
    make_machine,
    make_measurement,
    make_workload,
)

# pgserver asks platformdirs for a runtime folder, which warns when XDG_RUNTIME_DIR is unset.
pytestmark = pytest.mark.filterwarnings("ignore:XDG_RUNTIME_DIR is not set")

_counter = itertools.count()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _system_postgres(root: Path) -> tuple[str, Callable[[], None]]:
    """initdb + pg_ctl from the system packages, as the postgres user when running as root."""
    bindirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
    bindir = Path(bindirs[-1]) if bindirs else None
    if bindir is None and shutil.which("pg_ctl"):
        bindir = Path(shutil.which("pg_ctl")).resolve().parent  # type: ignore[arg-type]
    if bindir is None:
        raise RuntimeError("no PostgreSQL binaries; CI needs `apt-get install -y postgresql`")
    prefix: list[str] = []
    root.mkdir(parents=True, exist_ok=True)
    data, sock = root / "data", root / "sock"
    sock.mkdir(exist_ok=True)
    if os.geteuid() == 0:  # postgres refuses to run as root
        prefix = ["runuser", "-u", "postgres", "--"]
        shutil.chown(root, "postgres")
        shutil.chown(sock, "postgres")
    port = _free_port()
    run = lambda *args: subprocess.run([*prefix, *args], check=True, capture_output=True, timeout=120)
    run(str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
    run(
        str(bindir / "pg_ctl"),
        "-D",
        str(data),
        "-l",
        str(root / "log"),
        "-w",
        "-o",
        f"-k {sock} -p {port} -c listen_addresses=''",
        "start",
    )
    stop = lambda: run(str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop")
    return f"postgresql+psycopg://postgres@/postgres?host={sock}&port={port}", stop


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[str]:
    """URL of a maintenance database on a running PostgreSQL server."""
    external = os.environ.get("SCHEDSEARCH_TEST_POSTGRES_URL")
    if external:
        yield external
        return
    # Not under pytest's basetemp: as root the server runs as another user, and every new
    # pytest session (a parallel run) resets that tree to 0700, which kills the server.
    root = Path(tempfile.mkdtemp(prefix="schedsearch-pg-"))
    root.chmod(0o755)  # the server's own user must traverse it
    problems = []
    try:
        if os.environ.get("SCHEDSEARCH_TEST_POSTGRES") != "system":
            try:
                import pgserver

                server = pgserver.get_server(root / "pgserver", cleanup_mode="stop")
            except Exception as exc:  # noqa: BLE001 - fall through to the system server
                problems.append(f"pgserver: {type(exc).__name__}: {exc}")
            else:
                uri = make_url(server.get_uri()).set(drivername="postgresql+psycopg")
                yield uri.render_as_string(hide_password=False)
                server.cleanup()
                return
        try:
            url, stop = _system_postgres(root / "system")
        except Exception as exc:  # noqa: BLE001 - reported by pytest.fail below
            problems.append(f"system PostgreSQL: {type(exc).__name__}: {exc}")
            pytest.fail("no PostgreSQL server for the store tests: " + "; ".join(problems))
        yield url
        stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _psycopg_url(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@pytest.fixture
def pg_url(pg_admin_url: str) -> Iterator[str]:
    """A fresh, empty database for one test, dropped afterwards."""
    name = f"schedsearch_t{os.getpid()}_{next(_counter)}"
    with psycopg.connect(_psycopg_url(pg_admin_url), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield make_url(pg_admin_url).set(database=name).render_as_string(hide_password=False)
    with psycopg.connect(_psycopg_url(pg_admin_url), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _sql(url: str, statement: str) -> list[tuple]:
    with psycopg.connect(_psycopg_url(url), autocommit=True) as conn:
        cur = conn.execute(statement)
        return cur.fetchall() if cur.description else []


class TestPostgresStore(StoreContract):
    @pytest.fixture
    def store(self, pg_url: str) -> Iterator[SqlStore]:
        s = open_store(pg_url)
        assert s._engine.dialect.name == "postgresql"
        yield s
        s.close()

    @pytest.fixture
    def second(self, store: SqlStore, pg_url: str) -> Iterator[SqlStore]:
        s = open_store(pg_url, create=False)
        yield s
        s.close()


def test_reopen_keeps_everything(pg_url: str) -> None:
    store = open_store(pg_url)
    sid = store.create_search(make_workload(), make_config(), make_machine())
    root = make_candidate("root")
    store.add_candidate(sid, root)
    store.record_measurement(sid, make_measurement(root, 0.125), 7.5, 1.0)
    before = (store.get_search(sid), store.candidates(sid), store.progress(sid))
    store.close()
    again = open_store(pg_url, create=False)
    assert (again.get_search(sid), again.candidates(sid), again.progress(sid)) == before
    again.close()
    assert _sql(pg_url, "SELECT version FROM schema_info") == [(SCHEMA_VERSION,)]


def test_a_version_4_database_is_upgraded(pg_url: str) -> None:
    """The 4 -> 5 step's ALTER TABLE on PostgreSQL: a current database taken back to
    version 4 (the ``paired`` column dropped) upgrades in place and keeps its rows."""
    store = open_store(pg_url)
    sid = store.create_search(make_workload(), make_config(), make_machine())
    root = make_candidate("root")
    store.add_candidate(sid, root)
    store.record_measurement(sid, make_measurement(root, 0.125), 7.5, 1.0)
    before = store.candidates(sid)
    store.close()
    _drop_lease_columns(pg_url)
    _sql(pg_url, "ALTER TABLE candidates DROP COLUMN paired")
    _sql(pg_url, "UPDATE schema_info SET version = 4")
    again = open_store(pg_url, create=False)
    try:
        # Where it was measured went with the version 7 columns.
        unplaced = [dataclasses.replace(r, machine=None, node="", built_node="") for r in before]
        assert again.candidates(sid) == unplaced
        rec = again.record_measurement(sid, make_measurement(root, 0.0625), None, None)
        assert rec.seconds == 0.0625 and again.get_candidate(before[0].id) == rec
    finally:
        again.close()
    assert _sql(pg_url, "SELECT version FROM schema_info") == [(SCHEMA_VERSION,)]


_LEASE_COLUMNS = ("lease_token", "lease_host", "lease_pid", "lease_acquired_at", "lease_heartbeat_at", "lease_timeout")


def _drop_lease_columns(pg_url: str) -> None:
    """Take a current database's searches back to version 5 (no leases), and its candidates
    to version 6 (``_drop_place_columns``)."""
    _drop_place_columns(pg_url)
    for column in _LEASE_COLUMNS:
        _sql(pg_url, f"ALTER TABLE searches DROP COLUMN {column}")


_PLACE_COLUMNS = ("machine", "machine_fingerprint", "node", "built_node")


def _drop_place_columns(pg_url: str) -> None:
    """Take a current database's candidates back to version 6 (no per-candidate machine or nodes)."""
    for column in _PLACE_COLUMNS:
        _sql(pg_url, f"ALTER TABLE candidates DROP COLUMN {column}")


def _column_types(pg_url: str, table: str) -> dict[str, str]:
    rows = _sql(pg_url, "SELECT column_name, data_type FROM information_schema.columns "
                        f"WHERE table_name = '{table}'")
    return dict(rows)


def test_a_version_6_database_is_upgraded(pg_url: str) -> None:
    """The 6 -> 7 step's ALTER TABLE on PostgreSQL: a current database taken back to
    version 6 (the per-candidate machine and node columns dropped) upgrades in place, keeps
    its rows (none says where it was measured) and records the nodes of a new measurement."""
    store = open_store(pg_url)
    sid = store.create_search(make_workload(), make_config(), make_machine())
    root = make_candidate("root")
    store.add_candidate(sid, root)
    store.record_measurement(sid, make_measurement(root, 0.125), 7.5, 1.0)
    fresh = _column_types(pg_url, "candidates")
    store.close()
    _drop_place_columns(pg_url)
    _sql(pg_url, "UPDATE schema_info SET version = 6")
    again = open_store(pg_url, create=False)
    try:
        (old,) = again.candidates(sid)
        assert (old.machine, old.node, old.built_node) == (None, "", "") and old.timing is not None
        m = dataclasses.replace(make_measurement(root, 0.0625), node="ab" * 28, built_node="ab" * 28)
        rec = again.record_measurement(sid, m, None, None)
        assert (rec.machine, rec.node, rec.built_node) == (make_machine(), "ab" * 28, "ab" * 28)
        assert again.get_candidate(rec.id) == rec
    finally:
        again.close()
    assert _sql(pg_url, "SELECT version FROM schema_info") == [(SCHEMA_VERSION,)]
    assert _column_types(pg_url, "candidates") == fresh  # the same types create_all gives


def test_a_version_5_database_is_upgraded(pg_url: str) -> None:
    """The 5 -> 6 step's ALTER TABLE on PostgreSQL: a current database taken back to
    version 5 (the lease columns dropped) upgrades in place, keeps its rows, and its
    searches, left running or not, are free to be taken."""
    store = open_store(pg_url)
    sid = store.create_search(make_workload(), make_config(), make_machine())
    store.add_candidate(sid, make_candidate("root"))
    before = (store.get_search(sid), store.candidates(sid))
    fresh = _column_types(pg_url, "searches")
    store.close()
    _drop_lease_columns(pg_url)
    _sql(pg_url, "UPDATE schema_info SET version = 5")
    again = open_store(pg_url, create=False)
    try:
        assert (again.get_search(sid), again.candidates(sid)) == before and again.lease(sid) is None
        grant = again.acquire_lease(sid, LeaseOwner.here())
        assert grant.found is LeaseState.FREE and again.lease(sid) == grant.lease
    finally:
        again.close()
    assert _sql(pg_url, "SELECT version FROM schema_info") == [(SCHEMA_VERSION,)]
    assert _column_types(pg_url, "searches") == fresh  # the same types create_all gives


def test_newer_schema_is_refused_unchanged(pg_url: str) -> None:
    open_store(pg_url).close()
    _sql(pg_url, f"UPDATE schema_info SET version = {SCHEMA_VERSION + 1}")
    tables = _sql(pg_url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")
    with pytest.raises(StoreError, match=rf"schema version {SCHEMA_VERSION + 1}.*upgrade schedsearch"):
        open_store(pg_url)
    assert _sql(pg_url, "SELECT version FROM schema_info") == [(SCHEMA_VERSION + 1,)]
    assert _sql(pg_url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1") == tables


def test_someone_elses_database_is_refused(pg_url: str) -> None:
    _sql(pg_url, "CREATE TABLE invoices (id integer primary key)")
    with pytest.raises(StoreError, match="not a schedsearch one.*invoices"):
        open_store(pg_url)
    assert _sql(pg_url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'") == [("invoices",)]


def test_empty_database_for_reading(pg_url: str) -> None:
    with pytest.raises(StoreError, match="holds no schedsearch results"):
        open_store(pg_url, create=False)
    assert _sql(pg_url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'") == []


def test_unreachable_server_is_one_sentence(pg_admin_url: str) -> None:
    url = make_url(pg_admin_url).set(database="schedsearch_no_such_db").render_as_string(hide_password=False)
    with pytest.raises(StoreError, match="cannot open .*schedsearch_no_such_db.*the server is running") as info:
        open_store(url)
    assert "\n" not in str(info.value)


@pytest.mark.slow
def test_eight_processes_create_one_postgres_schema_twenty_times(pg_admin_url: str) -> None:
    admin_url = make_url(pg_admin_url).set(drivername="postgresql").render_as_string(hide_password=False)
    for round_ in range(RACE_ROUNDS):
        name = f"schedsearch_race_{round_}"
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{name}"')
        url = make_url(pg_admin_url).set(database=name).render_as_string(hide_password=False)
        try:
            outcomes = _race(url)
            assert outcomes == ["ok"] * RACERS, (round_, outcomes)
            db_url = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
            with psycopg.connect(db_url) as conn:
                assert conn.execute("SELECT version FROM schema_info").fetchall() == [(SCHEMA_VERSION,)]
        finally:
            with psycopg.connect(admin_url, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
