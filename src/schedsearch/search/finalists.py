"""The end of a run of a search: its finalists re-measured side by side, and its outcome.

Before a winner is declared, the fastest candidates (``config.finalists`` of them), the
ancestors of the fastest that the search measured near it, and the root are re-measured
side by side in one job (``JobKind.REMEASURE``); the winner, its time and its speedup come
from those numbers. Of the contenders that side by side cannot be told from the fastest
(``best_first.tied`` with ``TIE_SHARE``), the one with the fewest steps wins: the steps it
lacks bought nothing measurable. Why: steps measured faster only by the moment they were
timed at make a schedule that is neither readable nor as likely to replay (the measurements
are in ``benchmarks/RESULTS.md``, "The search loop's heuristics").

The time budget is wall time and includes the finalists: the search stops early enough
for the re-measurement (``finalist_reserve``, estimated from the contenders' own run
times), and a re-measurement still running at the budget's end (plus
``FINALIST_GRACE_SECONDS``) is abandoned for the search's own numbers, as is one that
fails or is stopped. An interrupted search re-measures nothing.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import TYPE_CHECKING

from schedsearch.core import (
    FINALIST_RESERVE_SHARE,
    CandidateRecord,
    EventKind,
    Executor,
    Job,
    JobKind,
    Measurement,
    Phase,
    SearchConfig,
    SearchStatus,
    Status,
    Store,
)
from schedsearch.search.best_first import tied
from schedsearch.search.frontier import rank_key
from schedsearch.search.ledger import TOP_N, Ledger
from schedsearch.search.outcome import SearchOutcome

if TYPE_CHECKING:  # the budget reads ``finalist_reserve`` from here
    from schedsearch.search.budget import Budget

#: A finalist whose time relative to the winner moved this much between the search's own
#: measurement and the side-by-side one is reported (``drift_note``): beyond the few percent
#: that timing noise moves it on a quiet machine.
DRIFT_NOTE = 0.05
#: How far past the time budget a running re-measurement of the finalists may go.
FINALIST_GRACE_SECONDS = 3.0
#: A contender at most this much slower than the fastest side by side ties it (and so do
#: those whose ranges overlap its range): side by side, a kernel's ratio to another varies
#: by 1-4% from one driver process to the next on the machines measured.
TIE_SHARE = 0.01
#: Ancestors of the search's fastest candidate join the finalists when the search measured
#: them within this factor of it (slower ones cannot tie it) ...
ANCESTOR_WITHIN = 1.2
#: ... at most this many of them, the nearest to the root first.
ANCESTORS = 8


def finalist_reserve(config: SearchConfig, top: Sequence[CandidateRecord], root: CandidateRecord | None) -> float:
    """Seconds to keep for re-measuring the finalists: their own run times (and the
    root's) with some slack, at most a quarter of the budget. ``top``: the fastest so far."""
    c = config
    if c.max_seconds is None or c.finalists <= 0 or not top:
        return 0.0
    contenders = [*top[: c.finalists], *([root] if root else [])]
    # The ancestors that may join them (``near_ancestors``), at about the fastest one's cost.
    ancestors = min(top[0].depth - 1, ANCESTORS) if top[0].depth > 1 else 0
    estimate = 1.0 + 1.5 * (sum(r.run_seconds for r in contenders) + ancestors * top[0].run_seconds)
    return min(estimate, FINALIST_RESERVE_SHARE * c.max_seconds)


def finish(
    ledger: Ledger,
    status: SearchStatus,
    executor: Executor,
    budget: Budget,
    *,
    stop: threading.Event,
    job_ids: Iterator[int],
    cancel: Callable[[], None],
    poll_seconds: float,
) -> SearchOutcome:
    """End the run with ``status``: re-measure the finalists (not when interrupted), store
    the declared best and the search's end, send the ``finished`` event, return the outcome.

    ``cancel`` abandons the work in flight, ``poll_seconds`` is the longest wait for the
    re-measurement before ``stop`` and the time budget are looked at again.
    """
    assert ledger.sid is not None
    ledger.record_accuracy()
    best = ledger.top[0] if ledger.top else None
    best_seconds = best.seconds if best else None
    best_speedup = best.speedup if best else None
    baseline = ledger.baseline
    if best is not None and status is not SearchStatus.INTERRUPTED:
        best, best_seconds, best_speedup, baseline = _finalists(
            ledger,
            best,
            executor,
            budget,
            stop=stop,
            job_ids=job_ids,
            cancel=cancel,
            poll_seconds=poll_seconds,
        )
    elif best is not None:
        ledger.emit(EventKind.FINALISTS, message="interrupted: finalists not re-measured; the search's own times stand")
    ledger.phase = Phase.DONE
    elapsed = ledger.elapsed()
    ledger.store.update_search(
        ledger.sid,
        status=status,
        ended_at=time.time(),
        counters=ledger.counters,
        elapsed_seconds=elapsed,
        best_candidate_id=best.id if best else None,
        best_seconds=best_seconds,
        best_speedup=best_speedup,
        baseline_seconds=baseline,
    )
    ledger.emit(EventKind.FINISHED, ledger.top[0] if ledger.top else best, message=status.value)
    return SearchOutcome(ledger.sid, status, best, best_seconds, best_speedup, baseline, ledger.counters, elapsed)


def _finalists(
    ledger: Ledger,
    best: CandidateRecord,
    executor: Executor,
    budget: Budget,
    *,
    stop: threading.Event,
    job_ids: Iterator[int],
    cancel: Callable[[], None],
    poll_seconds: float,
) -> tuple[CandidateRecord, float | None, float | None, float | None]:
    """Re-measure the top candidates and the root side by side; pick the winner from that.

    Falls back to the search's own measurements (and says so in the FINALISTS event)
    when the re-measurement cannot run, is stopped, outlasts the time budget, or gives no
    contender but the root an ``ok`` time: the root wins only by being timed fastest beside
    them, never because they were not timed. The event names every contender that did not
    re-measure ``ok``, with its status.
    """
    assert ledger.sid is not None and ledger.root_record is not None
    fallback = (best, best.seconds, best.speedup, ledger.baseline)
    # Only what the ledger can build: a row of an earlier run that was not rebuilt from its
    # schedule is left out (``Ledger.candidate``).
    top = [
        r
        for r in ledger.store.top_candidates(ledger.sid, max(1, budget.config.finalists))
        if r.status is Status.OK and r.id != ledger.root_record.id and ledger.candidate(r) is not None
    ]
    if not top:
        return fallback
    contenders = [ledger.root_record, *top]
    contenders += [
        r for r in near_ancestors(ledger.store, top[0], {r.id for r in contenders}) if ledger.candidate(r) is not None
    ]
    built = tuple(c for r in contenders for c in [ledger.candidate(r)] if c is not None)
    ledger.phase = Phase.REMEASURING
    ledger.emit(EventKind.TICK, message=f"re-measuring {len(contenders)} side by side")
    job = Job(next(job_ids), JobKind.REMEASURE, built)
    try:
        executor.submit(ledger.workload, ledger.root, [job])
        ms = _remeasured(ledger, job, executor, budget, stop=stop, poll_seconds=poll_seconds)
    except Exception as e:  # noqa: BLE001 - keep the search's result; report why
        cancel()
        ledger.emit(EventKind.FINALISTS, message=f"re-measurement failed: {type(e).__name__}: {e}")
        return fallback
    if ms is None:
        cancel()
        return fallback
    root_m = ms[0] if ms else None
    reference = root_m.seconds if root_m and root_m.status is Status.OK and root_m.seconds else ledger.baseline
    timed = [
        dataclasses.replace(
            r,
            timing=m.timing,
            speedup=(reference / m.seconds) if reference else None,
            gflops=ledger.workload.flops / m.seconds / 1e9 if ledger.workload.flops else None,
        )
        for r, m in zip(contenders, ms, strict=False)
        if m.status is Status.OK and m.seconds is not None and m.seconds > 0
    ]
    timed.sort(key=rank_key)
    failed = _failures(contenders, ms)
    if not any(r.id != ledger.root_record.id for r in timed):
        ledger.emit(EventKind.FINALISTS, message=f"no finalist re-measured ok{failed}; keeping the search's best")
        return fallback
    message = f"re-measured {len(contenders)} side by side" + drift_note(top, timed) + failed
    fastest = timed[0]
    winner = min((r for r in timed if tied(fastest, r, TIE_SHARE)), key=lambda r: (r.depth, rank_key(r)))
    timed.remove(winner)
    timed.insert(0, winner)
    # From here on events show the side-by-side times: they decide the winner.
    ledger.top = timed[:TOP_N]
    if winner is not fastest:
        assert winner.seconds is not None and fastest.seconds is not None  # only timed ones are here
        message += (
            f"; #{winner.id} ({_steps(winner.depth)}) ties the fastest, #{fastest.id} "
            f"({_steps(fastest.depth)}), within noise side by side "
            f"({winner.seconds / fastest.seconds - 1:+.1%}): the shorter schedule wins"
        )
    ledger.emit(EventKind.FINALISTS, winner, message=message, top=tuple(timed))
    stored = ledger.store.get_candidate(winner.id)
    return stored, winner.seconds, winner.speedup, reference


def _failures(contenders: Sequence[CandidateRecord], measured: Sequence[Measurement]) -> str:
    """``; not re-measured ok: #3 timeout (its error's first line), ...`` for the contenders
    whose side-by-side measurement was not ``ok`` ("" when every one was)."""
    bad = [
        f"#{r.id} {m.status.value}" + (f" ({m.error.strip().splitlines()[0][:120]})" if m.error.strip() else "")
        for r, m in zip(contenders, measured, strict=False)
        if m.status is not Status.OK or not m.seconds
    ]
    return f"; not re-measured ok: {', '.join(bad)}" if bad else ""


def _steps(n: int) -> str:
    return f"{n} step" if n == 1 else f"{n} steps"


def near_ancestors(store: Store, best: CandidateRecord, skip: Collection[int]) -> list[CandidateRecord]:
    """The ancestors of ``best`` (the root excluded) the search measured ``ok`` within
    ``ANCESTOR_WITHIN`` of it, nearest to the root first, at most ``ANCESTORS``, none of
    ``skip`` (ids): the shorter schedules that may do as well."""
    path: list[CandidateRecord] = []
    parent = best.parent_id
    seen = {best.id}
    while parent is not None and parent not in seen:  # edited rows may make a cycle
        seen.add(parent)
        record = store.get_candidate(parent)
        path.append(record)
        parent = record.parent_id
    near = [
        r
        for r in reversed(path)
        if r.parent_id is not None
        and r.id not in skip
        and r.status is Status.OK
        and r.seconds is not None
        and best.seconds is not None
        and r.seconds <= best.seconds * ANCESTOR_WITHIN
    ]
    return near[:ANCESTORS]


def drift_note(searched: Sequence[CandidateRecord], timed: Sequence[CandidateRecord]) -> str:
    """What the side-by-side times of the finalists (``timed``, fastest first, the root among
    them) say about the search's own (``searched``: the finalists as the search measured
    them): which one won when that changed, and - when it is ``DRIFT_NOTE`` or more - how
    far a finalist's time relative to the winner moved. Why: the search measures each
    candidate once, at its own moment, and a shared machine's speed drifts between moments;
    candidates the search found closer than that were ordered by when they were measured as
    much as by what they are."""
    before = {r.id: r.seconds for r in searched if r.seconds}
    pairs = [(r.id, r.seconds, before[r.id]) for r in timed if r.id in before and r.seconds]
    if len(pairs) < 2:
        return ""
    wid, wside, wown = pairs[0]
    note = ""
    leader = min(pairs, key=lambda p: p[2])[0]
    if leader != wid and timed[0].id == wid:  # (the root may win side by side: then no finalist did)
        note += f"; #{wid} is the fastest side by side, #{leader} was by the search's own times"
    moved = max(abs((side / wside) / (own / wown) - 1.0) for _, side, own in pairs[1:])
    if moved >= DRIFT_NOTE:
        note += (
            f"; a finalist's time relative to the winner moved by up to {moved:.0%} from the search's own: "
            f"candidates closer than that were ordered by the moment they were measured (this machine's speed "
            f"drifts)"
        )
    return note


def _remeasured(
    ledger: Ledger,
    job: Job,
    executor: Executor,
    budget: Budget,
    *,
    stop: threading.Event,
    poll_seconds: float,
) -> tuple[Measurement, ...] | None:
    """The re-measurement's results, or None (after saying why) when a stop or the end
    of the time budget (plus a little grace) comes first."""
    while True:
        if stop.is_set():
            ledger.emit(EventKind.FINALISTS, message="stopped during the re-measurement; the search's own times stand")
            return None
        if budget.overrun(FINALIST_GRACE_SECONDS):
            ledger.emit(
                EventKind.FINALISTS,
                message="the re-measurement outlasted the time budget; the search's own times stand",
            )
            return None
        for result in executor.poll(poll_seconds):
            if result.job.id == job.id:
                ledger.spend(measurements=result.measurements)
                return result.measurements
        ledger.tick()
