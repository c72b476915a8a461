"""The worker side of the Ray executor: the bodies of its tasks and actors, run in Ray's
worker processes. Each receives plain records (``Workload``, ``Candidate``, configs) and
rebuilds what it needs there (Exo procs do not pickle); a candidate's failure comes back as
data, and infrastructure errors (``SchedsearchError``) are returned for the driver to raise.

``ray_executor`` wraps these with ``ray.remote``. Their names are the workers' process
titles (``ray::_ExpanderHost.expand``, ``ray::_build_task``) and stay as they are.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from schedsearch.core import (
    BenchConfig,
    Candidate,
    ExpandOptions,
    Expansion,
    ExpansionPart,
    MachineInfo,
    Measurement,
    Status,
    Workload,
)
from schedsearch.errors import SchedsearchError


def _build_task(
    workload: Workload,
    reference: Candidate,
    candidate: Candidate,
    bench: BenchConfig,
    cache_dir: Path | None,
) -> tuple[Any, str]:
    """Runs in a Ray worker: a ``Built`` (or the build_error Measurement, or the
    infrastructure error) and the id of the node whose cache holds the kernel."""
    import ray

    from schedsearch.evaluate import default_cache_dir
    from schedsearch.evaluate.pipeline import build_candidate

    node = ray.get_runtime_context().get_node_id()
    try:
        built = build_candidate(workload, reference, candidate, bench, cache_dir or default_cache_dir())
    except SchedsearchError as e:
        return e, node
    if isinstance(built, Measurement):  # a build error: built here, never timed
        built = dataclasses.replace(built, built_node=node)
    return built, node


def _here() -> str:
    """This worker's node (its Ray node id)."""
    import ray

    return str(ray.get_runtime_context().get_node_id())


class _Runner:
    """Ray actor body: the benchmark runner of one node; it times one kernel at a time."""

    def run(
        self,
        workload: Workload,
        reference: Candidate,
        candidate: Candidate,
        built: Any,
        bench: BenchConfig,
        cache_dir: Path | None,
        cutoff: float | None = None,
    ) -> Measurement | SchedsearchError:
        from schedsearch.evaluate import default_cache_dir
        from schedsearch.evaluate.pipeline import run_candidate

        try:
            measured = run_candidate(
                workload, reference, candidate, built, bench, cache_dir or default_cache_dir(), cutoff
            )
        except SchedsearchError as e:
            return e
        # The node this runner is pinned to says it timed the kernel (the driver adds which
        # node built it, from the build task's own report).
        return dataclasses.replace(measured, node=_here())


def _remeasure_task(
    workload: Workload,
    reference: Candidate,
    candidates: Sequence[Candidate],
    bench: BenchConfig,
    cache_dir: Path | None,
) -> list[Measurement] | SchedsearchError:
    from schedsearch.evaluate import default_cache_dir, remeasure

    try:
        measured = remeasure(workload, reference, candidates, bench, cache_dir or default_cache_dir())
    except SchedsearchError as e:
        return e
    node = _here()  # built and timed side by side in this one process
    return [
        dataclasses.replace(m, node="" if m.status is Status.BUILD_ERROR else node, built_node=node) for m in measured
    ]


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

    def __init__(
        self,
        factory: Callable[[Workload, ExpandOptions], Any],
        options: ExpandOptions,
        cache_dir: Path | None = None,
        bench: BenchConfig | None = None,
    ) -> None:
        from schedsearch.evaluate import default_cache_dir
        from schedsearch.evaluate.process import collect_cycles_less, run_in_background

        self._factory = factory
        self._options = options
        self._expanders: dict[str, Any] = {}
        self._cache_dir = cache_dir or default_cache_dir()
        self._bench = bench
        run_in_background()  # Exo must not take the CPU from a kernel being timed
        collect_cycles_less()  # this process is the actor's: it only expands

    def expand(
        self,
        workload: Workload,
        parent: Candidate,
        shard: int = 0,
        shards: int = 1,
        lead: int = 0,
        part: ExpansionPart = ExpansionPart.ALL,
    ) -> Expansion:
        from schedsearch.evaluate.quiet import working

        # Registered as busy: the node's benchmark runner pauses it while it times a kernel.
        with working(self._cache_dir):
            expander = self._expanders.get(workload.key)
            if expander is None:
                from schedsearch.evaluate.expansions import worker_expander

                expander = self._expanders[workload.key] = worker_expander(
                    self._factory, workload, self._options, self._bench, self._cache_dir
                )
            try:
                from schedsearch.evaluate.expansions import expand_part

                return expand_part(expander, parent, shard, shards, lead, part)
            except Exception as e:  # noqa: BLE001 - one parent's failure is data, not a crash
                return Expansion(parent.fingerprint, (), error=f"{type(e).__name__}: {e}")
