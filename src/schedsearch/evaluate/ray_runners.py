"""``Runners``: the benchmark runner of each node of a Ray cluster, and the measurements that
wait for their runner to answer again.

A node times one kernel at a time, in one runner actor pinned to it (``ray_worker._Runner``),
started on first use. A measurement that says its benchmark was killed from outside
(``bench.killed_from_outside``) is held (``hold``) until the runner that took it answers
again: a node going down kills its benchmarks before its runner, and such a measurement then
blames the candidate for the machine's fault. If the runner answers, the measurement stands
(``release``); if it is lost, the executor does the job again elsewhere and the measurement
is dropped (``drop_held``).
"""

from __future__ import annotations

import contextlib
from typing import Any

from schedsearch.core import Measurement


class Runners:
    """The runners by node id, made from ``actor_cls`` (a Ray actor class of
    ``ray_worker._Runner``), and the held measurements by job id."""

    def __init__(self, actor_cls: Any) -> None:
        self.actor_cls = actor_cls
        self._by_node: dict[str, Any] = {}
        self._held: dict[int, Measurement] = {}

    def of(self, node: str) -> Any:
        """The runner of ``node`` (started on first use, pinned to that node)."""
        runner = self._by_node.get(node)
        if runner is None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            strategy = NodeAffinitySchedulingStrategy(node_id=node, soft=False)
            # Ray starts its workers at niceness 15; the runner's kernels run at the normal
            # priority instead, above the node's compilers and expanders (niceness 19).
            runner = self._by_node[node] = self.actor_cls.options(
                scheduling_strategy=strategy, runtime_env={"env_vars": {"RAY_worker_niceness": "0"}}
            ).remote()
        return runner

    def kill(self, actor: Any) -> None:
        """Kill ``actor`` for good (best effort) and, if it is a runner, forget it: its node
        gets a new one when next needed."""
        import ray

        self._by_node = {node: r for node, r in self._by_node.items() if r is not actor}
        with contextlib.suppress(Exception):  # its node may be gone already
            ray.kill(actor, no_restart=True)

    def hold(self, job_id: int, measured: Measurement, runner: Any) -> Any:
        """Hold job ``job_id``'s ``measured`` until ``runner`` answers: the ref of its answer."""
        self._held[job_id] = measured
        return runner.alive.remote()

    def release(self, job_id: int) -> Measurement:
        """The measurement held for ``job_id``, now that its runner answered."""
        return self._held.pop(job_id)

    def drop_held(self, job_id: int | None = None) -> None:
        """Forget the measurement held for ``job_id`` (every one when None)."""
        if job_id is None:
            self._held.clear()
        else:
            self._held.pop(job_id, None)

    def close(self) -> None:
        """Kill every runner (best effort: the cluster may already be gone)."""
        import ray

        for runner in self._by_node.values():
            with contextlib.suppress(Exception):
                ray.kill(runner)
        self._by_node = {}
        self._held.clear()
