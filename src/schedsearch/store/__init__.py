"""The results store: searches, candidates and measurements in SQL (SQLite by default).

``open_store`` picks the backend from one string; ``SqlStore`` and ``InMemoryStore`` both
implement ``schedsearch.core.Store`` plus ``frontier`` and pass the same contract suite
(``schedsearch.testing.store_contract``). This is the only package that imports SQLAlchemy.
"""

from __future__ import annotations

from pathlib import Path

from schedsearch.core import Store
from schedsearch.store.memory import InMemoryStore
from schedsearch.store.schema import SCHEMA_VERSION
from schedsearch.store.sql import SqlStore

#: Database file used when no ``--db`` is given (in the current directory).
DEFAULT_DB = "schedsearch.db"

_MEMORY_NAMES = frozenset({"memory", ":memory:"})

__all__ = ["DEFAULT_DB", "SCHEMA_VERSION", "InMemoryStore", "SqlStore", "is_transient", "open_store"]


def is_transient(url: str | None) -> bool:
    """Whether ``url`` names a database that vanishes with the process (``memory``,
    ``:memory:``, ``sqlite://``, ``sqlite:///``, ``sqlite:///:memory:``, SQLite ``mode=memory``)."""
    if url is None:
        return False
    if url in _MEMORY_NAMES:
        return True
    if "://" not in url:
        return False
    from schedsearch.store.engine import parse_url

    parsed = parse_url(url)
    if parsed.get_backend_name() != "sqlite":
        return False
    database = parsed.database or ""
    return database in ("", ":memory:") or "mode=memory" in database or parsed.query.get("mode") == "memory"


def open_store(url: str | None = None, *, create: bool = True, read_only: bool = False) -> Store:
    """Open the results store named by ``url``.

    ``None`` or a plain path opens an SQLite file (``./schedsearch.db`` by default); a URL
    with ``://`` goes to SQLAlchemy as is (``sqlite:///x.db``, ``postgresql+psycopg://...``);
    ``"memory"`` or ``":memory:"`` gives an ``InMemoryStore``. With ``create=False`` the
    database must already exist and hold schedsearch tables (read-only commands use this so
    that a mistyped path is an error, not a new empty database); ``read_only`` (the read
    commands) also guarantees that nothing is written, even on read-only media. Raises
    ``StoreError``.
    Both stores also offer ``frontier(search_id)`` beyond the ``Store`` protocol.
    """
    if url is None:
        url = DEFAULT_DB
    if url in _MEMORY_NAMES:
        return InMemoryStore()
    if "://" in url:
        return SqlStore(url, create=create, read_only=read_only)
    path = Path(url).expanduser()
    # sqlite:/// + an absolute path gives four slashes, which SQLAlchemy reads as absolute.
    return SqlStore(f"sqlite:///{path}", create=create, read_only=read_only)
