"""Records, enums and protocols shared by every package.

Standard library only. These frozen dataclasses are the only values that cross a package
boundary, a process or Ray boundary, or the store; each one round-trips through JSON with
``to_json`` / ``from_json`` (see ``encode`` / ``decode``).

Every name is importable from ``schedsearch.core``; the modules say where each lives:
``values`` (the kernel's name, hashes, name and integer checks), ``codec`` (JSON),
``enums``, ``records`` (workload, schedules, candidates, expansions), ``measurements``,
``configs``, ``search_records`` (a search as stored and observed), ``leases``, ``jobs``
(executor work) and ``protocols``.
"""

from schedsearch.core.codec import JsonRecord, T, decode, encode
from schedsearch.core.configs import FINALIST_RESERVE_SHARE, BenchConfig, ExpandOptions, ReuseScope, SearchConfig
from schedsearch.core.enums import (
    ArgRole,
    CostModelMode,
    DType,
    EventKind,
    ExpansionPart,
    FloatMode,
    JobKind,
    LeaseState,
    Phase,
    RewriteKind,
    SearchStatus,
    Status,
    StrategyKind,
    TimingMode,
)
from schedsearch.core.jobs import Job, JobResult
from schedsearch.core.leases import LEASE_BEAT_SHARE, LEASE_TIMEOUT_SECONDS, Lease, LeaseGrant, LeaseOwner
from schedsearch.core.measurements import MachineInfo, Measurement, Timing
from schedsearch.core.protocols import CandidateCostModel, CostModel, Executor, SearchStrategy, Store
from schedsearch.core.records import ArgSpec, ArgValue, Candidate, Expansion, FeatureVector, Rewrite, Schedule, Workload
from schedsearch.core.search_records import (
    CandidateRecord,
    Counters,
    ModelAccuracy,
    PastSchedule,
    ProgressPoint,
    SearchEvent,
    SearchRecord,
    TimeSpent,
    TrainingSample,
)
from schedsearch.core.values import INT64_MAX, INT64_MIN, KERNEL_SYMBOL, is_identifier, sha256_text

__all__ = [
    "FINALIST_RESERVE_SHARE",
    "INT64_MAX",
    "INT64_MIN",
    "KERNEL_SYMBOL",
    "LEASE_BEAT_SHARE",
    "LEASE_TIMEOUT_SECONDS",
    "ArgRole",
    "ArgSpec",
    "ArgValue",
    "BenchConfig",
    "Candidate",
    "CandidateCostModel",
    "CandidateRecord",
    "CostModel",
    "CostModelMode",
    "Counters",
    "DType",
    "EventKind",
    "Executor",
    "ExpandOptions",
    "Expansion",
    "ExpansionPart",
    "FeatureVector",
    "FloatMode",
    "Job",
    "JobKind",
    "JobResult",
    "JsonRecord",
    "Lease",
    "LeaseGrant",
    "LeaseOwner",
    "LeaseState",
    "MachineInfo",
    "Measurement",
    "ModelAccuracy",
    "PastSchedule",
    "Phase",
    "ProgressPoint",
    "ReuseScope",
    "Rewrite",
    "RewriteKind",
    "Schedule",
    "SearchConfig",
    "SearchEvent",
    "SearchRecord",
    "SearchStatus",
    "SearchStrategy",
    "Status",
    "Store",
    "StrategyKind",
    "T",
    "TimeSpent",
    "Timing",
    "TimingMode",
    "TrainingSample",
    "Workload",
    "decode",
    "encode",
    "is_identifier",
    "sha256_text",
]
