"""Which rewrite kinds a search tried, which were legal, and which led somewhere.

Each recorded candidate is its parent plus one rewrite (its last step), so counting
candidates by the kind of their last step counts the rewrites the search tried (duplicates
of already-seen C are not recorded and so not counted).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from schedsearch.core import CandidateRecord, Status


@dataclass(frozen=True, slots=True)
class KindStats:
    """One rewrite kind's record in a search."""

    kind: str
    tried: int  # recorded candidates whose last step is of this kind
    legal: int  # ... that Exo accepted (every status but ``illegal``)
    ok: int  # ... that built, ran and verified
    faster: int  # ... that were faster than their parent
    on_best_path: int  # steps of this kind on the path from the root to the best
    best_gain: float | None  # the largest parent time / child time among them


def kind_stats(records: Iterable[CandidateRecord], best_path: Iterable[CandidateRecord]) -> list[KindStats]:
    """Per-kind counts over ``records``, most tried first (ties by name)."""
    records = list(records)
    by_id: Mapping[int, CandidateRecord] = {r.id: r for r in records}
    on_path: dict[str, int] = {}
    for r in best_path:
        if r.schedule.steps:
            kind = r.schedule.steps[-1].kind.value
            on_path[kind] = on_path.get(kind, 0) + 1
    rows: dict[str, list[int]] = {}
    gains: dict[str, float] = {}
    for r in records:
        if not r.schedule.steps:
            continue  # the unscheduled root
        kind = r.schedule.steps[-1].kind.value
        counts = rows.setdefault(kind, [0, 0, 0, 0])
        counts[0] += 1
        counts[1] += r.status is not Status.ILLEGAL
        counts[2] += r.status is Status.OK
        parent = by_id.get(r.parent_id) if r.parent_id is not None else None
        if r.seconds and parent is not None and parent.seconds:
            gain = parent.seconds / r.seconds
            counts[3] += gain > 1.0
            gains[kind] = max(gains.get(kind, 0.0), gain)
    stats = [
        KindStats(kind, tried, legal, ok, faster, on_best_path=on_path.get(kind, 0), best_gain=gains.get(kind))
        for kind, (tried, legal, ok, faster) in rows.items()
    ]
    stats.sort(key=lambda s: (-s.tried, s.kind))
    return stats
