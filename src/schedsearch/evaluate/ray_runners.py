"""``Runners``: the benchmark runner of each node of a Ray cluster.

A node times one kernel at a time, in one runner actor pinned to it (``ray_worker._Runner``),
started on first use and killed for good when the executor gives up on it.
"""

from __future__ import annotations

import contextlib
from typing import Any


class Runners:
    """The runners by node id, made from ``actor_cls`` (a Ray actor class of
    ``ray_worker._Runner``)."""

    def __init__(self, actor_cls: Any) -> None:
        self.actor_cls = actor_cls
        self._by_node: dict[str, Any] = {}

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

    def close(self) -> None:
        """Kill every runner (best effort: the cluster may already be gone)."""
        import ray

        for runner in self._by_node.values():
            with contextlib.suppress(Exception):
                ray.kill(runner)
        self._by_node = {}
