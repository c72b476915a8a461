"""Work the Ray executor lost with its worker or its node, and the nodes that are gone.

A node of a cluster can vanish mid-search (a spot instance reclaimed, a machine that loses
power, a raylet killed): the builds, timings and expansions in flight there fail with a
Ray error that says nothing about the candidates. Such a failure is the machine's, so the
executor sends the job back to the queue (``RayExecutor._requeue``) rather than record it
as the candidate's; a job lost ``MAX_LOSSES`` times is one whose own work kills its worker
each time, and only then is the failure reported as the job's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable

#: Times one job may lose its worker or node and go back to the queue. More than one:
#: the retry of a job lost with its node may land on a second node lost in the same fault.
MAX_LOSSES = 3


class LostWork:
    """Losses per job, the count of jobs sent back, and the cluster's dead nodes (as Ray
    last said when a loss was taken). The executor's driver thread alone uses it."""

    def __init__(self, dead_nodes: Callable[[], Iterable[str]] | None = None) -> None:
        self._nodes = dead_nodes or _dead_ray_nodes  # what Ray says (tests give their own)
        self._losses: dict[int, int] = {}
        self._dead: set[str] = set()
        self.requeued = 0
        self.reasons: list[str] = []  # why each job went back, oldest first (the first few hundred)

    def take(self, job_id: int, reason: str) -> bool:
        """Count a loss of ``job_id``: True when it may go back to the queue, False when it
        was lost ``MAX_LOSSES`` times already. Reads which nodes are gone meanwhile."""
        self._refresh()
        lost = self._losses.get(job_id, 0) + 1
        if lost > MAX_LOSSES:
            return False
        self._losses[job_id] = lost
        self.requeued += 1
        if len(self.reasons) < 256:
            self.reasons.append(reason)
        return True

    def forget(self, job_id: int) -> None:
        """``job_id`` is done: its losses no longer count."""
        self._losses.pop(job_id, None)

    def dead(self, node: str) -> bool:
        """Whether Ray said ``node`` is dead when a loss was last taken."""
        return node in self._dead

    @property
    def dead_nodes(self) -> frozenset[str]:
        return frozenset(self._dead)

    def _refresh(self) -> None:
        # Best effort: without an answer the job still goes back, and a kernel built on a
        # dead node is found out when its runner fails.
        with contextlib.suppress(Exception):
            self._dead = set(self._nodes())


def _dead_ray_nodes() -> list[str]:
    import ray

    return [str(n["NodeID"]) for n in ray.nodes() if not n.get("Alive", True)]


def first_line(error: BaseException | None) -> str:
    """The last non-empty line of an error's text (Ray's errors end with the cause), cut to 300 characters."""
    lines = [ln for ln in str(error).strip().splitlines() if ln.strip()] if error is not None else []
    return lines[-1].strip()[:300] if lines else ""
