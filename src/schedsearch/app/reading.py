"""The use cases that read what is known: best schedules, apply one, explain, export.

None of these writes to the store. Code runs only as ``schedsearch.trust`` allows: a
workload the user names (a file, a proc object) is the user's choice; a workload source
stored in a database is embedded or executed only under ``check_stored_source``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schedsearch.app.compose import CLI, Spelling, bench_config, db_label, expand_options, open_db
from schedsearch.app.searching import WorkloadFile, load
from schedsearch.core import (
    CandidateRecord,
    LeaseOwner,
    LeaseState,
    Rewrite,
    Schedule,
    SearchRecord,
    SearchStatus,
    Store,
    Workload,
)
from schedsearch.errors import NoScheduleError, StoreError
from schedsearch.numbers import DeclaredBest, NumberKind, load_declared_best
from schedsearch.schedule_file import ScheduleFile, relative_workload_path
from schedsearch.store.leases import judge


def driver_gone(store: Store, search: SearchRecord) -> bool:
    """Whether a search recorded as running has no live driver: its process ended without
    finishing it (killed, a lost machine), so nothing will update it until it is resumed.
    A driver on another host counts as live until its lease's timeout has passed."""
    if search.status is not SearchStatus.RUNNING:
        return False
    return judge(store.lease(search.id), LeaseOwner.here(), time.time()) is not LeaseState.LIVE


@dataclass(frozen=True, slots=True)
class BestKnown:
    """A workload's best schedules across its searches: each search's declared best (with
    the numbers every view shows for it), fastest first, and the lineage of the first."""

    workload: Workload
    found: tuple[tuple[SearchRecord, DeclaredBest], ...]
    lineage: tuple[CandidateRecord, ...] = ()

    @property
    def records(self) -> tuple[CandidateRecord, ...]:
        return tuple(best.record for _, best in self.found)


def best_known(spec: WorkloadFile | Workload, top: int, db: str | None, spelling: Spelling = CLI) -> BestKnown:
    """The ``top`` searches of the workload in the database (any machine) by their declared
    best, fastest first (ties: the newer search, whose numbers are fresher)."""
    workload = load(spec, spelling)
    store = open_db(db, create=False, read_only=True)
    try:
        found = [
            (s, b) for s in store.list_searches(workload.key) for b in [load_declared_best(store, s)] if b is not None
        ]
        found.sort(key=lambda sb: (sb[1].seconds if sb[1].seconds is not None else math.inf, -sb[0].id))
        found = found[:top]
        lineage = tuple(store.lineage(found[0][1].record.id)) if found else ()
        return BestKnown(workload, tuple(found), lineage)
    finally:
        store.close()


@dataclass(frozen=True, slots=True)
class KnownBest:
    """The best schedule known for a workload on this machine, and the search that found it."""

    search: SearchRecord
    record: CandidateRecord
    seconds: float | None  # the re-measured time when the search declared it its best
    speedup: float | None


def best_on_this_machine(
    workload: Workload, store: Store, *, target: str | None = None, cc: str | None = None, cflags: str | None = None
) -> KnownBest | None:
    """The fastest schedule recorded for ``workload`` (same source, proc and sizes) by a
    search on this machine: same CPU, compiler, flags and Exo version (the machine
    fingerprint), for ``target`` or, when None, any target this CPU has. None when none is.

    Searches are compared by their declared best (re-measured side by side with the
    unscheduled proc at the end of the search), else by their fastest measured candidate.
    """
    from schedsearch.evaluate import cpu_flags, machine_info
    from schedsearch.targets import TARGETS, resolve

    flags = cpu_flags()
    targets = [resolve(target, flags)] if target is not None else [t for t in TARGETS if t.supported_by(flags)]
    wanted = {t.name.value: machine_info(bench_config(cc, cflags, 0, t.name.value)).fingerprint for t in targets}
    found: list[KnownBest] = []
    for search in store.list_searches(workload.key):
        if wanted.get(search.config.expand.target) != search.machine.fingerprint:
            continue
        if search.best_candidate_id is not None:
            record = store.get_candidate(search.best_candidate_id)
            found.append(
                KnownBest(search, record, search.best_seconds or record.seconds, search.best_speedup or record.speedup)
            )
            continue
        top = store.top_candidates(search.id, 1)
        if top:
            found.append(KnownBest(search, top[0], top[0].seconds, top[0].speedup))
    timed = [f for f in found if f.seconds is not None]
    if not timed:
        return None
    # Fastest first; on a tie the latest search (the newest toolchain state) wins.
    return min(timed, key=lambda f: (f.seconds, -f.search.id))


@dataclass(frozen=True, slots=True)
class Applied:
    """A workload's proc with the best known schedule replayed on it."""

    workload: Workload
    known: KnownBest
    proc: Any  # the scheduled Exo Procedure, sizes bound


def apply_best(
    spec: WorkloadFile | Workload, *, db: str | None, target: str | None = None, spelling: Spelling = CLI
) -> Applied:
    """Replay the best schedule known on this machine onto the workload's proc.

    Only the schedule (data) comes from the database; the proc is rebuilt from the
    source the user gave. Raises NoScheduleError when nothing is known.
    """
    from schedsearch.transforms import build_proc

    workload = load(spec, spelling)
    hint = f"tune it first: {spelling.tune_command(workload, db)}"
    if _missing_database(db):
        raise NoScheduleError(f"no schedule known for {workload.label}: there is no database {db_label(db)}; {hint}")
    store = open_db(db, create=False, read_only=True)
    try:
        known = best_on_this_machine(workload, store, target=target)
    finally:
        store.close()
    if known is None:
        where = f"for target {target} " if target is not None else ""
        raise NoScheduleError(
            f"no schedule known for {workload.label} {where}on this machine in {db_label(db)}; {hint}"
        )
    return Applied(workload, known, build_proc(workload, known.record.schedule))


def _missing_database(db: str | None) -> bool:
    """Whether ``db`` names an SQLite file that does not exist (nothing can be known)."""
    if db is not None and ("://" in db or db in ("memory", ":memory:")):
        return False
    return not Path(db_label(db)).expanduser().exists()


@dataclass(frozen=True, slots=True)
class Explanation:
    """A workload's loop nest and the rewrites legal at its root."""

    workload: Workload
    nest: str
    proposed: int
    legal: tuple[Rewrite, ...]


def explain(
    spec: WorkloadFile | Workload, *, parallel: bool = False, target: str = "auto", spelling: Spelling = CLI
) -> Explanation:
    """Every rewrite the search would propose at the root, kept when Exo accepts it."""
    from schedsearch.transforms import build_proc, loop_nest_text, propose, try_apply

    workload = load(spec, spelling)
    p = build_proc(workload)
    proposals = propose(p, expand_options(parallel, target))
    legal = tuple(r for r in proposals if try_apply(p, r) is not None)
    return Explanation(workload, loop_nest_text(p), len(proposals), legal)


# ------------------------------------------------------------------ export


@dataclass(frozen=True, slots=True)
class ExportSource:
    """The search and candidate an export is made from."""

    search: SearchRecord
    record: CandidateRecord
    declared: DeclaredBest | None = None  # the search's declared best and its numbers


def export_source(search_id: int | None, candidate_id: int | None, db: str | None) -> ExportSource:
    """A search's best candidate, or the candidate ``candidate_id``, from the database."""
    store = open_db(db, create=False, read_only=True)
    try:
        if candidate_id is not None:
            record = store.get_candidate(candidate_id)
            search = store.get_search(record.search_id)
            return ExportSource(search, record, load_declared_best(store, search))
        assert search_id is not None
        search = store.get_search(search_id)
        declared = load_declared_best(store, search)
        if declared is None:
            raise NoScheduleError(f"search {search_id} has no measured candidate to export")
        return ExportSource(search, declared.record, declared)
    finally:
        store.close()


def best_record(store: Store, search: SearchRecord) -> CandidateRecord | None:
    """The search's declared best, else its fastest ``ok`` candidate, else None."""
    declared = load_declared_best(store, search)
    return declared.record if declared is not None else None


def export_py(source: ExportSource, *, trust_db_source: bool = False) -> str:
    """A self-contained Exo script: it embeds the stored workload source, so that source
    must be one the user already has (``check_stored_source``) or be trusted. Every other
    stored string in it is quoted for where it lands (``transforms.quoting``); a stored
    schedule whose steps take arguments they cannot is refused (StoreError)."""
    from schedsearch.transforms import schedule_script
    from schedsearch.transforms.replay import MALFORMED
    from schedsearch.trust import check_stored_source

    search, record = source.search, source.record
    check_stored_source(search.workload, trust_db_source=trust_db_source, what=f"search {search.id}")
    try:
        return schedule_script(
            search.workload,
            record.schedule,
            cc=search.machine.compiler,
            cflags=tuple(search.machine.cflags),
            threads=search.config.bench.threads,
        )
    except MALFORMED as e:  # ArgError among them: arguments a step's kind cannot take
        why = " ".join(str(e).split())[:200]
        raise StoreError(
            f"the schedule stored for candidate {record.id} of search {search.id} is malformed ({why}): "
            "schedsearch would not have written it, so it is not exported"
        ) from None


def export_c(source: ExportSource, *, trust_db_source: bool = False) -> str:
    """The candidate's C under the user's proc name (replayed from its stored schedule,
    never the stored C), headed by the flags it was built with, each quoted for a C comment
    (``transforms.quoting``; generating it runs the stored source, under
    ``check_stored_source``)."""
    from schedsearch.transforms import user_c
    from schedsearch.transforms.quoting import in_c_comment
    from schedsearch.trust import check_stored_source

    search, record = source.search, source.record
    workload = search.workload
    check_stored_source(workload, trust_db_source=trust_db_source, what=f"search {search.id}")
    # The flags the search built it with: its vector instructions need their -m flags.
    flags = " ".join(in_c_comment(f) for f in search.machine.cflags) or "-O3 -march=native"
    if record.schedule.uses_openmp:
        flags += f" -fopenmp, run with OMP_NUM_THREADS={search.config.bench.threads} OMP_PROC_BIND=close"
    return (
        f"/* {in_c_comment(workload.label)}, schedule of candidate {record.id} of search {search.id}; "
        f"built and measured with: {in_c_comment(search.machine.compiler or 'cc')} {flags} */\n"
        + user_c(workload, record.schedule)
    )


def schedule_file_of(source: ExportSource, out_path: Path, db: str | None) -> ScheduleFile:
    """A schedule file for ``out_path`` (its workload path relative to it); runs nothing."""
    search, record = source.search, source.record
    workload = search.workload
    # The search's best with the numbers every command shows for it; another candidate
    # with its search-time median.
    best = source.declared if source.declared is not None and source.declared.record.id == record.id else None
    return ScheduleFile(
        workload_file=relative_workload_path(workload.path, out_path),
        proc=workload.proc,
        sizes=workload.sizes,
        source_sha256=workload.source_sha256,
        schedule=record.schedule,
        fingerprint=record.fingerprint,
        speedup=best.speedup if best is not None else record.speedup,
        seconds=best.seconds if best is not None else record.seconds,
        machine=search.machine,
        float_mode=search.config.bench.float_mode,
        threads=search.config.bench.threads if record.schedule.uses_openmp else 1,
        origin={
            "db": db_label(db),
            "search_id": search.id,
            "candidate_id": record.id,
            "numbers": (best.kind if best is not None else NumberKind.SEARCH_TIME).value,
        },
    )


def search_tree(search_id: int, db: str | None) -> Any:
    """A ``schedsearch.explore.SearchTree`` of the search, read from the database (steps
    printed without the names they give new loops)."""
    from schedsearch.explore import SearchTree
    from schedsearch.transforms import describe_step

    store = open_db(db, create=False, read_only=True)
    try:
        return SearchTree.load(store, search_id, describe=describe_step)
    finally:
        store.close()


def step_lines(schedule: Schedule) -> list[str]:
    """A schedule's steps as readable lines (without the names they give new loops)."""
    from schedsearch.transforms import describe_step

    return [describe_step(s) for s in schedule.steps]


def replay(spec: WorkloadFile | Workload, schedule: Schedule, spelling: Spelling = CLI) -> Any:
    """The workload's proc with ``schedule`` replayed on it (ReplayError names a step that
    does not apply)."""
    from schedsearch.transforms import build_proc

    return build_proc(load(spec, spelling), schedule)
