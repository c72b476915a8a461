"""SqlStore: the results store on SQLAlchemy, SQLite (WAL) by default, any SQLAlchemy URL.

Every call is one transaction. Reads begin deferred: in WAL mode they never wait for a
writer, so a notebook or ``schedsearch show`` reads while searches run. Writes begin
``IMMEDIATE`` on SQLite: a write transaction that began deferred reads first and then asks to
write, and when another process committed in between SQLite cannot upgrade its snapshot and
answers "database is locked" at once, busy timeout or not; one that takes the write lock at
its start waits out the busy timeout instead. So any number of searches can share one file.
On PostgreSQL a write reads the search's row ``FOR UPDATE``, which orders it with the
search's lease changes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from typing import Any, Self, cast

from sqlalchemy import Select, Table, insert, literal, null, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DatabaseError, IntegrityError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from schedsearch.core import (
    LEASE_TIMEOUT_SECONDS,
    Candidate,
    CandidateRecord,
    Counters,
    LeaseOwner,
    MachineInfo,
    Measurement,
    PastSchedule,
    ProgressPoint,
    ReuseScope,
    SearchConfig,
    SearchRecord,
    SearchStatus,
    Status,
    TrainingSample,
    Workload,
)
from schedsearch.errors import StoreError
from schedsearch.store import convert, engine, leases, rules, schema, sql_leases
from schedsearch.store.models import CandidateRow, SearchRow, WorkloadRow

_DIALECT_INSERTS: dict[str, Callable[[Table], sqlite.Insert | postgresql.Insert]] = {
    "sqlite": sqlite.insert,
    "postgresql": postgresql.insert,
}
#: Fingerprints per ``IN (...)`` list: well under every backend's limit on bound parameters.
_IN_CHUNK = 500


class SqlStore(sql_leases.LeaseMethods):
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
        dialect_insert = _DIALECT_INSERTS.get(self._engine.dialect.name)
        # Built once, values bound per call, so SQLAlchemy compiles it a single time.
        self._insert_candidate = (
            None
            if dialect_insert is None
            else dialect_insert(cast(Table, CandidateRow.__table__)).on_conflict_do_nothing(
                index_elements=["search_id", "fingerprint"]
            )
        )

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

    # ------------------------------------------------------------------ writing

    def create_search(
        self,
        workload: Workload,
        config: SearchConfig,
        machine: MachineInfo,
        lease: LeaseOwner | None = None,
        lease_timeout: float = LEASE_TIMEOUT_SECONDS,
    ) -> int:
        """Record a new running search of ``workload`` and return its id; with ``lease`` the
        search is born leased to that owner."""
        timeout = leases.check_timeout(lease_timeout)
        with self._session(write=True) as s:
            workload_id = s.scalar(select(WorkloadRow.id).where(WorkloadRow.key == workload.key))
            if workload_id is None:
                row = convert.workload_row(workload)
                try:
                    with s.begin_nested():
                        s.add(row)
                        s.flush()
                    workload_id = row.id
                except IntegrityError:
                    # PostgreSQL: another search of this workload recorded it since the lookup
                    # (SQLite's IMMEDIATE writes cannot interleave so); the first one stays.
                    workload_id = s.scalar(select(WorkloadRow.id).where(WorkloadRow.key == workload.key))
            search = SearchRow(
                workload_id=workload_id,
                config=config.to_json(),
                strategy=config.strategy.value,
                seed=config.seed,
                machine=machine.to_json(),
                machine_fingerprint=machine.fingerprint,
                status=SearchStatus.RUNNING.value,
                started_at=time.time(),
                counters=Counters().to_json(),
                elapsed_seconds=0.0,
            )
            if lease is not None:
                now = time.time()
                for name, value in sql_leases.columns(lease, now, now, timeout).items():
                    setattr(search, name, value)
            s.add(search)
            s.flush()
            search_id = search.id
        if lease is not None:
            self._held[search_id] = lease.token
        return search_id

    def add_candidate(self, search_id: int, candidate: Candidate, predicted: float | None = None) -> CandidateRecord:
        """Record ``candidate`` as pending; an existing (search, fingerprint) is returned as is."""
        with self._session(write=True) as s:
            self._writable(s, search_id)
            existing = self._by_fingerprint(s, search_id, candidate.fingerprint)
            if existing is not None:
                return convert.candidate_record(existing)
            parent_id = None
            if candidate.parent is not None:
                parent_id = s.scalar(
                    select(CandidateRow.id).where(
                        CandidateRow.search_id == search_id, CandidateRow.fingerprint == candidate.parent
                    )
                )
                if parent_id is None:
                    raise rules.missing_parent(self.where, search_id, candidate.fingerprint, candidate.parent)
            values = dict(
                search_id=search_id,
                parent_id=parent_id,
                depth=candidate.depth,
                schedule=candidate.schedule.dumps(),
                fingerprint=candidate.fingerprint,
                c_source=candidate.c_source,
                proc_text=candidate.proc_text,
                status=Status.PENDING.value,
                error="",
                build_seconds=0.0,
                run_seconds=0.0,
                created_at=time.time(),
                expanded=False,
                features=candidate.features.to_json() if candidate.features is not None else None,
                predicted=predicted,
                **convert.timing_columns(None),
            )
            # A concurrent writer may have added the same fingerprint since the lookup above:
            # the unique (search_id, fingerprint) decides, and the stored row is returned.
            if self._insert_candidate is not None:
                s.connection().execute(self._insert_candidate, values)
            else:
                try:
                    with s.begin_nested():
                        s.connection().execute(insert(cast(Table, CandidateRow.__table__)), values)
                except IntegrityError:
                    pass
            row = self._by_fingerprint(s, search_id, candidate.fingerprint)
            assert row is not None
            return convert.candidate_record(row)

    def record_measurement(
        self, search_id: int, measurement: Measurement, gflops: float | None, speedup: float | None
    ) -> CandidateRecord:
        """Fill the candidate's measurement (matched by fingerprint) and return it."""
        with self._session(write=True) as s:
            self._writable(s, search_id)
            row = self._by_fingerprint(s, search_id, measurement.fingerprint)
            if row is None:
                raise rules.no_fingerprint(self.where, search_id, measurement.fingerprint)
            row.status = Status(measurement.status).value
            row.error = measurement.error
            for name, value in convert.timing_columns(measurement.timing).items():
                setattr(row, name, value)
            row.gflops = gflops
            row.speedup = speedup
            row.build_seconds = measurement.build_seconds
            row.run_seconds = measurement.run_seconds
            row.max_error = measurement.max_error
            row.measured_unix = time.time()
            row.measured_at = measurement.measured_at
            row.reused_search_id = measurement.reused_search_id
            row.reused_candidate_id = measurement.reused_candidate_id
            row.paired = convert.paired_column(measurement.paired)
            s.flush()
            return convert.candidate_record(row)

    def mark_expanded(self, search_id: int, candidate_id: int) -> None:
        """Remember that the candidate's children have been generated."""
        with self._session(write=True) as s:
            self._writable(s, search_id)
            row = s.get(CandidateRow, candidate_id)
            if row is None:
                raise rules.no_candidate(self.where, candidate_id)
            if row.search_id != search_id:
                raise rules.not_in_search(self.where, candidate_id, search_id)
            row.expanded = True

    def update_search(self, search_id: int, **fields: Any) -> SearchRecord:
        """Set any of the fields listed in ``rules.SEARCH_FIELDS``; return the updated search."""
        values = convert.search_columns(rules.check_search_fields(fields))
        with self._session(write=True) as s:
            self._writable(s, search_id)
            if values:
                s.execute(update(SearchRow).where(SearchRow.id == search_id).values(values))
            return self._search_record(s, search_id)

    def close(self) -> None:
        """Release every connection (SQLite checkpoints its WAL when the last one closes)."""
        self._engine.dispose()

    # ------------------------------------------------------------------ reading

    def get_search(self, search_id: int) -> SearchRecord:
        """The search with this id."""
        with self._session() as s:
            return self._search_record(s, search_id)

    def list_searches(self, workload_key: str | None = None) -> list[SearchRecord]:
        """Every search (of one workload, when given), oldest first."""
        stmt = select(SearchRow, WorkloadRow).join(WorkloadRow, SearchRow.workload_id == WorkloadRow.id)
        if workload_key is not None:
            stmt = stmt.where(WorkloadRow.key == workload_key)
        with self._session() as s:
            return [convert.search_record(sr, wr) for sr, wr in s.execute(stmt.order_by(SearchRow.id))]

    def get_candidate(self, candidate_id: int) -> CandidateRecord:
        """The candidate with this id."""
        with self._session() as s:
            row = s.get(CandidateRow, candidate_id)
            if row is None:
                raise rules.no_candidate(self.where, candidate_id)
            return convert.candidate_record(row)

    def candidate_by_fingerprint(self, search_id: int, fingerprint: str) -> CandidateRecord | None:
        """The candidate of the search with this fingerprint, or None."""
        with self._session() as s:
            self._search_row(s, search_id)
            row = self._by_fingerprint(s, search_id, fingerprint)
            return None if row is None else convert.candidate_record(row)

    def candidates(self, search_id: int, *, code: bool = True) -> list[CandidateRecord]:
        """Every candidate of the search in insertion order (the whole tree); ``code=False``
        reads none of the heavy columns (see ``core.Store.candidates``)."""
        # A tree of thousands of candidates is mostly their C and proc text: a page that draws
        # the tree reads only the columns of its numbers (rows keep the attribute names).
        stmt = select(CandidateRow) if code else select(*_OUTLINE_COLUMNS)
        stmt = stmt.where(CandidateRow.search_id == search_id).order_by(CandidateRow.id)
        schedules = convert.ScheduleReader()
        with self._session() as s:
            self._search_row(s, search_id)
            rows = s.scalars(stmt) if code else s.execute(stmt)
            # an outline's Row has a CandidateRow's column names, which is all candidate_record reads
            return [convert.candidate_record(row, schedules) for row in rows]  # type: ignore[arg-type]

    def top_candidates(self, search_id: int, k: int = 10) -> list[CandidateRecord]:
        """The k fastest ``ok`` candidates of the search (ties: older first)."""
        return self._candidates(search_id, _fastest(k))

    def best_for_workload(self, workload_key: str, k: int = 10) -> list[CandidateRecord]:
        """The k fastest ``ok`` candidates across every search of the workload, one per C
        (the fastest record of each fingerprint: searches that reused a measurement hold
        the same C with the same time)."""
        stmt = (
            select(CandidateRow)
            .where(CandidateRow.status == Status.OK.value, CandidateRow.time_median.is_not(None))
            .join(SearchRow, CandidateRow.search_id == SearchRow.id)
            .join(WorkloadRow, SearchRow.workload_id == WorkloadRow.id)
            .where(WorkloadRow.key == workload_key)
            .order_by(CandidateRow.time_median, CandidateRow.id)
            .execution_options(yield_per=256)
        )
        out: list[CandidateRecord] = []
        seen: set[str] = set()
        if k <= 0:
            return out
        with self._session() as s:
            for row in s.scalars(stmt):
                if row.fingerprint not in seen:
                    seen.add(row.fingerprint)
                    out.append(convert.candidate_record(row))
                    if len(out) == k:
                        break
        return out

    def lineage(self, candidate_id: int) -> list[CandidateRecord]:
        """Root first, the candidate last."""
        with self._session() as s:
            row = s.get(CandidateRow, candidate_id)
            if row is None:
                raise rules.no_candidate(self.where, candidate_id)
            chain, seen = [row], {row.id}
            while (parent_id := chain[-1].parent_id) is not None:
                parent = s.get(CandidateRow, parent_id)
                # A forged parent_id must not hang a read command or raise an internal error.
                if parent is None or parent.id in seen:
                    raise rules.broken_lineage(self.where, candidate_id, parent_id)
                chain.append(parent)
                seen.add(parent.id)
            return [convert.candidate_record(r) for r in reversed(chain)]

    def progress(self, search_id: int) -> list[ProgressPoint]:
        """Best-so-far after each improvement, over measured-candidate count and time."""
        stmt = (
            select(
                CandidateRow.id,
                CandidateRow.status,
                CandidateRow.time_median,
                CandidateRow.speedup,
                CandidateRow.measured_unix,
                CandidateRow.measured_at,
            )
            .where(CandidateRow.search_id == search_id, CandidateRow.measured_unix.is_not(None))
            .order_by(CandidateRow.measured_unix, CandidateRow.id)
        )
        with self._session() as s:
            started_at = self._search_row(s, search_id).started_at
            rows = s.execute(stmt).all()
        return rules.progress_points(
            started_at,
            (
                rules.Measured(r.id, Status(r.status), r.time_median, r.speedup, r.measured_unix, r.measured_at)
                for r in rows
            ),
        )

    def seen_fingerprints(self, search_id: int) -> set[str]:
        """Fingerprints of every candidate of the search (for dedup on resume)."""
        with self._session() as s:
            self._search_row(s, search_id)
            return set(s.scalars(select(CandidateRow.fingerprint).where(CandidateRow.search_id == search_id)))

    def training_samples(
        self, machine_fingerprint: str, feature_version: str, limit: int = 20000
    ) -> list[TrainingSample]:
        """The latest ``ok`` measurements with features of this version from every search on
        this machine fingerprint, oldest first (see ``core.Store``)."""
        stmt = (
            select(CandidateRow.features, CandidateRow.time_median, SearchRow.baseline_seconds, WorkloadRow.key)
            .join(SearchRow, CandidateRow.search_id == SearchRow.id)
            .join(WorkloadRow, SearchRow.workload_id == WorkloadRow.id)
            .where(
                SearchRow.machine_fingerprint == machine_fingerprint,
                CandidateRow.status == Status.OK.value,
                CandidateRow.time_median.is_not(None),
                CandidateRow.features.is_not(None),
                CandidateRow.features["version"].as_string() == feature_version,
            )
            .order_by(CandidateRow.id.desc())
            .limit(max(limit, 0))
        )
        with self._session() as s:
            rows = s.execute(stmt).all()
        samples = (
            rules.training_sample(convert.features_record(r[0]), feature_version, r[1], r[2], r[3])
            for r in reversed(rows)
        )
        return [x for x in samples if x is not None]

    def reusable_measurements(self, fingerprints: Collection[str], scope: ReuseScope) -> dict[str, CandidateRecord]:
        """For each fingerprint that has one, the latest original measurement in ``scope``
        (see ``core.Store``): SQL narrows to the machine, status and fingerprints; the
        search's settings and reference are compared as records (``ReuseScope.admits``)."""
        wanted = sorted(set(fingerprints))
        statuses = [st.value for st in Status if st.reusable]
        found: dict[str, CandidateRecord] = {}
        with self._session() as s:
            rows: list[tuple[CandidateRow, Any]] = []
            for start in range(0, len(wanted), _IN_CHUNK):
                stmt = (
                    select(CandidateRow, SearchRow.config)
                    .join(SearchRow, CandidateRow.search_id == SearchRow.id)
                    .where(
                        CandidateRow.fingerprint.in_(wanted[start : start + _IN_CHUNK]),
                        CandidateRow.status.in_(statuses),
                        CandidateRow.reused_candidate_id.is_(None),
                        SearchRow.machine_fingerprint == scope.machine_fingerprint,
                    )
                )
                if scope.exclude_search is not None:
                    stmt = stmt.where(CandidateRow.search_id != scope.exclude_search)
                rows.extend((row, config) for row, config in s.execute(stmt))
            search_ids = sorted({row.search_id for row, _ in rows})
            references: dict[int, str] = {}
            if search_ids:
                roots = select(CandidateRow.search_id, CandidateRow.fingerprint).where(
                    CandidateRow.search_id.in_(search_ids), CandidateRow.parent_id.is_(None)
                )
                references = {search_id: fp for search_id, fp in s.execute(roots)}
            configs: dict[int, SearchConfig] = {}
            for row, config in sorted(rows, key=lambda item: item[0].id):  # the latest wins
                if row.search_id not in configs:
                    configs[row.search_id] = SearchConfig.from_json(config)
                if not scope.admits(
                    row.search_id, configs[row.search_id], scope.machine_fingerprint, references.get(row.search_id)
                ):
                    continue
                record = convert.candidate_record(row)
                if rules.stands_for_a_measurement(record):
                    found[record.fingerprint] = record
        return found

    def past_schedules(
        self, source_sha256: str, proc: str, *, target: str | None = None, per_search: int = 3, searches: int = 8
    ) -> list[PastSchedule]:
        """The fastest scheduled ``ok`` candidates of the latest searches of this proc's
        source, any sizes (see ``core.Store``)."""
        stmt = (
            select(SearchRow.id, SearchRow.config, WorkloadRow)
            .join(WorkloadRow, SearchRow.workload_id == WorkloadRow.id)
            .where(WorkloadRow.source_sha256 == source_sha256, WorkloadRow.proc == proc)
            .order_by(SearchRow.id.desc())
        )
        out: list[PastSchedule] = []
        used = 0
        with self._session() as s:
            for search_id, config, workload_row in s.execute(stmt).all():
                if used >= searches:
                    break
                search_target = SearchConfig.from_json(config).expand.target
                if target is not None and search_target != target:
                    continue
                fastest = s.scalars(
                    _fastest(per_search).where(CandidateRow.search_id == search_id, CandidateRow.parent_id.is_not(None))
                ).all()
                if fastest:
                    used += 1
                workload = convert.workload_record(workload_row)
                out.extend(
                    rules.past_schedule(convert.candidate_record(r), workload.key, workload.sizes, search_target)
                    for r in fastest
                )
        return out

    def frontier(self, search_id: int) -> list[CandidateRecord]:
        """``ok`` candidates not yet expanded, in insertion order (for resume)."""
        stmt = (
            select(CandidateRow)
            .where(CandidateRow.status == Status.OK.value, CandidateRow.expanded.is_(False))
            .order_by(CandidateRow.id)
        )
        return self._candidates(search_id, stmt)

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

    @staticmethod
    def _by_fingerprint(s: Session, search_id: int, fingerprint: str) -> CandidateRow | None:
        return s.scalar(
            select(CandidateRow).where(CandidateRow.search_id == search_id, CandidateRow.fingerprint == fingerprint)
        )

    def _candidates(self, search_id: int, stmt: Select[CandidateRow]) -> list[CandidateRecord]:
        with self._session() as s:
            self._search_row(s, search_id)
            return [convert.candidate_record(r) for r in s.scalars(stmt.where(CandidateRow.search_id == search_id))]


#: The candidate columns an outline reads; the heavy ones come back empty under their names.
_OUTLINE_COLUMNS = (
    *(c for c in CandidateRow.__table__.c if c.name not in ("c_source", "proc_text", "features", "time_samples")),
    literal("").label("c_source"),
    literal("").label("proc_text"),
    null().label("features"),
    null().label("time_samples"),
)


def _fastest(k: int) -> Select[CandidateRow]:
    return (
        select(CandidateRow)
        .where(CandidateRow.status == Status.OK.value, CandidateRow.time_median.is_not(None))
        .order_by(CandidateRow.time_median, CandidateRow.id)
        .limit(max(k, 0))
    )
