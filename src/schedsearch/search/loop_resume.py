"""Taking up a stored search where its last run left it (``run_search`` with a search id).

Nothing read from the store is built as stored: the rows the run uses are those
``search.inherited`` rebuilt from their schedules, and a row whose schedule does not give
its recorded C is marked tampered here, before anything ranks, expands or re-measures it.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from schedsearch.core import CandidateRecord, EventKind, Measurement, SearchStatus, Status
from schedsearch.errors import SearchError

if TYPE_CHECKING:
    from schedsearch.search.loop import Run


def resume_run(run: Run) -> None:
    """Take up a stored search: its counters, clock and baseline, its rows (those the
    replay found tampered marked so), the strategy's frontier from what was measured, and
    what the last run left pending measured first (as rebuilt from its schedules)."""
    ledger = run.ledger
    assert ledger.sid is not None
    search = run.store.get_search(ledger.sid)
    ledger.counters = search.counters
    ledger.spend(starting=ledger.head_start)
    ledger.prior_elapsed = search.elapsed_seconds
    ledger.baseline = search.baseline_seconds
    # The last run's declared best is re-decided when this one ends. The stored config
    # becomes this run's - budgets extended, a new early stop - so that how the search
    # ended is read against the limits it ran with; ``remeasure`` stays as the search was
    # started (a resume's own ``--remeasure`` is for that run alone).
    config = dataclasses.replace(run.config, remeasure=search.config.remeasure)
    run.store.update_search(
        ledger.sid,
        status=SearchStatus.RUNNING,
        failure="",
        best_candidate_id=None,
        best_seconds=None,
        best_speedup=None,
        config=config,
    )
    records = run.store.candidates(ledger.sid)
    run.pipeline.seen = set(run.store.seen_fingerprints(ledger.sid))
    ledger.fp_of = {r.id: r.fingerprint for r in records}
    roots = [r for r in records if r.parent_id is None]
    if roots and roots[0].fingerprint != run.root.fingerprint:
        raise SearchError(f"search {ledger.sid} was started from different code than {run.workload.label} gives now")
    records = mark_tampered(run, records)
    ledger.earlier = frozenset(r.id for r in records)
    ledger.inherited = run.inherited
    ledger.emit(
        EventKind.STARTED,
        message=f"resuming search {ledger.sid} of {run.workload.label}{run._start_note()}{tampered_note(run)}",
    )
    if not roots:
        run._start()
        return
    ledger.root_record = roots[0]
    run.pipeline.seen.add(run.root.fingerprint)
    rerun_baseline = ledger.root_record.status is Status.PENDING or ledger.baseline is None
    if rerun_baseline:
        run._baseline()
    elif ledger.root_record.status is not Status.OK:
        raise SearchError(
            f"search {ledger.sid} cannot resume: its unscheduled proc failed ({ledger.root_record.status.value})"
        )
    # Measured records rebuild the strategy's frontier (their expanded flags included).
    for r in records:
        if r.status is Status.PENDING or (rerun_baseline and r.id == ledger.root_record.id):
            continue
        run.strategy.tell(r)
        ledger.offer(r)
    ledger.restart_streak()
    pending = [r for r in records if r.status is Status.PENDING and r.id != ledger.root_record.id]
    if pending:
        # Round 0: what the last run left pending, measured before anything new.
        # Only what was rebuilt from its schedule (``Ledger.candidate``).
        children = [c for r in pending for c in [ledger.candidate(r)] if c is not None]
        if children:
            run.pipeline.measure_first(children)


def mark_tampered(run: Run, records: list[CandidateRecord]) -> list[CandidateRecord]:
    """Mark the rows ``inherited`` found tampered (``Status.TAMPERED``, with why): from
    now on nothing ranks, expands, reuses or re-measures them. Returns ``records`` as now stored."""
    assert run.ledger.sid is not None
    root_id = next((r.id for r in records if r.parent_id is None), None)
    marked: dict[int, CandidateRecord] = {}
    for r in records:
        why = run.inherited.tampered.get(r.id)
        if why is not None and r.id != root_id and r.status is not Status.TAMPERED:
            m = Measurement(r.fingerprint, Status.TAMPERED, error=f"not used: {why}")
            marked[r.id] = run.store.record_measurement(run.ledger.sid, m, None, None)
            if r.status is Status.OK:  # the counts say what the rows now say
                run.ledger.counters = run.ledger.counters.plus(ok=-1, failed=1)
    return [marked.get(r.id, r) for r in records]


def tampered_note(run: Run) -> str:
    """What the replay found tampered, for the run's first event."""
    n = len(run.inherited.tampered)
    return f"; {n} stored candidate{'s' if n != 1 else ''} marked tampered (not replaying to their C)" if n else ""
