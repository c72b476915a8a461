"""``RayExecutor``: ``core.Executor`` on a Ray cluster - expansion on a pool of actors,
evaluation as Ray tasks, results streamed back as they finish.

It schedules and tracks the work; the tasks' and actors' bodies are ``ray_worker``'s, and
the connection to Ray (joining ``--address`` or starting a private cluster, and its
watchdog) is ``ray_cluster``'s. ``ray_backend`` describes the whole.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Self

from schedsearch.core import (
    BenchConfig,
    Candidate,
    ExpandOptions,
    Expansion,
    Job,
    JobKind,
    JobResult,
    MachineInfo,
    Measurement,
    Workload,
)
from schedsearch.errors import SchedsearchError
from schedsearch.evaluate.bench import killed_from_outside
from schedsearch.evaluate.jobs import BlockingCalls, worker_failure
from schedsearch.evaluate.ray_cluster import RayCluster
from schedsearch.evaluate.ray_losses import LostWork, first_line
from schedsearch.evaluate.ray_runners import Runners

# Private names: they are the Ray workers' process titles (``ray_worker``).
from schedsearch.evaluate.ray_worker import (
    _build_task,
    _ExpanderHost,
    _machine_task,
    _prepare_task,
    _remeasure_task,
    _Runner,
)
from schedsearch.evaluate.shard_queue import (  # the STREAM_* constants: ``ray_backend`` names them here
    STREAM_LEADS_PER_ACTOR,
    STREAM_SHARDS_PER_ACTOR,
    Homes,
    ShardQueue,
    source,
)
from schedsearch.targets import target


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
        self._cluster = RayCluster()
        self._closed = False
        self._machine: MachineInfo | None = None
        self._workload_refs: dict[str, Any] = {}
        self._homes = Homes()
        # In flight: ref -> (job, stage, detail). Stages: "expand" (detail: actor, its index,
        # shards, its arguments), "build" and "remeasure" (detail: the workload's and the
        # reference's refs), "run" (detail: the runner, the node that built the kernel, the refs).
        self._flight: dict[Any, tuple[Job, str, Any]] = {}
        self._shards: dict[int, int] = {}  # job id -> shards of its expansion back so far
        # Expansion shards not started yet, per actor index: (job, args, shards).
        self._waiting: dict[int, ShardQueue[tuple[Job, tuple[Any, ...], int]]] = {}
        self._submissions = itertools.count()  # one line for all actors' queues (``shard_queue.source``)
        self._runners = Runners(None)  # its actor class is made once Ray is connected
        self._killed: set[int] = set()  # jobs whose benchmark was killed from outside once
        self._lost = LostWork()
        try:
            self._cluster.connect(address, connect_timeout, workers, stop)
            import ray

            # One retry, for a worker that died under a task rather than because of it: a
            # force-cancelled task's worker is killed, and Ray may already have leased that
            # worker to the next task of the same kind (a build submitted just after a
            # cancel). Cancelled tasks themselves are never retried; a kernel's own crash
            # happens in a child process and comes back as data, not as a dead worker.
            # Spread: where a kernel is built decides which node's runner times it. Left to Ray,
            # builds go where their arguments are, the driver's node, whose core a build frees
            # sooner than a timing: two nodes of one CPU each built 170 and 10 of 180 kernels.
            self._build_fn = ray.remote(num_cpus=1, max_retries=1, scheduling_strategy="SPREAD")(_build_task)
            self._remeasure_fn = ray.remote(num_cpus=1, max_retries=1)(_remeasure_task)
            self._machine_fn = ray.remote(num_cpus=0, max_retries=0)(_machine_task)
            self._runners.actor_cls = ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0)(_Runner)
            # Spread too: left to Ray, every expander starts on the driver's node, and on a
            # cluster the other nodes' cores would never run Exo.
            self._actor_cls = ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0, scheduling_strategy="SPREAD")(
                _ExpanderHost
            )
            self._factory, self._options = expander_factory, expand_options
            self._actors: list[Any] = [  # None for one killed, until it is next needed (``_actor``)
                self._actor_cls.remote(expander_factory, expand_options, self._cache_dir, bench) for _ in range(workers)
            ]
            # The target's header is precompiled on a build core while the root is expanded,
            # not by the first builds of its children, after it: on a 2-core Zen 3 that put
            # SGEMM 256's first measured child 3.5-4 s later. Nothing waits for the task.
            header = target(expand_options.target).header
            self._prepared = (
                ray.remote(num_cpus=1, max_retries=0)(_prepare_task).remote(bench, self._cache_dir, header)
                if header
                else None
            )
        except BaseException:
            self.close()
            raise

    @property
    def workers(self) -> int:
        return self._workers

    @property
    def slots(self) -> int:
        """Evaluations the cluster can build at once: its CPUs (every node's), at least ``workers``."""
        return max(self._workers, self._cluster.cpus())

    def _workload_ref(self, workload: Workload) -> Any:
        import ray

        ref = self._workload_refs.get(workload.key)
        if ref is None:
            ref = self._workload_refs[workload.key] = ray.put(workload)
        return ref

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
            else:
                self._start(job, wref, rref)
        numbers = {job.id: next(self._submissions) for job in expands}  # one number per job, in every queue
        for index, calls in shards_for.items():
            # Lowest priority first; among equals the latest submitted, each job's shards in order.
            queue = self._waiting.setdefault(index, ShardQueue())
            for job in dict.fromkeys(job for job, _, _ in calls):
                queue.push_job(job.priority, [call for call in calls if call[0] is job], numbers[job.id])
        self._dispatch()

    def _start(self, job: Job, wref: Any, rref: Any) -> None:
        """Start an evaluation (its build, on any node) or a remeasurement."""
        ref: Any  # the two tasks' results differ; ``_flight``'s stage says which it is
        if job.kind is JobKind.EVALUATE:
            ref = self._build_fn.remote(wref, rref, job.candidates[0], self._bench, self._cache_dir)
            self._flight[ref] = (job, "build", (wref, rref))
        else:
            ref = self._remeasure_fn.remote(wref, rref, list(job.candidates), self._bench, self._cache_dir)
            self._flight[ref] = (job, "remeasure", (wref, rref))

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
                self._flight[actor.expand.remote(*args)] = (job, "expand", (actor, index, shards, args))
                running.add(index)
                started = True

    def _actor(self, index: int) -> Any:
        """Expander actor ``index``, started anew if ``cancel`` killed it. A new actor starts
        only when there is work for it: its start (a Python process importing Exo, seconds
        of CPU that no timing pauses) once ran beside the finalists' side-by-side timing at
        the end of a search, and the best SGEMM 256 kernel measured 2.5 times its time."""
        actor = self._actors[index]
        if actor is None:
            actor = self._actors[index] = self._actor_cls.remote(
                self._factory, self._options, self._cache_dir, self._bench
            )
        return actor

    def _expanding(self) -> set[int]:
        """Indices of the actors running an expansion shard now."""
        return {detail[1] for _, stage, detail in self._flight.values() if stage == "expand"}

    def _expanders_for(self, parent: Candidate, shards: int, spread: int | None = None) -> list[int]:
        """The actors (indices) that expand ``parent``'s shards (``Homes.actors_for``)."""
        busy = self._expanding() | {index for index, calls in self._waiting.items() if calls}
        return self._homes.actors_for(parent.fingerprint, len(self._actors), busy, shards, spread)

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
                why = f"{type(e).__name__}: {first_line(e)}"
                # Every Ray error here is the system's: the tasks' own failures come back as data.
                if self._requeue(job, stage, detail, why):
                    continue
                if stage != "expand":
                    results.append(worker_failure(job, f"evaluation worker failed: {why}"))
                    continue
                value = Expansion(job.candidates[0].fingerprint, (), error=f"expansion worker failed: {why}")
            result = self._advance(job, stage, detail, value)
            if result is not None:
                results.append(result)
        for result in results:
            if result.final:
                self._lost.forget(result.job.id)
                self._killed.discard(result.job.id)
        self._dispatch()
        return results

    def _requeue(self, job: Job, stage: str, detail: Any, why: str) -> bool:
        """Send work whose worker or node was lost back to the queue, to be done on a live
        node (a machine fault blames no candidate); False when ``job`` was lost too often
        (``LostWork``): then the failure is reported as the job's."""

        if not self._lost.take(job.id, why):
            return False
        if stage == "run":  # its node may be gone: a call queued for a pinned actor never returns
            self._runners.kill(detail[0])
        if stage == "expand":
            _, index, shards, args = detail
            # The actor restarts on a live node (``max_restarts``); the shard goes ahead of its queue.
            self._waiting.setdefault(index, ShardQueue()).push_job(
                job.priority, [(job, args, shards)], next(self._submissions)
            )
        else:  # built again wherever a core is free; timed by that node's runner
            self._start(job, *detail[-2:])
        return True

    @property
    def requeued(self) -> int:
        """Jobs sent back to the queue so far because their worker or node was lost."""
        return self._lost.requeued

    def _advance(self, job: Job, stage: str, detail: Any, value: Any) -> JobResult | None:
        """Take one finished stage of ``job`` further: a result when the job is done."""
        if stage == "expand":
            _, index, shards, _ = detail
            if isinstance(value, Expansion):
                self._homes.remember((child.fingerprint for child in value.children), index)
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
            if self._lost.dead(node):  # built on a node lost since: its kernel went with it
                return (
                    None if self._requeue(job, stage, detail, "node lost") else worker_failure(job, "its node was lost")
                )
            runner = self._runners.of(node)
            ref = runner.run.remote(wref, rref, job.candidates[0], built, self._bench, self._cache_dir, job.cutoff)
            self._flight[ref] = (job, "run", (runner, node, wref, rref))
            return None
        if isinstance(value, SchedsearchError):
            raise value
        if stage == "run":  # the runner said where it timed it; the build task, where it built it
            measured = dataclasses.replace(value, built_node=detail[1])
            if killed_from_outside(measured) and job.id not in self._killed:
                # A node going down kills its benchmarks, and its runner may still report it:
                # the job is done again (elsewhere, if the node is gone); a second kill stands.
                self._killed.add(job.id)
                if self._lost.take(job.id, "its benchmark was killed by SIGKILL"):
                    self._start(job, *detail[-2:])
                    return None
            return JobResult(job, measurements=(measured,))
        return JobResult(job, measurements=tuple(value))

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
                busy.append(detail[0])
        for actor in {id(a): a for a in busy}.values():
            self._runners.kill(actor)  # a runner or an expander
            # Replaced when next needed (``_actor``), not now: see there.
            self._actors = [None if a is actor else a for a in self._actors]
        self._flight.clear()
        self._killed.clear()
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
        """The measuring setup, as a worker sees it (computed once: ``RayCluster.machine``)."""
        if self._machine is None:
            self._machine = self._cluster.machine(self._bench, self._machine_fn)
        return self._machine

    def close(self) -> None:
        """Kill the actors; shut down the cluster if this executor started it. Idempotent."""
        if self._closed:
            return
        self._closed = True
        import ray

        for actor in getattr(self, "_actors", ()):
            if actor is None:
                continue
            with contextlib.suppress(Exception):  # the cluster may already be gone
                ray.kill(actor)
        self._actors = []
        self._runners.close()
        self._flight = {}
        self._waiting = {}
        self._workload_refs.clear()
        self._cluster.close()  # shuts down a private cluster, then the watchdog sweeps up

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
