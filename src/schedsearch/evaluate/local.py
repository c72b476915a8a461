"""A local Executor without Ray: expansion and evaluation each in one child process.

Used by ``--workers 0``, ``schedsearch.tune()`` for small work, and tests. Nothing heavy
runs in the caller: Exo (and its SMT solver) runs in an expansion process, builds and
benchmarks in an evaluation process, so the caller stays responsive and ``cancel`` can
stop either at once (SIGTERM, then SIGKILL). The two run side by side, so the next
expansion overlaps the current evaluation on a machine with two cores. Each process
serves its jobs in order and keeps its state (the expander's replay cache) between them;
one that dies fails only the job it was running and is started again for the rest.
"""

from __future__ import annotations

import contextlib
import multiprocessing.connection
import os
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from schedsearch.core import (
    BenchConfig,
    Candidate,
    ExpandOptions,
    Expansion,
    Job,
    JobKind,
    JobResult,
    MachineInfo,
    Workload,
)
from schedsearch.errors import SchedsearchError
from schedsearch.evaluate.jobs import BlockingCalls, worker_failure
from schedsearch.evaluate.machine import default_cache_dir, machine_info
from schedsearch.evaluate.process import collect_cycles_less, kill_children, run_in_background
from schedsearch.evaluate.quiet import resume_paused_here, working

#: Seconds a cancelled worker gets to clean up (kill its compiler or kernel) before SIGKILL.
_GRACE = 1.0


def _terminate(signum: int, frame: Any) -> None:
    # Kill the running compiler or kernel group, then leave at once. Not SystemExit: raised
    # wherever the worker happens to be, inside a finalizer of Exo's solver objects it is
    # "ignored" (printed onto the user's terminal) and the worker runs on; an interpreter
    # shutdown could print the same from those finalizers.
    resume_paused_here()  # a worker paused for a timing must not stay stopped
    kill_children()
    os._exit(128 + signum)


def serve(read_fd: int, write_fd: int) -> None:
    """A worker process (``python -m schedsearch.evaluate.worker_process R W``): read its settings,
    then answer (workload, reference, job) messages in order until EOF."""
    signal.signal(signal.SIGTERM, _terminate)
    # Ctrl-C reaches the whole foreground process group; the caller decides what stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    inbox = multiprocessing.connection.Connection(read_fd, writable=False)
    conn = multiprocessing.connection.Connection(write_fd, readable=False)
    try:
        factory, options, bench, cache_dir = inbox.recv()
    except (EOFError, OSError):
        return
    expanders: dict[str, Any] = {}
    collect_cycles_less()  # this process is the search's own, and expands
    while True:
        try:
            workload, reference, job = inbox.recv()
        except (EOFError, OSError):
            return
        conn.send((job.id, _run_job(workload, reference, job, factory, options, bench, cache_dir, expanders)))


def _run_job(
    workload: Workload,
    reference: Candidate,
    job: Job,
    factory: Callable[[Workload, ExpandOptions], Any],
    options: ExpandOptions,
    bench: BenchConfig,
    cache_dir: Path,
    expanders: dict[str, Any],
) -> JobResult | SchedsearchError:
    from schedsearch.evaluate.expansions import expand_part, worker_expander
    from schedsearch.evaluate.pipeline import evaluate_candidate
    from schedsearch.evaluate.side_by_side import remeasure

    started = time.perf_counter()
    try:
        if job.kind is JobKind.EXPAND:
            # Registered as busy: the evaluation process pauses it while it times a kernel;
            # and in the background, so it never takes the CPU from a kernel being verified.
            run_in_background()
            with working(cache_dir):
                expander = expanders.get(workload.key)
                if expander is None:
                    expander = expanders[workload.key] = worker_expander(factory, workload, options, bench, cache_dir)
                return JobResult(job, expansion=expand_part(expander, job.candidates[0], part=job.part))
        if job.kind is JobKind.EVALUATE:
            return JobResult(
                job,
                measurements=(
                    evaluate_candidate(
                        workload,
                        reference,
                        job.candidates[0],
                        bench,
                        cache_dir,
                        job.cutoff,
                    ),
                ),
            )
        return JobResult(job, measurements=tuple(remeasure(workload, reference, job.candidates, bench, cache_dir)))
    except SchedsearchError as e:
        if job.kind is JobKind.EXPAND:  # a parent that cannot be replayed is data
            return JobResult(
                job,
                expansion=Expansion(
                    job.candidates[0].fingerprint, (), error=str(e), seconds=time.perf_counter() - started
                ),
            )
        return e  # broken infrastructure: re-raised by the caller's poll
    except Exception as e:  # noqa: BLE001 - an internal error on one job must not end the search
        return worker_failure(job, f"{type(e).__name__}: {e}")


def _die_with_parent() -> None:
    """Ask Linux to SIGTERM this worker when its caller dies (even by SIGKILL), so a busy
    worker never outlives it; elsewhere the closed pipe ends an idle one."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() == 1:  # the caller died before the request took effect
        raise SystemExit(0)


class _Worker:
    """One child process and the jobs sent to it, in order.

    A fresh interpreter (not ``multiprocessing``'s fork, which is unsafe beside the
    caller's threads, nor its spawn, which re-runs the caller's main script - a user's
    ``tune()`` call without an ``if __name__ == "__main__"`` guard). Pickled messages go
    over two pipes."""

    def __init__(self, args: tuple[Any, ...]) -> None:
        child_read, self._write = os.pipe()
        self._read, child_write = os.pipe()
        # The caller's import path, so the worker finds what the caller could (an expander
        # factory from a notebook's or a test's folder).
        path = os.pathsep.join(p for p in sys.path if p)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "schedsearch.evaluate.worker_process", str(child_read), str(child_write)],
                pass_fds=(child_read, child_write),
                stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONPATH": path},
            )
        finally:
            os.close(child_read)
            os.close(child_write)
        self.outbox = multiprocessing.connection.Connection(self._write, readable=False)
        self.conn = multiprocessing.connection.Connection(self._read, writable=False)
        self.outbox.send(args)
        self.sent: deque[tuple[Workload, Candidate, Job]] = deque()

    def send(self, workload: Workload, reference: Candidate, job: Job) -> None:
        self.outbox.send((workload, reference, job))
        self.sent.append((workload, reference, job))

    def exit_code(self) -> int | None:
        return self.process.poll()

    def stop(self) -> None:
        proc = self.process
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(_GRACE)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.outbox.close()
        self.conn.close()


class LocalExecutor(BlockingCalls):
    """``core.Executor`` with one expansion process and one evaluation process."""

    def __init__(
        self,
        expander_factory: Callable[[Workload, ExpandOptions], Any],
        expand_options: ExpandOptions,
        bench: BenchConfig,
        cache_dir: Path | None = None,
    ) -> None:
        self._factory = expander_factory
        self._options = expand_options
        self._bench = bench
        self._cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self._machine: MachineInfo | None = None
        self._workers: dict[str, _Worker] = {}

    @property
    def cache_dir(self) -> Path:
        return self._cache_dir

    @property
    def workers(self) -> int:
        return 1

    def _worker(self, role: str) -> _Worker:
        worker = self._workers.get(role)
        if worker is None:
            args = (self._factory, self._options, self._bench, self._cache_dir)
            worker = self._workers[role] = _Worker(args)
        return worker

    def submit(self, workload: Workload, reference: Candidate, jobs: Sequence[Job]) -> None:
        """Queue each job on the expansion or the evaluation process; returns at once."""
        for job in jobs:
            self._worker("expand" if job.kind is JobKind.EXPAND else "evaluate").send(workload, reference, job)

    def pending(self) -> int:
        return sum(len(w.sent) for w in self._workers.values())

    def poll(self, timeout: float) -> list[JobResult]:
        """Finished jobs (waiting up to ``timeout`` s for the first); raises the
        infrastructure error a job met."""
        busy = {w.conn: (role, w) for role, w in self._workers.items() if w.sent}
        if not busy:
            time.sleep(max(0.0, timeout))
            return []
        results: list[JobResult] = []
        for conn in multiprocessing.connection.wait(list(busy), timeout):
            role, worker = busy[conn]  # type: ignore[index]
            try:
                job_id, value = worker.conn.recv()
            except (EOFError, OSError):
                results.append(self._restart(role, worker))
                continue
            _, _, job = worker.sent.popleft()
            assert job.id == job_id, "a worker answered out of order"
            if isinstance(value, SchedsearchError):
                raise value
            results.append(value)
        return results

    def _restart(self, role: str, worker: _Worker) -> JobResult:
        """The worker died: its running job fails, the ones queued behind it go to a new one."""
        worker.stop()
        code = worker.exit_code()
        del self._workers[role]
        _, _, job = worker.sent.popleft()
        for workload, reference, queued in worker.sent:
            self._worker(role).send(workload, reference, queued)
        how = f"signal {-code}" if code is not None and code < 0 else f"exit status {code}"
        return worker_failure(job, f"the {role} worker process died ({how})")

    def cancel(self) -> None:
        """Stop both processes at once; everything in flight is abandoned."""
        for worker in self._workers.values():
            worker.stop()
        self._workers.clear()

    def machine(self) -> MachineInfo:
        """The measuring setup (computed once per executor)."""
        if self._machine is None:
            self._machine = machine_info(self._bench)
        return self._machine

    def close(self) -> None:
        """Stop the worker processes."""
        self.cancel()

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
