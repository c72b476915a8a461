"""The Python front door: ``tune()``, ``resume()``, ``apply()`` and ``load_schedule()``.

Like the CLI, this module only turns arguments into the use cases of ``schedsearch.app``
and their records into what a Python user wants back: Exo procedures, C code, a
``SearchTree``. It accepts a workload file's path or a ``@proc`` object (from a notebook
cell, a script or a test), whose source is captured (``transforms.capture``) so that any
worker can rebuild it::

    import schedsearch
    result = schedsearch.tune(sgemm, {"M": 256, "N": 256, "K": 256}, budget=60)
    result.proc          # the tuned Exo procedure, sizes bound
    schedsearch.apply(sgemm, {"M": 256, "N": 256, "K": 256})   # later: the best known, no search
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from schedsearch.app import (
    PYTHON,
    ExportSource,
    SearchRun,
    SearchSession,
    SearchSettings,
    WorkloadFile,
    apply_best,
    capture,
    db_label,
    gflops_of,
    replay,
    resume_search,
    schedule_file_of,
    search_tree,
    start_search,
    step_lines,
)
from schedsearch.app.settings import SettingError, checked, knobs
from schedsearch.core import (
    CandidateRecord,
    Schedule,
    SearchEvent,
    SearchRecord,
    SearchStatus,
    Workload,
)
from schedsearch.errors import NoScheduleError
from schedsearch.progress import progress_renderer
from schedsearch.schedule_file import ScheduleFile, read_schedule_file, write_schedule_file

if TYPE_CHECKING:
    from schedsearch.explore import SearchTree

#: What ``tune()`` takes as its workload: a path to a workload file, or an Exo ``@proc``.
ProcOrPath = Any


@dataclass(frozen=True, eq=False)
class TuneResult:
    """What a search found: the tuned proc, its C, its numbers, and the search's record.

    ``seconds`` and ``speedup`` are the best candidate's, re-measured side by side with
    the unscheduled proc at the end of the search (search-time medians when the search
    ended before that). ``proc`` has the sizes bound (``partial_eval``); with no
    measured candidate (a search interrupted at once) it is the unscheduled proc.
    """

    search_id: int
    status: SearchStatus
    workload: Workload = field(repr=False)
    schedule: Schedule = field(repr=False)
    proc: Any = field(repr=False)
    c_code: str = field(repr=False)
    seconds: float | None
    speedup: float | None
    gflops: float | None
    baseline_seconds: float | None
    target: str
    db: str
    search: SearchRecord = field(repr=False)
    best: CandidateRecord | None = field(repr=False)

    @cached_property
    def tree(self) -> SearchTree:
        """The search as a ``schedsearch.explore.SearchTree`` (read from the database on
        first use). Its tables and plots need the ``notebook`` extra (pandas, matplotlib,
        networkx): ``pip install 'schedsearch[notebook]'``."""
        return search_tree(self.search_id, self.db)

    @property
    def steps(self) -> list[str]:
        """The schedule as readable lines, one per step."""
        return step_lines(self.schedule)

    def save(self, path: str | os.PathLike) -> Path:
        """Write the best schedule as a schedule file (``load_schedule(path).apply(proc)``
        replays it; ``schedsearch regress`` checks it when the workload is a file)."""
        if self.best is None:
            raise NoScheduleError(f"search {self.search_id} has no measured candidate to save")
        out = Path(path).resolve()
        write_schedule_file(out, schedule_file_of(ExportSource(self.search, self.best), out, self.db))
        return out

    def __str__(self) -> str:
        numbers = [f"{self.speedup:.3g}x faster" if self.speedup is not None else "no speedup measured"]
        if self.gflops is not None:
            numbers.append(f"{self.gflops:.3g} GFLOP/s")
        steps = "\n".join(f"  {i}. {s}" for i, s in enumerate(self.steps, 1)) or "  (unscheduled)"
        return (
            f"search {self.search_id} of {self.workload.label} ({self.status.value}, target {self.target}): "
            f"{', '.join(numbers)}\n{steps}"
        )


def tune(
    proc_or_path: ProcOrPath,
    sizes: Mapping[str, int] | None = None,
    *,
    proc: str | None = None,
    db: str | os.PathLike | None = None,
    address: str | None = None,
    settings: SearchSettings | None = None,
    on_progress: Callable[[SearchEvent], None] | None = None,
    progress: bool | None = None,
    **setting: Any,
) -> TuneResult:
    """Search for a fast schedule and return the tuned proc: ``schedsearch run`` in Python.

    ``proc_or_path`` is an Exo ``@proc`` (its source is captured: the definition and the
    names it uses) or the path of a workload file (``proc`` names the proc when the file
    holds several). ``sizes`` binds size arguments (a file's ``SCHEDSEARCH_SIZES`` gives
    defaults). ``db`` is the results database (default ``schedsearch.db`` in the current
    directory), where ``apply()`` and the CLI find the search later. Runs in this process
    unless ``workers`` >= 1 or ``address`` (a Ray cluster) is given.

    The search's settings are ``SearchSettings``' fields — the options of ``schedsearch
    run``, with underscores — given as keywords (``budget=60, target="avx2"``), or all at
    once as ``settings`` (keywords then replace its fields). Each has ``SearchSettings``'
    default, except ``workers``: 0 here. ``budget`` is the search's wall time in seconds,
    counted once the workers are ready; ``early_stop`` is True (the default stopping rule,
    ``schedsearch.stopping``), False (never before a budget is spent) or a number of
    candidates in a row without a gain beyond noise. A setting that does not exist, or a
    value it cannot take, raises ``SettingError`` (a ``ValueError``) naming it.

    ``on_progress`` receives every ``SearchEvent`` (an exception it raises stops the search,
    which is then ``interrupted`` and resumable, and is raised again here); ``progress``
    shows a bar (True), none (False), or a bar only in Jupyter (None). A first interrupt
    (Ctrl-C, a notebook's stop button) ends the search cleanly: the result then has status
    ``interrupted`` and the search can be continued with ``resume()``. Raises a
    ``SchedsearchError`` (with one sentence) for a workload, compiler, database or cluster
    that cannot be used.
    """
    started = time.monotonic()  # from here to the workers' start: ``time_spent.starting``
    chosen = SearchSettings.of(**{**(_fields(settings) if settings is not None else {"workers": 0}), **setting})
    spec = _workload(proc_or_path, sizes, proc)
    db = _db(db)
    with start_search(spec, chosen, db=db, spelling=PYTHON) as session:
        return _search(session, db, address, on_progress, progress, started)


def resume(
    search_id: int,
    *,
    db: str | os.PathLike | None = None,
    address: str | None = None,
    trust_db_source: bool = False,
    cc: str | None = None,
    cflags: str | None = None,
    trust_db_config: bool = False,
    on_progress: Callable[[SearchEvent], None] | None = None,
    progress: bool | None = None,
    **setting: Any,
) -> TuneResult:
    """Continue a search (interrupted, or completed with more ``budget`` seconds or
    ``max_candidates``); nothing measured is measured again. The settings ``resume``
    takes (``budget``, ``max_candidates``, ``early_stop``, ``workers``, ``remeasure``) are
    ``tune()``'s; one left out keeps the value the search was started with.

    Nothing the database holds runs. The workload source stored in it runs only when its
    file is still here with the same content, or with ``trust_db_source`` (a proc captured
    from an object has no file: pass ``trust_db_source=True`` for it). The search is built
    with ``cc`` and ``cflags`` (None: ``tune()``'s defaults), never with the compiler and
    flags stored with it: a search stored with others is refused unless
    ``trust_db_config=True``, which goes on with these. Candidates are rebuilt from their
    stored schedules; one whose schedule does not give the C recorded for it is marked
    ``tampered`` and never used.
    """
    started = time.monotonic()
    resumable = [name for name, (knob, _) in knobs().items() if knob.resumable]
    for name in setting:
        if name not in resumable:
            raise SettingError(f"{name!r} is not a setting resume() takes; it takes {', '.join(resumable)}")
    for name, value in (("cc", cc), ("cflags", cflags)):
        if value is not None:
            checked(name, value)
    db = _db(db)
    with resume_search(
        search_id,
        db=db,
        trust_db_source=trust_db_source,
        cc=cc,
        cflags=cflags,
        trust_db_config=bool(trust_db_config),
        spelling=PYTHON,
        **setting,
    ) as session:
        return _search(session, db, address, on_progress, progress, started)


def _fields(settings: SearchSettings) -> dict[str, Any]:
    """The fields of ``settings`` by name (what ``SearchSettings.of`` takes)."""
    if not isinstance(settings, SearchSettings):
        raise SettingError(f"settings must be a SearchSettings, not {type(settings).__name__}")
    return {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)}


def apply(
    proc_or_path: ProcOrPath,
    sizes: Mapping[str, int] | None = None,
    *,
    db: str | os.PathLike | None = None,
    target: str | None = None,
    proc: str | None = None,
) -> Any:
    """The Exo procedure with the best schedule known for this workload (same source, proc
    and sizes) on this machine (same CPU, compiler, flags and Exo version), from ``db``.

    ``target`` restricts it to searches for that instruction set (default: any this CPU
    has). Only the schedule comes from the database; the proc is rebuilt from what you
    pass. Raises ``NoScheduleError`` when none is known, saying how to tune it.
    """
    return apply_best(_workload(proc_or_path, sizes, proc), db=_db(db), target=target, spelling=PYTHON).proc


@dataclass(frozen=True)
class LoadedSchedule:
    """A schedule file read (and validated) as data: its steps are never executed, only
    replayed with Exo's scheduling operations onto a proc you give."""

    path: str
    file: ScheduleFile = field(repr=False)

    @property
    def schedule(self) -> Schedule:
        return self.file.schedule

    @property
    def proc(self) -> str:
        """The name of the proc the schedule was recorded for."""
        return self.file.proc

    @property
    def sizes(self) -> dict[str, int]:
        return dict(self.file.sizes)

    @property
    def speedup(self) -> float | None:
        """The speedup recorded with the schedule (on ``file.machine``)."""
        return self.file.speedup

    @property
    def target(self) -> str:
        return self.file.needs_target

    def apply(
        self, proc_or_path: ProcOrPath, sizes: Mapping[str, int] | None = None, *, proc: str | None = None
    ) -> Any:
        """Replay the schedule onto ``proc_or_path`` (a ``@proc`` or a workload file; for a
        file, ``proc`` defaults to the recorded proc's name) with ``sizes`` (default: the
        recorded ones). Raises ``ReplayError`` naming the first step that does not apply."""
        if isinstance(proc_or_path, (str, os.PathLike)) and proc is None:
            proc = self.file.proc
        chosen = dict(self.file.sizes) if sizes is None else sizes
        return replay(_workload(proc_or_path, chosen, proc), self.file.schedule, PYTHON)


def load_schedule(path: str | os.PathLike) -> LoadedSchedule:
    """Read a schedule file (``schedsearch export --format json``, ``TuneResult.save``).

    Raises ``ScheduleFileError`` for a file that is unreadable or malformed.
    """
    return LoadedSchedule(os.fspath(path), read_schedule_file(path))


# ------------------------------------------------------------------ helpers


def _search(
    session: SearchSession,
    db: str | None,
    address: str | None,
    on_progress: Callable[[SearchEvent], None] | None,
    progress: bool | None,
    started: float | None = None,
) -> TuneResult:
    config = session.config
    renderer = progress_renderer(progress, config.max_seconds, config.max_candidates, session.workload.label)
    listeners = [f for f in (renderer, on_progress) if f is not None]

    def on_event(event: SearchEvent) -> None:
        for listener in listeners:
            listener(event)

    try:
        with session.runner(address) as runner:
            # Only SIGINT: a library leaves SIGTERM to its host process.
            run = runner.run(on_event, signals=(signal.SIGINT,), started=started)
    finally:
        if renderer is not None:
            renderer.close()
    return _result(session.workload, run, db)


def _result(workload: Workload, run: SearchRun, db: str | None) -> TuneResult:
    search, best, declared = run.search, run.best, run.declared
    schedule = best.schedule if best is not None else Schedule()
    tuned = replay(workload, schedule)
    # the same numbers every CLI view shows for this best (re-measured when they were)
    seconds = declared.seconds if declared is not None else None
    speedup = declared.speedup if declared is not None else None
    return TuneResult(
        search_id=search.id,
        status=search.status,
        workload=workload,
        schedule=schedule,
        proc=tuned,
        c_code=tuned.c_code_str(),
        seconds=seconds,
        speedup=speedup,
        gflops=gflops_of(workload.flops, seconds),
        baseline_seconds=search.baseline_seconds,
        target=search.config.expand.target,
        db=db_label(db),
        search=search,
        best=best,
    )


def _db(db: str | os.PathLike | None) -> str | None:
    """A database path or URL as the store takes it (a ``pathlib.Path`` is welcome)."""
    return None if db is None else os.fspath(db)


def _workload(proc_or_path: ProcOrPath, sizes: Mapping[str, int] | None, proc: str | None) -> WorkloadFile | Workload:
    """A file reference, or the Workload of a captured proc object."""
    if sizes is not None and not isinstance(sizes, Mapping):
        raise TypeError(f"sizes must be a mapping such as {{'N': 64}}, not {type(sizes).__name__}")
    if isinstance(proc_or_path, (str, os.PathLike)):
        return WorkloadFile.of(os.fspath(proc_or_path), proc, sizes)
    if proc is not None:
        raise TypeError("proc= names a proc in a workload file; with a proc object, pass the object alone")
    return capture(proc_or_path, sizes, _caller_scopes())


def _caller_scopes() -> list[Mapping[str, Any]]:
    """The locals and globals of every frame outside schedsearch, innermost first: where
    the names a proc object uses are looked up (a notebook's namespace, a test's locals)."""
    scopes: list[Mapping[str, Any]] = []
    seen: set[int] = set()
    frame = inspect.currentframe()
    try:
        while frame is not None:
            module = frame.f_globals.get("__name__", "")
            if module != "schedsearch" and not module.startswith("schedsearch."):
                for scope in (frame.f_locals, frame.f_globals):
                    if id(scope) not in seen:
                        seen.add(id(scope))
                        scopes.append(scope)
            frame = frame.f_back
    finally:
        del frame  # a frame referring to itself would keep every local alive
    return scopes
