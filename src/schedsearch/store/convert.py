"""Rows to records and back. Private to ``schedsearch.store``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from schedsearch.core import (
    ArgSpec,
    CandidateRecord,
    Counters,
    FeatureVector,
    MachineInfo,
    Measurement,
    ModelAccuracy,
    Rewrite,
    RewriteKind,
    Schedule,
    SearchConfig,
    SearchRecord,
    SearchStatus,
    Status,
    Timing,
    Workload,
)
from schedsearch.errors import StoreError
from schedsearch.store.models import CandidateRow, SearchRow, WorkloadRow


def _invalid(what: str, row_id: object, exc: Exception) -> StoreError:
    return StoreError(
        f"the database holds a {what} row ({row_id}) that schedsearch would not have written ({exc}); "
        "it may have been edited by hand or tampered with, so it is not used"
    )


def workload_row(workload: Workload) -> WorkloadRow:
    return WorkloadRow(
        key=workload.key,
        path=workload.path,
        source=workload.source,
        source_sha256=workload.source_sha256,
        proc=workload.proc,
        sizes=[[name, value] for name, value in workload.sizes],
        args=[a.to_json() for a in workload.args],
        flops=workload.flops,
    )


def workload_record(row: WorkloadRow) -> Workload:
    """The workload, validated: names that go into generated code must be identifiers."""
    try:
        return Workload(
            path=row.path,
            source=row.source,
            source_sha256=row.source_sha256,
            proc=row.proc,
            sizes=tuple((str(name), int(value)) for name, value in row.sizes),
            args=tuple(ArgSpec.from_json(a) for a in row.args),
            flops=row.flops,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise _invalid("workload", f"id {row.id}", exc) from None


def search_record(row: SearchRow, workload: WorkloadRow) -> SearchRecord:
    return SearchRecord(
        id=row.id,
        workload=workload_record(workload),
        config=SearchConfig.from_json(row.config),
        status=SearchStatus(row.status),
        machine=MachineInfo.from_json(row.machine),
        started_at=row.started_at,
        ended_at=row.ended_at,
        counters=Counters.from_json(row.counters),
        baseline_seconds=row.baseline_seconds,
        best_candidate_id=row.best_candidate_id,
        best_seconds=row.best_seconds,
        best_speedup=row.best_speedup,
        elapsed_seconds=row.elapsed_seconds,
        model_accuracy=ModelAccuracy.from_json(row.model_accuracy) if row.model_accuracy else None,
        failure=row.failure or "",
    )


def search_columns(values: dict[str, Any]) -> dict[str, Any]:
    """``update_search`` values (already checked) as column values."""
    out = dict(values)
    if "status" in out:
        out["status"] = out["status"].value
    if "counters" in out:
        out["counters"] = out["counters"].to_json()
    if "config" in out:
        out["config"] = out["config"].to_json()
    if out.get("model_accuracy") is not None:
        out["model_accuracy"] = out["model_accuracy"].to_json()
    return out


def timing_columns(timing: Timing | None) -> dict[str, Any]:
    if timing is None:
        return {name: None for name in ("time_median", "time_min", "time_q1", "time_q3", "time_samples", "time_inner")}
    return {
        "time_median": timing.median,
        "time_min": timing.min,
        "time_q1": timing.q1,
        "time_q3": timing.q3,
        "time_samples": list(timing.samples),
        "time_inner": timing.inner,
    }


def place_columns(measurement: Measurement) -> dict[str, Any]:
    """Where the measurement was taken, as the ``machine``, ``machine_fingerprint``, ``node``
    and ``built_node`` columns (NULL for what is not known)."""
    machine = measurement.machine
    return {
        "machine": machine.to_json() if machine is not None else None,
        "machine_fingerprint": machine.fingerprint if machine is not None else None,
        "node": measurement.node or None,
        "built_node": measurement.built_node or None,
    }


class ScheduleReader:
    """``Schedule.loads`` for the many schedules of one tree, decoding each step once.

    A child's schedule is its parent's and one step more, and its stored text (canonical
    JSON, ``Schedule.dumps``) is its parent's text with that step inserted before the closing
    ``]}``. So once a parent is read, a child costs the decoding of its last step: reading
    a tree of n candidates of depth d decodes about n steps instead of n * d, which was most
    of the time it took to read a large tree. Gives the same Schedules as ``Schedule.loads``.
    """

    def __init__(self) -> None:
        self._read: dict[str, Schedule] = {}
        self._steps: dict[Any, Rewrite] = {}

    def __call__(self, text: str) -> Schedule:
        schedule = self._read.get(text)
        if schedule is None:
            schedule = self._read[text] = self._from_parent(text) or self._decode(text)
        return schedule

    def _from_parent(self, text: str) -> Schedule | None:
        # ``head + "]}"`` is a complete JSON text only when ``head`` ends between two steps
        # at the top level of the list (every bracket and string opened in it must close),
        # so finding it among the texts already read proves the split is a step boundary.
        cut = text.rfind(',{"')
        if cut < 0 or not text.endswith("]}"):
            return None
        parent = self._read.get(text[:cut] + "]}")
        if parent is None:
            return None
        try:
            rest = json.loads("[" + text[cut + 1 : -2] + "]")
        except ValueError:
            return None
        return Schedule(parent.steps + tuple(self._step(s) for s in rest))

    def _decode(self, text: str) -> Schedule:
        data = json.loads(text)
        steps = data.get("steps") if isinstance(data, dict) else None
        if not isinstance(steps, list) or set(data) != {"steps"}:
            return Schedule.from_json(data)
        return Schedule(tuple(self._step(s) for s in steps))

    def _step(self, data: Any) -> Rewrite:
        try:
            key = (data["kind"], data["target"], tuple(tuple(a) for a in data.get("args", ())))
            hash(key)
        except (KeyError, TypeError, AttributeError):
            return Rewrite.from_json(data)  # not what schedsearch writes: decoding says why
        step = self._steps.get(key)
        if step is None:
            # What ``Rewrite.from_json`` builds from this shape, without its generic decoder
            # (a bad kind or an argument that is not a pair raises ValueError there and here).
            step = Rewrite(RewriteKind(key[0]), key[1], tuple((name, value) for name, value in key[2]))
            self._steps[key] = step
        return step


def candidate_record(row: CandidateRow, schedules: Callable[[str], Schedule] = Schedule.loads) -> CandidateRecord:
    """The record of a candidate row (or of a row of its columns by the same names);
    ``schedules`` decodes the schedule (a ``ScheduleReader`` for many rows of one tree)."""
    try:
        return _candidate_record(row, schedules)
    except (KeyError, TypeError, ValueError) as exc:
        raise _invalid("candidate", f"id {row.id}", exc) from None


def _candidate_record(row: CandidateRow, schedules: Callable[[str], Schedule]) -> CandidateRecord:
    timing = None
    if row.time_median is not None:
        timing = Timing(
            median=row.time_median,
            min=row.time_min,  # type: ignore[arg-type]
            q1=row.time_q1,  # type: ignore[arg-type]
            q3=row.time_q3,  # type: ignore[arg-type]
            samples=tuple(float(s) for s in row.time_samples or ()),
            inner=row.time_inner if row.time_inner is not None else 1,
        )
    return CandidateRecord(
        id=row.id,
        search_id=row.search_id,
        parent_id=row.parent_id,
        depth=row.depth,
        schedule=schedules(row.schedule),
        fingerprint=row.fingerprint,
        status=Status(row.status),
        c_source=row.c_source,
        proc_text=row.proc_text,
        error=row.error,
        timing=timing,
        gflops=row.gflops,
        speedup=row.speedup,
        build_seconds=row.build_seconds,
        run_seconds=row.run_seconds,
        created_at=row.created_at,
        expanded=bool(row.expanded),
        max_error=row.max_error,
        measured_at=row.measured_at,
        measured_unix=row.measured_unix,
        features=features_record(row.features),
        predicted=row.predicted,
        reused_search_id=row.reused_search_id,
        reused_candidate_id=row.reused_candidate_id,
        machine=MachineInfo.from_json(row.machine) if row.machine is not None else None,
        node=row.node or "",
        built_node=row.built_node or "",
    )


def features_record(data: Any) -> FeatureVector | None:
    """A stored feature vector, or None when there is none (or it is not one)."""
    if not isinstance(data, dict) or "version" not in data or "values" not in data:
        return None
    return FeatureVector.from_json(data)
