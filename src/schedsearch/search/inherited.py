"""What a resumed search takes from its earlier runs: rows rebuilt from their schedules.

A database is data, and anyone who can write the file can write any row. A row's
``c_source`` is C: compiled and loaded, a constructor in it runs, whatever its
``fingerprint`` says. So a resumed run builds nothing a stored row holds. Each row of an
earlier run that the run will build is rebuilt first by replaying its stored *schedule* on
the workload (``replay``: Exo, from the workload source the user vouched for):

- the fastest ``ok`` rows, until ``config.finalists`` of them rebuild (the finalists come
  from them), and their ancestors (which join the finalists when they ran
  near the fastest);
- the ``pending`` rows, in the order the run measures them, as many as it can measure:
  its ``max_candidates`` left, within ``REPLAY_SHARE`` of its time budget left. Replaying
  costs what expanding did (Exo: 0.13 s a row on SGEMM 64's register tiles, Zen 5), and an
  interrupted search can leave a whole round pending. The rest stay pending for a later run.

A row whose stored C does not hash to its fingerprint (every row is checked: it costs a
hash), whose replay gives C with another fingerprint than the row's, or that does not replay
at all, is ``tampered``: the loop marks it so (``Status.TAMPERED``) and it is never built,
measured, ranked, expanded or reported again. Rows the run will not build are not replayed:
a search can hold thousands. The ledger builds no other row of an earlier run
(``Ledger.candidate``), so a row this module did not rebuild is never compiled; at worst it
is left out of the finalists, or measured in a later run.

Replaying runs Exo, so the caller does it before the search starts (``app``): Exo must not
run in the driver beside the cost model's training thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from schedsearch.core import (
    Candidate,
    CandidateRecord,
    Schedule,
    SearchConfig,
    SearchRecord,
    Status,
    Store,
    sha256_text,
)
from schedsearch.search.frontier import rank_key

#: The pending rows of a resumed run are replayed within this share of its time budget left.
REPLAY_SHARE = 0.25


@dataclass(frozen=True, slots=True)
class Inherited:
    """The rows of a search's earlier runs that a resumed run may build.

    ``rebuilt``: record id -> the candidate replayed from the row's schedule (its fingerprint
    is the row's; its C is the replay's, never the row's). ``tampered``: record id -> why the
    row is not used (one line). ``left``: pending rows not replayed (the run cannot measure
    them; a later run will). ``seconds``: the time the replays took.
    """

    rebuilt: Mapping[int, Candidate] = field(default_factory=dict)
    tampered: Mapping[int, str] = field(default_factory=dict)
    left: int = 0
    seconds: float = 0.0

    def summary(self) -> list[str]:
        """Lines for a person: what was rebuilt, left pending, and found tampered."""
        if not self.rebuilt and not self.tampered:
            return []
        n = len(self.rebuilt)
        line = (
            f"resume: {n} stored candidate{'s' if n != 1 else ''} rebuilt from "
            f"{'their schedules' if n != 1 else 'its schedule'} in {self.seconds:.1f} s (no stored C is compiled)"
        )
        if self.left:
            line += f"; {self.left} pending left for a later run (more than this run can measure)"
        lines = [line]
        if self.tampered:
            ids = sorted(self.tampered)
            shown = ", ".join(f"#{i}" for i in ids[:8]) + (f" and {len(ids) - 8} more" if len(ids) > 8 else "")
            lines.append(
                f"resume: {len(ids)} stored candidate{'s' if len(ids) != 1 else ''} ({shown}) "
                f"{'do' if len(ids) != 1 else 'does'} not replay to the C recorded for "
                f"{'them' if len(ids) != 1 else 'it'}: marked tampered, never built or ranked "
                f"(#{ids[0]}: {self.tampered[ids[0]]})"
            )
        return lines


def rebuild_inherited(
    store: Store,
    search_id: int,
    root: Candidate,
    config: SearchConfig,
    replay: Callable[[Schedule], Candidate],
    *,
    clock: Callable[[], float] = time.monotonic,
) -> Inherited:
    """Rebuild the rows of search ``search_id`` that a resumed run with ``config`` (its budgets
    extended) will build (see the module).

    ``root`` is the unscheduled candidate the resumed run starts from (the ledger builds it,
    never the root row). ``replay`` turns a schedule into this workload's candidate or raises
    (any exception: the row does not replay). Reads the store; writes nothing.
    """
    started = clock()
    search = store.get_search(search_id)
    records = store.candidates(search_id)
    roots = [r for r in records if r.parent_id is None]
    if roots and roots[0].fingerprint != root.fingerprint:
        return Inherited()  # another proc than the search's: the run refuses it (``run_search``)
    books = _Books(root_id=roots[0].id if roots else None, root_fingerprint=root.fingerprint, replay=replay)
    for record in records:
        if (
            record.id != books.root_id
            and record.status is not Status.TAMPERED
            and sha256_text(record.c_source) != record.fingerprint
        ):
            books.tampered[record.id] = "its stored C does not hash to its fingerprint: it was edited"
    by_id = {r.id: r for r in records}
    fastest: list[CandidateRecord] = []
    for record in sorted((r for r in records if r.status is Status.OK and r.seconds is not None), key=rank_key):
        if len(fastest) >= max(1, config.finalists):
            break
        if books.rebuilds(record):
            fastest.append(record)
    for record in fastest:
        for ancestor in _ancestors(record, by_id):
            if ancestor.status is Status.OK:
                books.rebuilds(ancestor)
    pending = [r for r in records if r.status is Status.PENDING and r.id != books.root_id]
    count, seconds = _room(search, config)
    measurable = 0
    for index, record in enumerate(pending):
        if (count is not None and measurable >= count) or (seconds is not None and clock() - started >= seconds):
            return Inherited(books.rebuilt, books.tampered, len(pending) - index, clock() - started)
        measurable += books.rebuilds(record)
    return Inherited(books.rebuilt, books.tampered, 0, clock() - started)


def _room(search: SearchRecord, config: SearchConfig) -> tuple[int | None, float | None]:
    """How many candidates the resumed run may measure, and the seconds its pending rows may
    be replayed in (None: no limit)."""
    count = None
    if config.max_candidates is not None:
        count = max(0, config.max_candidates - search.counters.measured)
    seconds = None
    if config.max_seconds is not None:
        seconds = REPLAY_SHARE * max(0.0, config.max_seconds - search.elapsed_seconds)
    return count, seconds


@dataclass
class _Books:
    """Which rows rebuilt and which did not (private to ``rebuild_inherited``)."""

    root_id: int | None
    root_fingerprint: str
    replay: Callable[[Schedule], Candidate]
    rebuilt: dict[int, Candidate] = field(default_factory=dict)
    tampered: dict[int, str] = field(default_factory=dict)

    def rebuilds(self, record: CandidateRecord) -> bool:
        """Whether ``record`` is rebuilt from its schedule (replayed once, at most)."""
        if record.id == self.root_id or record.fingerprint == self.root_fingerprint:
            return True  # the ledger builds the root it was given
        if record.id in self.rebuilt or record.id in self.tampered:
            return record.id in self.rebuilt
        try:
            candidate = self.replay(record.schedule)
        except Exception as exc:  # noqa: BLE001 - any failure to replay is the row's, not the run's
            reason = " ".join(str(exc).split())[:200] or type(exc).__name__
            self.tampered[record.id] = f"its schedule does not replay: {reason}"
            return False
        if candidate.fingerprint != record.fingerprint:
            self.tampered[record.id] = (
                f"its schedule replays to C {candidate.fingerprint[:12]}, not the {record.fingerprint[:12]} it records"
            )
            return False
        self.rebuilt[record.id] = candidate
        return True


def _ancestors(record: CandidateRecord, by_id: Mapping[int, CandidateRecord]) -> Iterator[CandidateRecord]:
    """``record``'s parent, its parent's parent, ... (a cycle in edited rows ends the walk)."""
    seen = {record.id}
    parent = by_id.get(record.parent_id) if record.parent_id is not None else None
    while parent is not None and parent.id not in seen:
        seen.add(parent.id)
        yield parent
        parent = by_id.get(parent.parent_id) if parent.parent_id is not None else None
