"""Blocking calls on top of an executor's asynchronous ``submit`` / ``poll`` / ``cancel``.

The search loop drives executors asynchronously; tools that want one answer (``regress``,
the cost model's machine query, tests) use ``expand``, ``evaluate`` and ``remeasure``. Both
executors get these from ``BlockingCalls`` so the two halves cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from schedsearch.core import Candidate, Expansion, Job, JobKind, JobResult, Measurement, Status, Workload

#: How long one poll of a blocking call waits before it checks again.
POLL_SECONDS = 0.5


class BlockingCalls:
    """Mixin: ``expand`` / ``evaluate`` / ``remeasure`` for a class with ``submit``, ``poll``
    and ``cancel``. Their jobs get negative ids, so they never collide with a caller's."""

    _blocking_id = 0

    def _private_ids(self, n: int) -> list[int]:
        start = self._blocking_id
        self._blocking_id = start - n
        return [start - 1 - i for i in range(n)]

    def _drain(self, ids: Sequence[int]) -> Iterator[JobResult]:
        """Results of ``ids`` as they finish; closing early cancels what is left."""
        left = set(ids)
        try:
            while left:
                for result in self.poll(POLL_SECONDS):  # type: ignore[attr-defined]
                    if result.job.id in left:
                        if result.final:
                            left.discard(result.job.id)
                        yield result
        finally:
            if left:
                self.cancel()  # type: ignore[attr-defined]

    def expand(self, workload: Workload, parents: Sequence[Candidate]) -> Iterator[Expansion]:
        """One Expansion per parent, in completion order (a parent that cannot be expanded
        gives an Expansion with ``error`` set); an expansion that came in shards is merged."""
        ids = self._private_ids(len(parents))
        jobs = [Job(i, JobKind.EXPAND, (p,)) for i, p in zip(ids, parents, strict=True)]
        if not jobs:
            return
        self.submit(workload, parents[0], jobs)  # type: ignore[attr-defined]
        parts: dict[int, list[Expansion]] = {}
        for result in self._drain(ids):
            assert result.expansion is not None
            got = parts.setdefault(result.job.id, [])
            got.append(result.expansion)
            if result.final:
                yield got[0] if len(got) == 1 else Expansion.merge(got)

    def evaluate(
        self, workload: Workload, reference: Candidate, candidates: Sequence[Candidate]
    ) -> Iterator[Measurement]:
        """One Measurement per candidate, in completion order; all submitted at once."""
        ids = self._private_ids(len(candidates))
        jobs = [Job(i, JobKind.EVALUATE, (c,)) for i, c in zip(ids, candidates, strict=True)]
        if not jobs:
            return
        self.submit(workload, reference, jobs)  # type: ignore[attr-defined]
        for result in self._drain(ids):
            yield from result.measurements

    def remeasure(self, workload: Workload, reference: Candidate, candidates: Sequence[Candidate]) -> list[Measurement]:
        """Time the candidates side by side in one worker process; input order."""
        if not candidates:
            return []
        (i,) = self._private_ids(1)
        self.submit(workload, reference, [Job(i, JobKind.REMEASURE, tuple(candidates))])  # type: ignore[attr-defined]
        return [m for result in self._drain([i]) for m in result.measurements]


def worker_failure(job: Job, text: str) -> JobResult:
    """The result of a job whose worker died or failed: an expansion with an error, or a
    ``run_error`` measurement for each candidate (nobody else is blamed)."""
    if job.kind is JobKind.EXPAND:
        return JobResult(job, expansion=Expansion(job.candidates[0].fingerprint, (), error=text))
    return JobResult(
        job, measurements=tuple(Measurement(c.fingerprint, Status.RUN_ERROR, error=text) for c in job.candidates)
    )
