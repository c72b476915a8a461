"""SqlStore's reads: searches, candidates and the queries over them (the fastest, lineage,
progress, training samples, reusable measurements, past schedules, the frontier).

Private to ``schedsearch.store``: ``ReadMethods`` is the part of ``SqlStore`` that reads.
Each call is one deferred transaction, which in WAL mode never waits for a writer; it writes
nothing. Guarantees: an unknown search or candidate is a ``StoreError`` (``rules``), and a
list of fingerprints is asked for in chunks well under every backend's limit on bound
parameters.
"""

from __future__ import annotations

from collections.abc import Collection
from contextlib import AbstractContextManager
from typing import Any

from sqlalchemy import Select, literal, null, select
from sqlalchemy.orm import Session

from schedsearch.core import (
    CandidateRecord,
    PastSchedule,
    ProgressPoint,
    ReuseScope,
    SearchConfig,
    SearchRecord,
    Status,
    TrainingSample,
)
from schedsearch.store import convert, rules
from schedsearch.store.models import CandidateRow, SearchRow, WorkloadRow

#: Fingerprints per ``IN (...)`` list: well under every backend's limit on bound parameters.
_IN_CHUNK = 500


class ReadMethods:
    """The reading half of ``SqlStore`` (see ``core.Store``)."""

    where: str

    def _session(self, *, write: bool = False) -> AbstractContextManager[Session]:  # pragma: no cover - SqlStore's
        raise NotImplementedError

    def _search_row(self, s: Session, search_id: int, *, lock: bool = False) -> SearchRow:  # pragma: no cover
        raise NotImplementedError

    def _search_record(self, s: Session, search_id: int) -> SearchRecord:  # pragma: no cover
        raise NotImplementedError

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
            row = by_fingerprint(s, search_id, fingerprint)
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

    def _candidates(self, search_id: int, stmt: Select[CandidateRow]) -> list[CandidateRecord]:
        with self._session() as s:
            self._search_row(s, search_id)
            return [convert.candidate_record(r) for r in s.scalars(stmt.where(CandidateRow.search_id == search_id))]


def by_fingerprint(s: Session, search_id: int, fingerprint: str) -> CandidateRow | None:
    """The search's candidate row with this fingerprint, or None."""
    return s.scalar(
        select(CandidateRow).where(CandidateRow.search_id == search_id, CandidateRow.fingerprint == fingerprint)
    )


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
