"""Behaviour both stores share: field checks, progress curves and error sentences.

Kept free of SQLAlchemy so that the in-memory twin and the SQL store cannot drift apart on
anything but storage.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from schedsearch.core import (
    CandidateRecord,
    Counters,
    FeatureVector,
    ModelAccuracy,
    PastSchedule,
    ProgressPoint,
    SearchConfig,
    SearchStatus,
    Status,
    TrainingSample,
)
from schedsearch.errors import NotFoundError, StoreError

#: Fields ``Store.update_search`` may set.
SEARCH_FIELDS = frozenset(
    {
        "status",
        "ended_at",
        "counters",
        "baseline_seconds",
        "best_candidate_id",
        "best_seconds",
        "best_speedup",
        "elapsed_seconds",
        "model_accuracy",
        "failure",
        "config",  # a resumed search's: budgets extended, a new early stop (``SearchConfig``)
    }
)


def check_search_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Validate ``update_search`` keyword arguments and coerce them to their record types."""
    unknown = sorted(set(fields) - SEARCH_FIELDS)
    if unknown:
        raise TypeError(
            f"update_search() got unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(SEARCH_FIELDS))}"
        )
    out = dict(fields)
    if "status" in out:
        out["status"] = SearchStatus(out["status"])
    if "counters" in out and not isinstance(out["counters"], Counters):
        raise TypeError(f"update_search(counters=...) needs a Counters, got {type(out['counters']).__name__}")
    if "failure" in out:
        out["failure"] = str(out["failure"]).strip().splitlines()[0] if str(out["failure"]).strip() else ""
    if "elapsed_seconds" in out:
        out["elapsed_seconds"] = float(out["elapsed_seconds"])
    if "config" in out and not isinstance(out["config"], SearchConfig):
        raise TypeError(f"update_search(config=...) needs a SearchConfig, got {type(out['config']).__name__}")
    accuracy = out.get("model_accuracy")
    if accuracy is not None and not isinstance(accuracy, ModelAccuracy):
        raise TypeError(f"update_search(model_accuracy=...) needs a ModelAccuracy, got {type(accuracy).__name__}")
    return out


@dataclass(frozen=True, slots=True)
class Measured:
    """The few facts of one measured candidate that the progress curve needs."""

    candidate_id: int
    status: Status
    seconds: float | None
    speedup: float | None
    measured_unix: float
    measured_at: float | None  # seconds of the search's elapsed time (None before schema 2)


def progress_points(started_at: float, measured: Iterable[Measured]) -> list[ProgressPoint]:
    """One point per improvement of the best ``ok`` time, in measurement order.

    ``measured`` must be sorted by (measured_unix, candidate id). ``count`` counts every
    measured candidate so far, failures included, because that is what the budget spends.
    ``elapsed`` is the search's own elapsed time (resumes do not count the time between
    runs); the wall clock since ``started_at`` stands in where it was not recorded.
    """
    points: list[ProgressPoint] = []
    best: float | None = None
    for count, m in enumerate(measured, start=1):
        if m.status is not Status.OK or m.seconds is None:
            continue
        if best is None or m.seconds < best:
            best = m.seconds
            points.append(
                ProgressPoint(
                    count=count,
                    elapsed=m.measured_at if m.measured_at is not None else m.measured_unix - started_at,
                    candidate_id=m.candidate_id,
                    seconds=m.seconds,
                    speedup=m.speedup,
                )
            )
    return points


def training_sample(
    features: FeatureVector | None, version: str, seconds: float | None, baseline: float | None, workload_key: str
) -> TrainingSample | None:
    """A measured candidate as a cost-model sample, or None when it cannot be one (no
    features of this version, no time, no root time)."""
    if features is None or features.version != version or not seconds or not baseline or seconds <= 0 or baseline <= 0:
        return None
    return TrainingSample(features, math.log(seconds / baseline), workload_key)


def stands_for_a_measurement(record: CandidateRecord) -> bool:
    """Whether a stored candidate's measurement may be reused: an original one (not itself
    reused) with a reusable status, and a time when it is ``ok``."""
    return (
        record.status.reusable
        and record.reused_candidate_id is None
        and (record.status is not Status.OK or (record.seconds is not None and record.seconds > 0))
    )


def past_schedule(
    record: CandidateRecord, workload_key: str, sizes: tuple[tuple[str, int], ...], target: str
) -> PastSchedule:
    """A measured ``ok`` candidate as a warm-start seed."""
    assert record.seconds is not None
    return PastSchedule(
        search_id=record.search_id,
        candidate_id=record.id,
        workload_key=workload_key,
        sizes=sizes,
        target=target,
        schedule=record.schedule,
        seconds=record.seconds,
        speedup=record.speedup,
    )


# --------------------------------------------------------------------------- error sentences


def no_search(where: str, search_id: int) -> NotFoundError:
    return NotFoundError(f"no search {search_id} in {where}; `schedsearch list` shows the searches")


def no_candidate(where: str, candidate_id: int) -> NotFoundError:
    return NotFoundError(f"no candidate {candidate_id} in {where}; `schedsearch tree <search>` lists the candidates")


def not_in_search(where: str, candidate_id: int, search_id: int) -> StoreError:
    return StoreError(f"candidate {candidate_id} in {where} belongs to another search, not search {search_id}")


def no_fingerprint(where: str, search_id: int, fingerprint: str) -> StoreError:
    return StoreError(
        f"search {search_id} in {where} has no candidate with fingerprint {fingerprint[:16]}; "
        "add the candidate before recording its measurement"
    )


def broken_lineage(where: str, candidate_id: int, parent_id: int) -> StoreError:
    """A parent chain that names a missing row or loops back: rows written outside schedsearch."""
    return StoreError(
        f"candidate {candidate_id} in {where} has a broken line of parents (at parent {parent_id}: missing, "
        "or a loop); the database was changed outside schedsearch - use a copy you trust"
    )


def missing_parent(where: str, search_id: int, fingerprint: str, parent: str) -> StoreError:
    return StoreError(
        f"candidate {fingerprint[:16]} names parent {parent[:16]}, which search {search_id} in {where} "
        "does not hold; add the parent first"
    )
