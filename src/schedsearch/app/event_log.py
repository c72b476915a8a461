"""A search's events as a file of JSON lines (``run --events FILE``): what happened when.

The live view shows the present; this keeps the whole sequence - which parents each round
asked for and which part of their rewrites, when each expansion came in, when each candidate
was measured and how fast - so a search can be read afterwards (which round held the winner
up, what the workers were busy with) in a notebook or with ``jq``. One line per event, ticks
left out; each line is flushed as written, so a search that is killed leaves every event up
to that point.
"""

from __future__ import annotations

import json
from typing import Any, TextIO

from schedsearch.core import CandidateRecord, EventKind, SearchEvent


def record_summary(record: CandidateRecord) -> dict[str, Any]:
    """A candidate in an event line: who it is and what it measured, not its C or proc."""
    last = record.schedule.steps[-1] if record.schedule.steps else None
    return {
        "id": record.id,
        "parent_id": record.parent_id,
        "depth": record.depth,
        "step": f"{last.kind.value} {last.target}" if last is not None else None,
        "status": record.status.value,
        "seconds": record.seconds,
        "speedup": record.speedup,
        "predicted": record.predicted,
        "measured_at": record.measured_at,
        # Where it was measured: the cluster nodes that timed and built it, that node's machine.
        "node": record.node or None,
        "built_node": record.built_node or None,
        "machine": record.machine.fingerprint if record.machine is not None else None,
    }


def event_line(event: SearchEvent) -> dict[str, Any]:
    """One event as the JSON object written for it."""
    return {
        "kind": event.kind.value,
        "search_id": event.search_id,
        "elapsed": round(event.elapsed, 3),
        "phase": event.phase.value,
        "activity": event.activity,
        "message": event.message,
        "record": record_summary(event.record) if event.record is not None else None,
        "best": {"id": event.best.id, "seconds": event.best.seconds} if event.best is not None else None,
        "counters": event.counters.to_json(),
    }


class EventLog:
    """An observer that appends each event but ticks to ``stream`` as a JSON line. The
    caller owns the stream (opens and closes it); a resumed search appends to the same file."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def __call__(self, event: SearchEvent) -> None:
        if event.kind is EventKind.TICK:
            return
        self.stream.write(json.dumps(event_line(event)) + "\n")
        self.stream.flush()
