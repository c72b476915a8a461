"""ORM tables of the results database. Private to ``schedsearch.store``.

Times are unix seconds in double precision columns (they round-trip exactly through both
SQLite and PostgreSQL). Records with a nested shape that queries never filter on (sizes,
argument specs, configs, machines, counters, timing samples) are JSON
columns; everything the CLI sorts or filters by is a plain column with an index.
"""

from __future__ import annotations

from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Double,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    """Declarative base holding the schedsearch metadata."""

    type_annotation_map: ClassVar[dict[Any, Any]] = {
        float: Double,
        str: Text,
        int: Integer,
        bool: Boolean,
        Any: JSON,
    }


class SchemaInfoRow(Base):
    """One row: the schema version this database was written with."""

    __tablename__ = "schema_info"

    id: Mapped[int] = mapped_column(primary_key=True)
    version: Mapped[int]
    created_at: Mapped[float]
    created_by: Mapped[str] = mapped_column(String(64))  # "schedsearch <version>"


class WorkloadRow(Base):
    """A proc in a source file with concrete sizes (one row per ``Workload.key``)."""

    __tablename__ = "workloads"

    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(64), unique=True)
    path: Mapped[str]
    source: Mapped[str]
    source_sha256: Mapped[str] = mapped_column(String(64))
    proc: Mapped[str] = mapped_column(String(255))
    sizes: Mapped[Any]  # [[name, value], ...] in the proc's argument order
    args: Mapped[Any]  # [ArgSpec.to_json(), ...]
    flops: Mapped[int | None] = mapped_column(BigInteger)


class SearchRow(Base):
    """One search run (resumes continue the same row)."""

    __tablename__ = "searches"
    __table_args__ = (Index("ix_searches_workload", "workload_id", "id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    workload_id: Mapped[int] = mapped_column(ForeignKey("workloads.id"))
    config: Mapped[Any]  # SearchConfig.to_json()
    strategy: Mapped[str] = mapped_column(String(32))
    seed: Mapped[int] = mapped_column(BigInteger)
    machine: Mapped[Any]  # MachineInfo.to_json()
    machine_fingerprint: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(16))
    started_at: Mapped[float]
    ended_at: Mapped[float | None]
    counters: Mapped[Any]  # Counters.to_json()
    baseline_seconds: Mapped[float | None]
    # No foreign key: searches and candidates would reference each other, and a circular
    # constraint buys nothing when the driver is the single writer.
    best_candidate_id: Mapped[int | None]
    best_seconds: Mapped[float | None]
    best_speedup: Mapped[float | None]
    elapsed_seconds: Mapped[float]
    model_accuracy: Mapped[Any | None]  # ModelAccuracy.to_json() (schema version 2)
    failure: Mapped[str] = mapped_column(Text, default="", server_default="")  # schema version 3
    # Schema version 6: the driver that runs the search (``core.Lease``); all NULL when free.
    # Columns rather than a table of their own: taking a lease is then one conditional UPDATE
    # of the search's row, atomic on every backend.
    lease_token: Mapped[str | None] = mapped_column(String(64))
    lease_host: Mapped[str | None]
    lease_pid: Mapped[int | None] = mapped_column(BigInteger)
    lease_acquired_at: Mapped[float | None]
    lease_heartbeat_at: Mapped[float | None]
    lease_timeout: Mapped[float | None]


class CandidateRow(Base):
    """One candidate of a search, with its latest measurement flattened into columns."""

    __tablename__ = "candidates"
    __table_args__ = (
        UniqueConstraint("search_id", "fingerprint", name="uq_candidates_search_fingerprint"),
        Index("ix_candidates_rank", "search_id", "status", "time_median"),
        Index("ix_candidates_measured", "search_id", "measured_unix"),
        Index("ix_candidates_parent", "parent_id"),
        Index("ix_candidates_fingerprint", "fingerprint"),  # schema version 4: reuse across searches
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    search_id: Mapped[int] = mapped_column(ForeignKey("searches.id"))
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("candidates.id"))
    depth: Mapped[int]
    schedule: Mapped[str]  # Schedule.dumps()
    fingerprint: Mapped[str] = mapped_column(String(64))
    c_source: Mapped[str]
    proc_text: Mapped[str]
    status: Mapped[str] = mapped_column(String(16))
    error: Mapped[str]
    time_median: Mapped[float | None]
    time_min: Mapped[float | None]
    time_q1: Mapped[float | None]
    time_q3: Mapped[float | None]
    time_samples: Mapped[Any | None]
    time_inner: Mapped[int | None]
    max_error: Mapped[float | None]
    gflops: Mapped[float | None]
    speedup: Mapped[float | None]
    build_seconds: Mapped[float]
    run_seconds: Mapped[float]
    created_at: Mapped[float]
    measured_unix: Mapped[float | None]  # unix time of the latest measurement
    expanded: Mapped[bool]
    # Schema version 2:
    measured_at: Mapped[float | None]  # seconds of the search's own elapsed time when measured
    features: Mapped[Any | None]  # FeatureVector.to_json()
    predicted: Mapped[float | None]  # the cost model's log(time / root time) before measuring
    # Schema version 4: the measurement was taken from this earlier search's candidate (same C).
    # No foreign keys: plain integers are all a column added by ALTER TABLE can portably be.
    reused_search_id: Mapped[int | None]
    reused_candidate_id: Mapped[int | None]
    # Schema version 5: the yardstick a candidate was once timed beside, as JSON. No longer
    # read: kept so that older databases open unchanged. A new measurement of the row writes
    # SQL NULL over it (``none_as_null``), since the pair described the times it replaces.
    paired: Mapped[Any | None] = mapped_column(JSON(none_as_null=True))
    # Schema version 7: where the latest measurement was taken - the timing node's machine
    # (MachineInfo.to_json(), NULL: the search's own) and Ray node ids of the nodes that timed
    # and built the kernel (NULL or "": not on a Ray cluster, or not known).
    machine: Mapped[Any | None] = mapped_column(JSON(none_as_null=True))
    machine_fingerprint: Mapped[str | None] = mapped_column(String(32))
    node: Mapped[str | None] = mapped_column(String(64))
    built_node: Mapped[str | None] = mapped_column(String(64))
