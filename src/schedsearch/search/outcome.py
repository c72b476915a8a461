"""What ``run_search`` returns."""

from __future__ import annotations

from dataclasses import dataclass

from schedsearch.core import CandidateRecord, Counters, SearchStatus


@dataclass(frozen=True, slots=True)
class SearchOutcome:
    """The end state of one run of a search (also stored in its search row).

    ``best_seconds`` and ``best_speedup`` come from the finalists' side-by-side
    re-measurement when it succeeded, otherwise from the search's own measurements.
    ``elapsed`` counts every run of the search (resumes add to it).
    """

    search_id: int
    status: SearchStatus
    best: CandidateRecord | None
    best_seconds: float | None
    best_speedup: float | None
    baseline_seconds: float | None
    counters: Counters
    elapsed: float
