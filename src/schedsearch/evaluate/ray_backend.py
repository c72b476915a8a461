"""A Ray executor: expansion on a pool of actors, evaluation as Ray tasks, results streamed.

The only module that imports ray, and only when a ``RayExecutor`` is made (importing this
module stays cheap). Tasks receive plain records (``Workload``, ``Candidate``, options) and
rebuild what they need: Exo procs do not pickle.

- Expansion: ``workers`` actors, each holding one ``expander_factory(workload, options)``
  per workload, so its cache of replayed schedule prefixes survives between calls. A
  parent is expanded by the actor that made it, whose cache holds its proc. Each actor
  runs one expansion shard at a time; the rest wait here (``ShardQueue``), the job of the
  fastest parent first (its ``priority``: a deeper parent must be clearly faster to go
  ahead of a shallower one), among equals the latest submitted: an expansion the search
  asks for while a streamed one is still being shared out (the next round grown from the
  first likely winners) goes ahead of that one's remaining shards when its parent is
  faster, while a parent's own remaining shards go ahead of its children's expansions.
  A free actor takes a busy one's waiting shard when it goes ahead of everything in its own
  queue (``shard_queue.source``): it rebuilds that parent rather than leave it waiting.
- Evaluation in two stages. A build task per candidate (``num_cpus=1``, retried once
  only when its worker dies under it)
  compiles it (``build_candidate``): builds run continuously on every worker core. The
  built kernel then goes to the benchmark runner of the node that built it: one actor
  per node (pinned there, ``max_concurrency=1``) that verifies and times one kernel at a
  time (``run_candidate``), so no build task ever waits for a lock while holding a core.
  While it times one, the node's build tasks and expanders are paused (``evaluate.quiet``).
  A crashed worker becomes a ``run_error`` measurement; infrastructure errors
  (``ToolchainError``, ``SearchError``) are re-raised in the driver.
- ``cancel`` force-cancels build tasks and kills busy runners and expanders (Ray starts
  them again); their kernels and compilers die with them.

A private cluster (no ``address``) is started with ``ray.init(address="local")`` and shut
down by ``close()``. Ray's own agents outlive a driver killed with SIGKILL for a minute or
more (raylet and gcs_server go at once, the dashboard and runtime-env agents linger while
they retry the dead GCS), so the executor also starts a tiny watchdog process that kills
whatever remains of the cluster as soon as the driver is gone.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Self

from schedsearch.core import (
    BenchConfig,
    Candidate,
    ExpandOptions,
    Expansion,
    ExpansionPart,
    Job,
    JobKind,
    JobResult,
    MachineInfo,
    Measurement,
    Status,
    Workload,
)
from schedsearch.errors import ClusterError, SchedsearchError
from schedsearch.evaluate.jobs import BlockingCalls, worker_failure
from schedsearch.evaluate.shard_queue import ShardQueue, source
from schedsearch.targets import target

_PROBE_TIMEOUT = 3.0
_MACHINE_TIMEOUT = 120.0
#: Children whose expander actor is remembered: a few rounds' worth (each actor caches 256 procs).
_HOMES_KEPT = 4096
#: Shards per expander actor of an expansion the search waits for (``Job.stream``): the
#: first are back after a sixth of the time, and an actor is soon free for an expansion
#: asked for meanwhile; a worker proposes the parent's rewrites once for all its shards
#: (``Expander._proposal``).
STREAM_SHARDS_PER_ACTOR = 6
#: Shards per expander actor, ahead of those, that hold one heavy rewrite each (a register
#: tile: ``expand.dealt``) when a stream job asks for every heavy rewrite first
#: (``Job.all_heavy_first``: the model leads): every register tile of the root is then made
#: before its cheap rewrites. The rules propose their best guess first, but it is not always
#: the best: conv1d_mc's fastest tile on Zen 3 (5 rows, 331 us) was the fourth proposed,
#: dealt into the sixth of ten shards, and came back 12-23 s in. Not for every stream job:
#: with the model off or not leading, the cheap children measured as they come keep the
#: builders busy, and all tiles first cut SGEMM 256's 60-s throughput from 3.31 to 2.76 a second.
STREAM_LEADS_PER_ACTOR = 4

# The watchdog runs with ``python -I -c``: standard library only. It learns the driver's
# Ray processes (children whose command line names the ray package, and all their
# descendants) every half second, and when its stdin reaches EOF - the driver closed it
# or died - it terminates, then kills, every one of them still running (matched by pid
# and start time, so a recycled pid is never hit).
_WATCHDOG = r"""
import os, select, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
driver, marker = int(sys.argv[1]), sys.argv[2].encode()
def table():
    procs = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
            rest = stat[stat.rindex(b")") + 2:].split()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read()
            procs[int(name)] = (int(rest[1]), int(rest[19]), cmd)
        except (OSError, ValueError, IndexError):
            continue
    return procs
tracked = {}
def snapshot():
    procs = table()
    kids = {}
    for pid, (ppid, _, _) in procs.items():
        kids.setdefault(ppid, []).append(pid)
    todo = [p for p in kids.get(driver, []) if marker in procs[p][2] and p != os.getpid()]
    while todo:
        p = todo.pop()
        tracked[p] = procs[p][1]
        todo.extend(kids.get(p, []))
while True:
    ready, _, _ = select.select([0], [], [], 0.5)
    if ready and not os.read(0, 4096):
        break
    snapshot()
def alive():
    procs = table()
    return [p for p, start in tracked.items() if p in procs and procs[p][1] == start]
for sig in (signal.SIGTERM, signal.SIGKILL):
    for p in alive():
        try:
            os.kill(p, sig)
        except OSError:
            pass
    deadline = time.monotonic() + 1.0
    while alive() and time.monotonic() < deadline:
        time.sleep(0.1)
"""


# ----------------------------------------------------------------------------- worker side


def _build_task(
    workload: Workload, reference: Candidate, candidate: Candidate, bench: BenchConfig, cache_dir: Path | None,
    yardstick: Candidate | None = None,
) -> tuple[Any, str]:
    """Runs in a Ray worker: a ``Built`` (or the build_error Measurement, or the
    infrastructure error) and the id of the node whose cache holds the kernel (and the
    yardstick it is to be timed beside, built on the same node)."""
    import ray

    from schedsearch.evaluate import default_cache_dir
    from schedsearch.evaluate.pipeline import build_candidate

    node = ray.get_runtime_context().get_node_id()
    try:
        return build_candidate(workload, reference, candidate, bench, cache_dir or default_cache_dir(), yardstick), node
    except SchedsearchError as e:
        return e, node


class _Runner:
    """Ray actor body: the benchmark runner of one node; it times one kernel at a time."""

    def run(self, workload: Workload, reference: Candidate, candidate: Candidate, built: Any, bench: BenchConfig,
            cache_dir: Path | None, cutoff: float | None = None,
            contend: float | None = None, quiet: bool = False) -> Measurement | SchedsearchError:
        from schedsearch.evaluate import default_cache_dir
        from schedsearch.evaluate.pipeline import run_candidate

        try:
            return run_candidate(workload, reference, candidate, built, bench, cache_dir or default_cache_dir(),
                                 cutoff, contend, quiet)
        except SchedsearchError as e:
            return e


def _remeasure_task(
    workload: Workload,
    reference: Candidate,
    candidates: Sequence[Candidate],
    bench: BenchConfig,
    cache_dir: Path | None,
) -> list[Measurement] | SchedsearchError:
    from schedsearch.evaluate import default_cache_dir, remeasure

    try:
        return remeasure(workload, reference, candidates, bench, cache_dir or default_cache_dir())
    except SchedsearchError as e:
        return e


def _prepare_task(bench: BenchConfig, cache_dir: Path | None, header: str | None) -> bool:
    """Runs in a Ray worker: ``pipeline.prepare_node``. Best effort: whatever fails here,
    the first build that needs it tries again and says why."""
    from schedsearch.evaluate import default_cache_dir
    from schedsearch.evaluate.pipeline import prepare_node

    try:
        return prepare_node(bench, cache_dir or default_cache_dir(), header)
    except Exception:  # noqa: BLE001 - see above
        return False


def _machine_task(bench: BenchConfig) -> MachineInfo:
    from schedsearch.evaluate import machine_info

    return machine_info(bench)


class _ExpanderHost:
    """Ray actor body: one expander per workload, kept for its replay cache."""

    def __init__(self, factory: Callable[[Workload, ExpandOptions], Any], options: ExpandOptions,
                 cache_dir: Path | None = None, bench: BenchConfig | None = None) -> None:
        from schedsearch.evaluate import default_cache_dir
        from schedsearch.evaluate.process import collect_cycles_less, run_in_background

        self._factory = factory
        self._options = options
        self._expanders: dict[str, Any] = {}
        self._cache_dir = cache_dir or default_cache_dir()
        self._bench = bench
        run_in_background()  # Exo must not take the CPU from a kernel being timed
        collect_cycles_less()  # this process is the actor's: it only expands

    def expand(self, workload: Workload, parent: Candidate, shard: int = 0, shards: int = 1,
               lead: int = 0, part: ExpansionPart = ExpansionPart.ALL) -> Expansion:
        from schedsearch.evaluate.quiet import working

        # Registered as busy: the node's benchmark runner pauses it while it times a kernel.
        with working(self._cache_dir):
            expander = self._expanders.get(workload.key)
            if expander is None:
                from schedsearch.evaluate.expansions import worker_expander

                expander = self._expanders[workload.key] = worker_expander(
                    self._factory, workload, self._options, self._bench, self._cache_dir)
            try:
                from schedsearch.evaluate.expansions import expand_part

                return expand_part(expander, parent, shard, shards, lead, part)
            except Exception as e:  # noqa: BLE001 - one parent's failure is data, not a crash
                return Expansion(parent.fingerprint, (), error=f"{type(e).__name__}: {e}")


# ----------------------------------------------------------------------------- connecting


def _resolve_address(address: str) -> tuple[str, int]:
    """``host:port`` of the cluster's GCS; ``auto`` reads the running cluster's file."""
    text = address.strip()
    if text.startswith("ray://"):
        raise ClusterError(f"Ray client addresses are not supported ({address}); give the GCS host:port")
    if text == "auto":
        text = os.environ.get("RAY_ADDRESS", "")
        if not text:
            try:
                text = Path("/tmp/ray/ray_current_cluster").read_text().strip()
            except OSError:
                raise ClusterError(
                    "no running Ray cluster found for --address auto; start one with "
                    "`ray start --head` or give host:port"
                ) from None
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ClusterError(f"cannot read Ray address {address!r}; expected host:port (e.g. 10.0.0.5:6379)")
    return host, int(port)


def _probe(host: str, port: int, timeout: float) -> None:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as e:
        raise ClusterError(
            f"no Ray cluster answers at {host}:{port} ({e.strerror or e}); "
            "check --address or start one with `ray start --head`"
        ) from None


def _use_token_auth_when_available() -> None:
    """Send our Ray token when joining an existing cluster.

    Ray 2.60 turns token authentication on for clusters started with ``ray start``, but a
    driver joining one is only let in when ``RAY_AUTH_MODE=token`` was in its environment
    before ray was imported; otherwise it retries until it times out. When the user has a token (``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH``
    or ``~/.ray/auth_token``) and has not chosen a mode, use it.
    """
    if "RAY_AUTH_MODE" in os.environ:
        return
    has_token = bool(os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH"))
    if has_token or (Path.home() / ".ray" / "auth_token").is_file():
        os.environ["RAY_AUTH_MODE"] = "token"


def _init_with_deadline(timeout: float, **kwargs: Any) -> None:
    """``ray.init`` in a helper thread, so an unresponsive cluster cannot hang us for minutes.
    Only to connect to a running cluster: a local one started off the main thread leaves
    its driver waiting a minute at exit for the GCS that ``ray.shutdown`` stopped."""
    import ray

    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            ray.init(**kwargs)
            outcome.append(None)
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            outcome.append(e)

    thread = threading.Thread(target=target, name="schedsearch-ray-connect", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise ClusterError(
            f"timed out after {timeout:.0f} s connecting to the Ray cluster at {kwargs.get('address')}; "
            "if it uses token authentication, set RAY_AUTH_TOKEN (or RAY_AUTH_TOKEN_PATH) to its token"
        )
    if outcome and outcome[0] is not None:
        err = outcome[0]
        raise ClusterError(
            f"cannot connect to the Ray cluster at {kwargs.get('address')}: {type(err).__name__}: {err}"
        ) from err


@contextlib.contextmanager
def _sigterm_left_to_caller() -> Iterator[None]:
    """Keep ``ray.init`` from installing its SIGTERM handler (``sys.exit(15)``) while it
    starts a private cluster. Raised in the middle of the start, that exit left a driver that
    shut down cleanly and then crashed at exit (SIGSEGV) now and then; the caller's handler
    instead asks for a stop, and the start is shut down once it is complete. Ray installs it
    through ``ray._private.utils.set_sigterm_handler``: where that is missing (another Ray),
    nothing is changed, and only after the start is the caller's handler put back."""
    from ray._private import utils

    install = getattr(utils, "set_sigterm_handler", None)
    if install is None:
        yield
        return
    utils.set_sigterm_handler = lambda handler: None
    try:
        yield
    finally:
        utils.set_sigterm_handler = install


def _quiet_kwargs() -> dict[str, Any]:
    return {
        "log_to_driver": False,
        "logging_level": logging.ERROR,
        "include_dashboard": False,
        "namespace": "schedsearch",
    }


# ----------------------------------------------------------------------------- executor


class RayExecutor(BlockingCalls):
    """``core.Executor`` on a Ray cluster (a private local one unless ``address`` is given).

    If this process is already connected to Ray (``ray.is_initialized()``), that
    connection is used and left open by ``close()``. Raises ``ClusterError`` when the
    cluster cannot be started or reached (an unreachable address fails within seconds).
    With ``address``, the workers must have this package installed (same version).
    ``stop`` (set by a Ctrl-C or SIGTERM handler) while a private cluster starts: the
    constructor raises ``KeyboardInterrupt`` once ``ray.init`` returns (it cannot be cut short
    cleanly), having shut the cluster down; ``ray.init`` is kept from taking SIGTERM meanwhile.
    """

    def __init__(
        self,
        expander_factory: Callable[[Workload, ExpandOptions], Any],
        expand_options: ExpandOptions,
        bench: BenchConfig,
        *,
        workers: int = 2,
        address: str | None = None,
        cache_dir: Path | None = None,
        connect_timeout: float = 15.0,
        stop: threading.Event | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError("RayExecutor needs workers >= 1 (use LocalExecutor for 0)")
        self._bench = bench
        self._cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._workers = workers
        self._owns_ray = False
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._closed = False
        self._machine: MachineInfo | None = None
        self._workload_refs: dict[str, Any] = {}
        self._next_actor = 0
        # The expander actor that made each recent child: its replay cache holds the child's
        # proc, so expanding the child there replays nothing; elsewhere a register-tiled
        # parent takes seconds of Exo to rebuild (about a third of all expansion time).
        self._home: OrderedDict[str, int] = OrderedDict()
        # In flight: ref -> (job, stage, detail). Stages: "expand" (detail: actor, its index, shards),
        # "build", "run" (detail: the runner), "remeasure".
        self._flight: dict[Any, tuple[Job, str, Any]] = {}
        self._shards: dict[int, int] = {}  # job id -> shards of its expansion back so far
        # Expansion shards not started yet, per actor index: (job, args, shards).
        self._waiting: dict[int, ShardQueue[tuple[Job, tuple[Any, ...], int]]] = {}
        self._submissions = itertools.count()  # one line for all actors' queues (``shard_queue.source``)
        self._runners: dict[str, Any] = {}
        self._stop = stop
        try:
            self._connect(address, connect_timeout)
            import ray

            # One retry, for a worker that died under a task rather than because of it: a
            # force-cancelled task's worker is killed, and Ray may already have leased that
            # worker to the next task of the same kind (a build submitted just after a
            # cancel). Cancelled tasks themselves are never retried; a kernel's own crash
            # happens in a child process and comes back as data, not as a dead worker.
            self._build_fn = ray.remote(num_cpus=1, max_retries=1)(_build_task)
            self._remeasure_fn = ray.remote(num_cpus=1, max_retries=1)(_remeasure_task)
            self._machine_fn = ray.remote(num_cpus=0, max_retries=0)(_machine_task)
            self._runner_cls = ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0)(_Runner)
            self._actor_cls = ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0)(_ExpanderHost)
            self._factory, self._options = expander_factory, expand_options
            self._actors = [self._actor_cls.remote(expander_factory, expand_options, self._cache_dir, bench)
                            for _ in range(workers)]
            # The target's header is precompiled on a build core while the root is expanded,
            # not by the first builds of its children, after it: on a 2-core Zen 3 that put
            # SGEMM 256's first measured child 3.5-4 s later. Nothing waits for the task.
            header = target(expand_options.target).header
            self._prepared = ray.remote(num_cpus=1, max_retries=0)(_prepare_task).remote(
                bench, self._cache_dir, header) if header else None
        except BaseException:
            self.close()
            raise

    def _connect(self, address: str | None, timeout: float) -> None:
        if address is not None:
            # Before ray is imported: its core library reads the auth mode when it loads.
            _use_token_auth_when_available()
        else:
            # Before ray is imported too (it reads this then): Ray's C++ failure handler
            # would print a stack trace over the user's terminal for a SIGTERM that lands
            # while this driver connects to its private cluster, and abort. The search's own
            # faults come back as data, and the CLI has Python's faulthandler.
            os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
        import ray

        if address is not None:
            # Probe first, even when already connected: a wrong address must not pass silently.
            host, port = _resolve_address(address)
            _probe(host, port, min(timeout, _PROBE_TIMEOUT))
            if not ray.is_initialized():
                _init_with_deadline(timeout, address=f"{host}:{port}", **_quiet_kwargs())
            return
        if ray.is_initialized():
            return
        # The watchdog first: a driver stopped while the cluster starts must not leave
        # Ray's processes behind (``close`` shuts down what started, the watchdog the rest).
        self._owns_ray = True
        self._start_watchdog(os.path.dirname(ray.__file__))
        main = threading.current_thread() is threading.main_thread()
        ours = signal.getsignal(signal.SIGTERM) if main else None
        ours = signal.SIG_DFL if ours is None else ours
        try:
            with _sigterm_left_to_caller():
                ray.init(address="local", num_cpus=self._workers, **_quiet_kwargs())
        except Exception as e:  # a local start can fail in many ways
            raise ClusterError(f"cannot start a local Ray cluster: {type(e).__name__}: {e}") from e
        finally:
            if main:
                signal.signal(signal.SIGTERM, ours)  # the caller's, whatever ray.init set
        if self._stop is not None and self._stop.is_set():
            raise KeyboardInterrupt  # stopped while the cluster started: nothing more is started

    def _start_watchdog(self, marker: str) -> None:
        if not sys.platform.startswith("linux"):
            return  # the watchdog reads /proc
        self._watchdog = subprocess.Popen(
            [sys.executable, "-I", "-c", _WATCHDOG, str(os.getpid()), marker],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    @property
    def workers(self) -> int:
        return self._workers

    def _workload_ref(self, workload: Workload) -> Any:
        import ray

        ref = self._workload_refs.get(workload.key)
        if ref is None:
            ref = self._workload_refs[workload.key] = ray.put(workload)
        return ref

    def _runner(self, node: str) -> Any:
        """The benchmark runner of ``node`` (started on first use, pinned to that node)."""
        runner = self._runners.get(node)
        if runner is None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            strategy = NodeAffinitySchedulingStrategy(node_id=node, soft=False)
            # Ray starts its workers at niceness 15; the runner's kernels run at the normal
            # priority instead, above the node's compilers and expanders (niceness 19).
            runner = self._runners[node] = self._runner_cls.options(
                scheduling_strategy=strategy, runtime_env={"env_vars": {"RAY_worker_niceness": "0"}}).remote()
        return runner

    def submit(self, workload: Workload, reference: Candidate, jobs: Sequence[Job]) -> None:
        """Start the jobs and return. With fewer expansions than expander actors, each
        parent's rewrites are shared out among several actors (a search's first round
        expands the root alone, and a register-tile node can take seconds). Each shard
        comes back as its own result (``JobResult.final`` on the last); the search merges
        them. A ``stream`` job is cut into ``STREAM_SHARDS_PER_ACTOR`` times as many
        (``STREAM_LEADS_PER_ACTOR`` more with ``Job.all_heavy_first``)."""
        import ray

        wref = self._workload_ref(workload)
        rref = ray.put(reference)
        expands = [j for j in jobs if j.kind is JobKind.EXPAND]
        shards_for: dict[int, list[tuple[Job, tuple[Any, ...], int]]] = {}
        for job in jobs:
            if job.kind is JobKind.EXPAND:
                spread = shards = max(1, len(self._actors) // max(1, len(expands)))
                lead = 0
                if job.stream:
                    # The search waits for this expansion: small shards, each sent back
                    # as soon as it is done, so measuring starts after the first of them.
                    # The first shard of each actor (its first few, ``all_heavy_first``)
                    # holds one heavy rewrite alone (``expand.dealt``; fewer heavy
                    # rewrites, fewer such shards): the likely best come back first.
                    if job.all_heavy_first:
                        lead = shards * STREAM_LEADS_PER_ACTOR
                        shards = lead + shards * STREAM_SHARDS_PER_ACTOR
                    else:
                        lead = shards
                        shards *= STREAM_SHARDS_PER_ACTOR
                for shard, index in enumerate(self._expanders_for(job.candidates[0], shards, spread)):
                    args = (wref, job.candidates[0], shard, shards, lead, job.part)
                    shards_for.setdefault(index, []).append((job, args, shards))
            elif job.kind is JobKind.EVALUATE:
                ref = self._build_fn.remote(wref, rref, job.candidates[0], self._bench, self._cache_dir, job.yardstick)
                self._flight[ref] = (job, "build", (wref, rref))
            else:
                ref = self._remeasure_fn.remote(wref, rref, list(job.candidates), self._bench, self._cache_dir)
                self._flight[ref] = (job, "remeasure", None)
        numbers = {job.id: next(self._submissions) for job in expands}  # one number per job, in every queue
        for index, calls in shards_for.items():
            # Lowest priority first; among equals the latest submitted, each job's shards in order.
            queue = self._waiting.setdefault(index, ShardQueue())
            for job in dict.fromkeys(job for job, _, _ in calls):
                queue.push_job(job.priority, [call for call in calls if call[0] is job], numbers[job.id])
        self._dispatch()

    def _dispatch(self) -> None:
        """Start the next waiting shard on every actor that has no expansion running: its
        own next, or a busy actor's more urgent one (``shard_queue.source``)."""
        running = self._expanding()
        started = True
        while started:  # an actor that starts now is busy: an idle one may take from its queue
            started = False
            for index in range(len(self._actors)):
                if index in running:
                    continue
                take = source(index, self._waiting, running)
                if take is None:
                    continue
                actor = self._actor(index)
                job, args, shards = self._waiting[take].pop()
                self._flight[actor.expand.remote(*args)] = (job, "expand", (actor, index, shards))
                running.add(index)
                started = True

    def _actor(self, index: int) -> Any:
        """Expander actor ``index``, started anew if ``cancel`` killed it. A new actor starts
        only when there is work for it: its start (a Python process importing Exo, seconds
        of CPU that no timing pauses) once ran beside the finalists' side-by-side timing at
        the end of a search, and the best SGEMM 256 kernel measured 2.5 times its time."""
        actor = self._actors[index]
        if actor is None:
            actor = self._actors[index] = self._actor_cls.remote(self._factory, self._options, self._cache_dir,
                                                                 self._bench)
        return actor

    def _expanding(self) -> set[int]:
        """Indices of the actors running an expansion shard now."""
        return {detail[1] for _, stage, detail in self._flight.values() if stage == "expand"}

    def _expanders_for(self, parent: Candidate, shards: int, spread: int | None = None) -> list[int]:
        """The actors (indices) that expand ``parent``'s ``shards`` shards, in turn over
        ``spread`` of them (all shards' count by default): first the one that made the
        parent (it replays nothing) unless it is busy while another is idle, an idle actor's
        replay costing less than leaving its core to wait; then the next ones."""
        n = len(self._actors)
        busy = self._expanding() | {index for index, calls in self._waiting.items() if calls}
        home = self._home.get(parent.fingerprint)
        if home is None or home >= n or (home in busy and len(busy) < n):
            idle = [i for i in range(n) if i not in busy] or list(range(n))
            home = idle[self._next_actor % len(idle)]
            self._next_actor += 1
        spread = max(1, min(n, spread if spread is not None else shards))
        return [(home + k % spread) % n for k in range(shards)]

    def _remember_home(self, expansion: Expansion, index: int) -> None:
        for child in expansion.children:
            self._home[child.fingerprint] = index
            self._home.move_to_end(child.fingerprint)
        while len(self._home) > _HOMES_KEPT:
            self._home.popitem(last=False)

    def pending(self) -> int:
        jobs = {job.id for job, _, _ in self._flight.values()}
        jobs |= {job.id for calls in self._waiting.values() for job, _, _ in calls}
        return len(jobs)

    def poll(self, timeout: float) -> list[JobResult]:
        """Finished jobs (waiting up to ``timeout`` s for the first). A built kernel is
        handed to its node's runner here, so builds and benchmarks overlap."""
        import ray

        if not self._flight:
            time.sleep(max(0.0, timeout))
            return []
        done, _ = ray.wait(list(self._flight), num_returns=1, timeout=timeout)
        if done:
            done, _ = ray.wait(list(self._flight), num_returns=len(self._flight), timeout=0)
        results: list[JobResult] = []
        for ref in done:
            job, stage, detail = self._flight.pop(ref)
            try:
                value = ray.get(ref)
            except ray.exceptions.RayError as e:
                if stage == "expand":
                    value = Expansion(job.candidates[0].fingerprint, (),
                                      error=f"expansion worker failed: {type(e).__name__}: {_first_line(e)}")
                else:
                    results.append(worker_failure(
                        job, f"evaluation worker failed: {type(e).__name__}: {_first_line(e)}"))
                    continue
            result = self._advance(job, stage, detail, value)
            if result is not None:
                results.append(result)
        self._dispatch()
        return results

    def _advance(self, job: Job, stage: str, detail: Any, value: Any) -> JobResult | None:
        """Take one finished stage of ``job`` further: a result when the job is done."""
        if stage == "expand":
            _, index, shards = detail
            if isinstance(value, Expansion):
                self._remember_home(value, index)
            if shards == 1:
                return JobResult(job, expansion=value)
            # Each shard goes back as it finishes; the last one is the job's final result.
            done = self._shards[job.id] = self._shards.get(job.id, 0) + 1
            if done < shards:
                return JobResult(job, expansion=value, final=False)
            del self._shards[job.id]
            return JobResult(job, expansion=value)
        if stage == "build":
            built, node = value
            if isinstance(built, SchedsearchError):
                raise built
            if isinstance(built, Measurement):
                return JobResult(job, measurements=(built,))
            wref, rref = detail
            runner = self._runner(node)
            ref = runner.run.remote(wref, rref, job.candidates[0], built, self._bench, self._cache_dir, job.cutoff,
                                    job.contend, job.quiet)
            self._flight[ref] = (job, "run", runner)
            return None
        if isinstance(value, SchedsearchError):
            raise value
        return JobResult(job, measurements=(value,) if stage == "run" else tuple(value))

    def cancel(self) -> None:
        """Abandon everything in flight: build tasks are force-cancelled (their worker and
        compiler die); busy runners and expanders are killed and replaced by new ones."""
        import ray

        busy: list[Any] = []
        for ref, (_, stage, detail) in list(self._flight.items()):
            if stage in ("build", "remeasure"):
                with contextlib.suppress(Exception):  # best effort: the result is ignored anyway
                    ray.cancel(ref, force=True)
            else:
                busy.append(detail if stage == "run" else detail[0])
        for actor in {id(a): a for a in busy}.values():
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)
            self._runners = {node: r for node, r in self._runners.items() if r is not actor}
            # Replaced when next needed (``_actor``), not now: see there.
            self._actors = [None if a is actor else a for a in self._actors]
        self._flight.clear()
        self._shards.clear()
        self._waiting.clear()
        self._resume_orphans()

    def _resume_orphans(self) -> None:
        """Resume what a killed runner of this node had paused for a timing (best effort:
        the cancelled workers it paused are being killed anyway)."""
        from schedsearch.evaluate import default_cache_dir
        from schedsearch.evaluate.quiet import resume_orphans

        with contextlib.suppress(Exception):
            resume_orphans(self._cache_dir or default_cache_dir())

    def machine(self) -> MachineInfo:
        """The measuring setup, as a worker sees it (computed once)."""
        import ray

        if self._machine is None and self._owns_ray:
            # A private cluster's workers are processes of this machine with this
            # environment: asking one would only wait for a worker to start.
            from schedsearch.evaluate import machine_info

            self._machine = machine_info(self._bench)
        if self._machine is None:
            try:
                self._machine = ray.get(self._machine_fn.remote(self._bench), timeout=_MACHINE_TIMEOUT)
            except ray.exceptions.RayError as e:
                raise ClusterError(f"cannot query the Ray workers' machine: {_first_line(e)}") from e
        return self._machine

    def close(self) -> None:
        """Kill the actors; shut down the cluster if this executor started it. Idempotent."""
        if self._closed:
            return
        self._closed = True
        import ray

        for actor in [*getattr(self, "_actors", ()), *getattr(self, "_runners", {}).values()]:
            if actor is None:
                continue
            with contextlib.suppress(Exception):  # the cluster may already be gone
                ray.kill(actor)
        self._actors = []
        self._runners = {}
        self._flight = {}
        self._waiting = {}
        self._workload_refs.clear()
        if self._owns_ray:
            with contextlib.suppress(Exception):  # a start cut short leaves Ray half up
                ray.shutdown()
        if self._watchdog is not None:
            # EOF tells the watchdog to sweep up anything the shutdown left behind.
            if self._watchdog.stdin is not None:
                self._watchdog.stdin.close()
            try:
                self._watchdog.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._watchdog.kill()
            self._watchdog = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _first_line(error: BaseException) -> str:
    lines = [ln for ln in str(error).strip().splitlines() if ln.strip()]
    return lines[-1].strip()[:300] if lines else ""
