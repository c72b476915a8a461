"""SqlStore's writes: a search, its candidates, their measurements, and the search's fields.

Private to ``schedsearch.store``: ``WriteMethods`` is the part of ``SqlStore`` that writes.
Each call is one write transaction (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: the search's row
read ``FOR UPDATE``), fenced by the search's lease (``LeaseMethods._writable``): a driver
that lost its lease writes nothing. Guarantees: a (search, fingerprint) is stored once - a
concurrent writer's row wins and is returned - and a candidate's parent must be stored first.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, cast

from sqlalchemy import Table, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from schedsearch.core import (
    LEASE_TIMEOUT_SECONDS,
    Candidate,
    CandidateRecord,
    Counters,
    LeaseOwner,
    MachineInfo,
    Measurement,
    SearchConfig,
    SearchRecord,
    SearchStatus,
    Status,
    Workload,
)
from schedsearch.store import convert, leases, rules, sql_leases
from schedsearch.store.models import CandidateRow, SearchRow, WorkloadRow
from schedsearch.store.sql_reads import by_fingerprint

_DIALECT_INSERTS: dict[str, Callable[[Table], sqlite.Insert | postgresql.Insert]] = {
    "sqlite": sqlite.insert,
    "postgresql": postgresql.insert,
}


def candidate_insert(dialect: str) -> sqlite.Insert | postgresql.Insert | None:
    """The INSERT of a candidate row that leaves an existing (search, fingerprint) alone, in
    ``dialect``; None for a dialect without one (``WriteMethods.add_candidate`` then inserts
    in a savepoint). Built once, values bound per call, so SQLAlchemy compiles it a single time."""
    dialect_insert = _DIALECT_INSERTS.get(dialect)
    if dialect_insert is None:
        return None
    return dialect_insert(cast(Table, CandidateRow.__table__)).on_conflict_do_nothing(
        index_elements=["search_id", "fingerprint"]
    )


class WriteMethods(sql_leases.LeaseMethods):
    """The writing half of ``SqlStore`` (see ``core.Store``), on top of its lease half."""

    _insert_candidate: sqlite.Insert | postgresql.Insert | None

    def _search_record(self, s: Session, search_id: int) -> SearchRecord:  # pragma: no cover - SqlStore's
        raise NotImplementedError

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
            existing = by_fingerprint(s, search_id, candidate.fingerprint)
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
            row = by_fingerprint(s, search_id, candidate.fingerprint)
            assert row is not None
            return convert.candidate_record(row)

    def record_measurement(
        self, search_id: int, measurement: Measurement, gflops: float | None, speedup: float | None
    ) -> CandidateRecord:
        """Fill the candidate's measurement (matched by fingerprint) and return it."""
        with self._session(write=True) as s:
            self._writable(s, search_id)
            row = by_fingerprint(s, search_id, measurement.fingerprint)
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
            row.paired = None  # an older row's yardstick went with the times it scaled (``models``)
            for name, value in convert.place_columns(measurement).items():
                setattr(row, name, value)
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
