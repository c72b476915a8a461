"""The search use cases: start a search and drive it to its end (``resuming`` resumes one).

Both fronts call these: the CLI (``run``, ``resume``) renders the events it is sent and
the record that comes back; ``schedsearch.tune()`` turns that record into a tuned proc.
A session owns the open store for its whole life::

    with start_search(WorkloadFile("matmul.py", sizes=(("M", 64),)), SearchSettings(workers=0), db="s.db") as s:
        run = s.run(on_event=print)
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

from schedsearch.app.compose import (
    CLI,
    Spelling,
    make_cost_model,
    make_executor,
    open_db,
    refuse_transient_db,
)
from schedsearch.app.settings import SearchSettings
from schedsearch.core import (
    BenchConfig,
    Candidate,
    CandidateRecord,
    CostModel,
    CostModelMode,
    Executor,
    SearchConfig,
    SearchEvent,
    SearchRecord,
    Store,
    Workload,
)
from schedsearch.numbers import DeclaredBest

if TYPE_CHECKING:
    from schedsearch.search.inherited import Inherited
    from schedsearch.search.lease import LeaseKeeper
    from schedsearch.warm_start import WarmStart

#: Told what a use case starts next, before the search's clock starts ("checking the C
#: compiler gcc"): a phrase a progress view can show while the user waits.
Say = Callable[[str], None]


def silent(what: str) -> None:
    """A ``Say`` for callers that show nothing."""


@dataclass(frozen=True, slots=True)
class WorkloadFile:
    """A workload named by its file: loading it runs the file (the user's choice)."""

    path: str
    proc: str | None = None
    sizes: tuple[tuple[str, int], ...] = ()

    @staticmethod
    def of(path: str, proc: str | None = None, sizes: Mapping[str, int] | None = None) -> WorkloadFile:
        return WorkloadFile(str(path), proc, tuple((sizes or {}).items()))

    def load(self, spelling: Spelling = CLI) -> Workload:
        """Run the file and bind the sizes (WorkloadError with one sentence otherwise)."""
        from schedsearch.transforms import load_workload

        return load_workload(self.path, self.proc, dict(self.sizes), proc_option=spelling.proc)


def capture(obj: object, sizes: Mapping[str, int] | None, scopes: Sequence[Mapping[str, Any]]) -> Workload:
    """The Workload of an Exo ``@proc`` object: its definition and the names it uses,
    captured as source text from ``scopes`` (the caller's namespaces, innermost first)."""
    from schedsearch.transforms.capture import workload_from_proc

    return workload_from_proc(obj, sizes, scopes)


def load(spec: WorkloadFile | Workload, spelling: Spelling = CLI) -> Workload:
    """The Workload of a file reference, or the workload itself (a captured proc)."""
    return spec.load(spelling) if isinstance(spec, WorkloadFile) else spec


@dataclass(frozen=True, slots=True)
class SearchRun:
    """How a search ended: its record, its declared best (None when nothing ran) with the
    numbers every view shows for it, the best's lineage (root first), and what a new
    search's warm start replayed."""

    search: SearchRecord
    declared: DeclaredBest | None
    lineage: tuple[CandidateRecord, ...] = ()
    warm: WarmStart | None = None

    @property
    def best(self) -> CandidateRecord | None:
        """The declared best candidate as stored."""
        return self.declared.record if self.declared is not None else None


class SearchSession:
    """A search ready to run, holding its open store until closed (a context manager), and
    with ``lease`` its driver's hold on the search (a resumed search's is taken before the
    session is handed out; a new search's when it is created), released at ``close``."""

    def __init__(
        self,
        workload: Workload,
        root: Candidate,
        config: SearchConfig,
        store: Store,
        search_id: int | None = None,
        lease: LeaseKeeper | None = None,
        inherited: Inherited | None = None,
    ) -> None:
        self.workload, self.root, self.config, self.store = workload, root, config, store
        self.search_id = search_id
        self.lease = lease
        # A resume: the stored rows rebuilt from their schedules (``search.inherited``).
        self.inherited = inherited
        self.warm: WarmStart | None = None

    @property
    def notes(self) -> tuple[str, ...]:
        """Lines to tell the user before the search runs: a search taken over from a driver
        that stopped; Exo that will run without schedsearch's patches, and why."""
        from schedsearch.transforms import exo_patches

        found = (self.lease.note() if self.lease is not None else None, exo_patches.message())
        return tuple(note for note in found if note)

    def warm_start(self, say: Say = silent) -> WarmStart | None:
        """For a new search (unless ``config.warm_start`` is off): replay the best schedules
        earlier searches of this proc found on this workload (bounded: a few seconds), once."""
        if self.search_id is None and self.config.warm_start and self.warm is None:
            from schedsearch.warm_start import warm_start

            self.warm = warm_start(self.store, self.workload, self.root, self.config.expand, say=say)
        return self.warm

    def __enter__(self) -> SearchSession:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Release the search's lease and close the store."""
        try:
            if self.lease is not None:
                self.lease.release()
        finally:
            self.store.close()

    def runner(
        self, address: str | None = None, stop: threading.Event | None = None, say: Say = silent
    ) -> SearchRunner:
        """The executor (in-process for 0 workers, else Ray: a local cluster or ``address``)
        and the cost model, ready to search; a context manager that releases both. ``stop``,
        set while a private Ray cluster starts, ends it as soon as it is up (``KeyboardInterrupt``);
        ``say`` is told each of these steps as it begins."""
        config = self.config
        if config.workers == 0 and address is None:
            say("preparing the in-process executor (no Ray)")
        elif address is None:
            say(f"a private Ray cluster for {config.workers} worker{'s' if config.workers != 1 else ''}")
        else:
            say(f"connecting to the Ray cluster at {address}")
        executor = make_executor(config.workers, address, config.bench, config.expand, stop=stop)
        try:
            if config.cost_model is not CostModelMode.OFF:
                say("training the cost model on this machine's earlier measurements")
            model = make_cost_model(config, self.store, executor)
        except BaseException:
            executor.close()
            raise
        return SearchRunner(self, executor, model)

    def run(
        self,
        on_event: Callable[[SearchEvent], None] = lambda e: None,
        *,
        stop: threading.Event | None = None,
        address: str | None = None,
        signals: tuple[signal.Signals, ...] = (),
        started: float | None = None,
    ) -> SearchRun:
        """``runner(address)`` and ``SearchRunner.run``, in one call; the seconds from
        ``started`` (``time.monotonic()``; None: this call) to the workers' start are kept as
        ``TimeSpent.starting``, outside the time budget."""
        started = time.monotonic() if started is None else started
        with self.runner(address) as runner:
            return runner.run(on_event, stop=stop, signals=signals, started=started)


class SearchRunner:
    """A session's executor and cost model; ``run`` searches, ``close`` releases them."""

    def __init__(self, session: SearchSession, executor: Executor, model: CostModel | None) -> None:
        self.session, self.executor, self.model = session, executor, model

    def __enter__(self) -> SearchRunner:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Stop the cost model's training and release the executor's workers."""
        if self.model is not None:
            self.model.close()
        self.executor.close()

    def run(
        self,
        on_event: Callable[[SearchEvent], None] = lambda e: None,
        *,
        stop: threading.Event | None = None,
        signals: tuple[signal.Signals, ...] = (),
        started: float | None = None,
    ) -> SearchRun:
        """Search until a budget is spent, the space is exhausted or ``stop`` is set.

        ``started`` (``time.monotonic()``): when the caller's command began; the seconds
        from then to the search's start are recorded as ``TimeSpent.starting``. The time
        budget counts the search's own clock, from now (``run_search``).

        The first of ``signals`` received meanwhile sets ``stop`` (a clean, resumable end);
        a second one aborts. Infrastructure errors propagate with the search's id set (the
        search is then marked failed and can be resumed).
        """
        from schedsearch.search import make_strategy, run_search

        session = self.session
        stop = stop if stop is not None else threading.Event()
        warm = session.warm_start()
        with stop_on_signals(stop, signals):
            outcome = run_search(
                session.workload,
                session.root,
                make_strategy(session.config),
                self.executor,
                session.store,
                session.config,
                on_event,
                search_id=session.search_id,
                stop=stop,
                cost_model=self.model,
                seeds=warm.seeds if warm is not None else (),
                started=started,
                lease=session.lease,
                inherited=session.inherited,
            )
        session.search_id = outcome.search_id
        return finished(session.store, outcome.search_id, warm)


def finished(store: Store, search_id: int, warm: WarmStart | None = None) -> SearchRun:
    """The record of a search, its declared best and that best's lineage."""
    from schedsearch.numbers import load_declared_best

    search = store.get_search(search_id)
    declared = load_declared_best(store, search)
    lineage = tuple(store.lineage(declared.record.id)) if declared is not None else ()
    return SearchRun(search, declared, lineage, warm)


def start_search(
    spec: WorkloadFile | Workload,
    settings: SearchSettings,
    *,
    db: str | None,
    spelling: Spelling = CLI,
    say: Say = silent,
) -> SearchSession:
    """Load the workload, check the machine can build it, open (or create) the store.

    Every check that can fail on the user's input or machine runs before a search is
    recorded: an in-memory database, the workload, its memory needs, the compiler, the
    build cache. ``say`` is told each step as it begins.
    """
    from schedsearch.evaluate import check_memory, check_toolchain, default_cache_dir, private_cache_dir
    from schedsearch.search.lease import LeaseKeeper
    from schedsearch.transforms import root_candidate

    refuse_transient_db(db, spelling)
    say("loading the workload with Exo")
    workload = load(spec, spelling)
    check_memory(workload)
    say(f"checking the C compiler ({settings.cc or BenchConfig().cc})")
    config = settings.config()
    check_toolchain(config.bench)
    private_cache_dir(default_cache_dir())  # before a search is recorded, not after
    say("opening the database")
    store = open_db(db, create=True)
    try:
        say("generating the unscheduled proc's C")
        root = root_candidate(workload)
    except BaseException:
        store.close()
        raise
    return SearchSession(workload, root, config, store, lease=LeaseKeeper(store))


@contextmanager
def stop_on_signals(
    stop: threading.Event,
    signals: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM),
    announce: Callable[[], None] | None = None,
) -> Iterator[None]:
    """The first of ``signals`` (Ctrl-C, a notebook's interrupt) asks the search to stop
    cleanly and calls ``announce`` (once, from a thread of its own); a second one aborts.
    Outside the main thread, where Python cannot install handlers, nothing is installed."""
    if not signals or threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = {s: signal.signal(s, handler) for s in signals}
    try:
        with _announced_at_once(announce, signals):
            yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


@contextmanager
def _announced_at_once(announce: Callable[[], None] | None, signals: tuple[signal.Signals, ...]) -> Iterator[None]:
    """Call ``announce`` as soon as the first of ``signals`` arrives. Python runs a signal's handler
    in the main thread only between two of its bytecodes: while the main thread waits in
    native code (``ray.init`` starting a cluster: up to 1.4 s on a 2-core Zen 3) it runs
    late. The wakeup fd is written by the C-level handler at once, and a thread of its own
    reads it."""
    if announce is None:
        yield
        return
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    try:
        previous = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    except ValueError:  # another wakeup fd in use, or not the main thread: the handler's pace
        os.close(read_end)
        os.close(write_end)
        yield
        return

    ours = {int(s) for s in signals}

    def relay() -> None:
        with suppress(OSError):
            while got := os.read(read_end, 1):  # each byte a signal's number; empty at the end
                if got[0] in ours:
                    announce()
                    return

    thread = threading.Thread(target=relay, name="schedsearch-stop-announcer", daemon=True)
    thread.start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous)
        os.close(write_end)  # the relay reads the end of the pipe, and ends
        thread.join(1.0)
        os.close(read_end)
