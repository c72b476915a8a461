"""A simulated executor over a ``FakeTree``, and a clock the test moves by hand.

``FakeExecutor`` is a ``core.Executor`` - both its synchronous half (``expand`` /
``evaluate`` / ``remeasure``) and its asynchronous one (``submit`` / ``poll`` / ``cancel``) -
that runs no exo, cc or ray: it answers from the tree (``fake_tree``) and records every call,
so a test can check what the search asked for and when. Guarantees: deterministic - same
tree, same calls and same ``shuffle_seed`` => same results in the same completion order; time
passes only on the ``FakeClock`` it is given.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from schedsearch.core import (
    Candidate,
    Expansion,
    ExpansionPart,
    Job,
    JobKind,
    JobResult,
    MachineInfo,
    Measurement,
    Workload,
)
from schedsearch.testing.fake_tree import FakeTree

R = TypeVar("R", Expansion, Measurement)


class FakeClock:
    """A clock the test moves by hand (pass it as ``run_search(..., clock=clock)``)."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class FakeExecutor:
    """``core.Executor`` over a ``FakeTree``: a simulation runner for strategies and the loop.

    Records every call: ``expanded`` and ``evaluated`` (fingerprints, in completion order),
    ``expand_calls`` (the parents' fingerprints of each call or ``submit``, in input order),
    ``remeasured`` (one list of fingerprints per call). ``eval_seconds`` / ``expand_seconds``
    advance ``clock`` per item; ``on_evaluate`` runs before each measurement is yielded (a
    test can set a stop event there). With ``shuffle_seed`` results come back in a shuffled
    (but reproducible) completion order, like a real parallel executor.

    The asynchronous half (``submit`` / ``poll`` / ``cancel``) runs one job at a time (a
    random one of those in flight with ``shuffle_seed``, else the oldest) for its fake
    duration; a ``poll`` advances ``clock`` by at most its timeout, so a long job spans
    several polls, as a real one does. With ``report_seconds`` its result reports that
    duration as its own (``Expansion.seconds``, ``Measurement.run_seconds``) - which the
    finalists' reserve of time then counts too. ``cancelled`` counts jobs abandoned by ``cancel``;
    ``overlapped`` counts expansions submitted while evaluations were in flight.
    An expansion job with ``stream`` comes back in ``stream_shards`` results (children
    dealt out in turn, ``final`` on the last), each after its share of ``expand_seconds``;
    with ``stream_leads``, a job that asks for every heavy rewrite first
    (``Job.all_heavy_first``) has its first that many shards hold one child alone each, the
    first ones in the tree's order (``Expansion.leading``, as a real one's register tiles).
    ``root_seconds``: an
    evaluation job of the root takes that long instead of ``eval_seconds``.
    """

    def __init__(
        self,
        tree: FakeTree | None = None,
        *,
        clock: FakeClock | None = None,
        eval_seconds: float = 0.0,
        expand_seconds: float = 0.0,
        shuffle_seed: int | None = None,
        on_evaluate: Callable[[Candidate], None] | None = None,
        fail_remeasure: bool = False,
        remeasure_seconds: float = 0.0,
        stream_shards: int = 1,
        stream_leads: int = 0,
        report_seconds: bool = False,
        root_seconds: float | None = None,
    ) -> None:
        self.tree = tree or FakeTree()
        self.root_seconds = root_seconds
        self.report_seconds = report_seconds
        self.stream_shards = max(1, stream_shards)
        self.stream_leads = max(0, stream_leads)
        self.shards_sent: list[tuple[int, bool]] = []  # (job id, final) of every expansion result
        self.clock = clock
        self.eval_seconds = eval_seconds
        self.expand_seconds = expand_seconds
        self.on_evaluate = on_evaluate
        self.fail_remeasure = fail_remeasure
        self.remeasure_seconds = remeasure_seconds
        self.asked_after: list[int] = []  # per expand_calls entry: evaluations finished before it
        self._rng = random.Random(shuffle_seed) if shuffle_seed is not None else None
        self._machine = MachineInfo(cpu_model="fake cpu", cores=2, hostname="fake", compiler="fakecc")
        self.expanded: list[str] = []
        self.expand_calls: list[list[str]] = []
        self.parts_asked: list[tuple[str, ExpansionPart]] = []  # (parent fingerprint, part) per expansion job
        self.evaluated: list[str] = []
        self.cutoffs: dict[str, float | None] = {}  # fingerprint -> the cutoff its evaluation job carried
        self.remeasured: list[list[str]] = []
        self.closed = False
        self.cancelled = 0
        self._flight: list[Job] = []
        self._left: dict[int, float] = {}  # job id -> fake seconds it still runs
        self._shards_left: dict[int, list[Expansion]] = {}  # job id -> shards of a streamed expansion not sent
        self.overlapped = 0  # expansions submitted while evaluations were in flight

    def _order(self, items: Sequence[Candidate]) -> list[Candidate]:
        items = list(items)
        if self._rng is not None:
            self._rng.shuffle(items)
        return items

    def _tick(self, seconds: float) -> None:
        if self.clock is not None:
            self.clock.advance(seconds)

    def expand(self, workload: Workload, parents: Sequence[Candidate]) -> Iterator[Expansion]:
        """One Expansion per parent, lazily, in (possibly shuffled) completion order."""
        self.expand_calls.append([p.fingerprint for p in parents])
        for parent in self._order(parents):
            self._tick(self.expand_seconds)
            self.expanded.append(parent.fingerprint)
            yield self.tree.expand(parent)

    def evaluate(
        self, workload: Workload, reference: Candidate, candidates: Sequence[Candidate]
    ) -> Iterator[Measurement]:
        """One Measurement per candidate, lazily, in (possibly shuffled) completion order."""
        for candidate in self._order(candidates):
            self._tick(self.eval_seconds)
            self.evaluated.append(candidate.fingerprint)
            if self.on_evaluate is not None:
                self.on_evaluate(candidate)
            yield self.tree.measure(candidate, machine=self._machine)

    def remeasure(self, workload: Workload, reference: Candidate, candidates: Sequence[Candidate]) -> list[Measurement]:
        """Re-measured times (``FakeTree.remeasure_times`` where given), input order."""
        self._tick(self.remeasure_seconds)
        return self._remeasure(candidates)

    def _remeasure(self, candidates: Sequence[Candidate]) -> list[Measurement]:
        self.remeasured.append([c.fingerprint for c in candidates])
        if self.fail_remeasure:
            raise RuntimeError("fake remeasure failure")
        return [self.tree.measure(c, remeasure=True, machine=self._machine) for c in candidates]

    def submit(self, workload: Workload, reference: Candidate, jobs: Sequence[Job]) -> None:
        parents = [j.candidates[0].fingerprint for j in jobs if j.kind is JobKind.EXPAND]
        if parents:
            self.expand_calls.append(parents)
            self.parts_asked += [(j.candidates[0].fingerprint, j.part) for j in jobs if j.kind is JobKind.EXPAND]
            self.asked_after.append(len(self.evaluated))
            self.overlapped += any(j.kind is JobKind.EVALUATE for j in self._flight)
        self._flight.extend(jobs)

    def pending(self) -> int:
        return len(self._flight)

    def poll(self, timeout: float) -> list[JobResult]:
        """One finished job (none, after ``timeout`` on the fake clock, when nothing is in flight)."""
        if not self._flight:
            self._tick(timeout)
            return []
        index = self._rng.randrange(len(self._flight)) if self._rng is not None else 0
        job = self._flight[index]
        left = self._left.get(job.id, self._duration(job))
        if left > timeout:
            # A long job keeps running while the caller polls (and may be cancelled).
            self._left[job.id] = left - timeout
            self._tick(timeout)
            return []
        self._flight.pop(index)
        self._left.pop(job.id, None)
        self._tick(left)
        if job.kind is JobKind.EXPAND:
            return [self._expansion_result(job)]
        if job.kind is JobKind.EVALUATE:
            candidate = job.candidates[0]
            self.evaluated.append(candidate.fingerprint)
            self.cutoffs[candidate.fingerprint] = job.cutoff
            if self.on_evaluate is not None:
                self.on_evaluate(candidate)
            m = self.tree.measure(candidate, machine=self._machine)
            return [JobResult(job, measurements=(self._reported(m, job),))]
        return [JobResult(job, measurements=tuple(self._remeasure(job.candidates)))]

    def _expansion_result(self, job: Job) -> JobResult:
        """The whole expansion, or its next shard (the job stays in flight until the last)."""
        parent = job.candidates[0]
        if not (job.stream and self.stream_shards > 1):
            self.expanded.append(parent.fingerprint)
            self.shards_sent.append((job.id, True))
            return JobResult(job, expansion=self._reported(self.tree.expand(parent, job.part), job))
        if job.id not in self._shards_left:
            whole = self.tree.expand(parent, job.part)
            n = self.stream_shards
            lead = min(self.stream_leads if job.all_heavy_first else 0, n - 1, len(whole.children))
            rest = whole.children[lead:]
            groups = [whole.children[k : k + 1] for k in range(lead)] + [rest[k :: n - lead] for k in range(n - lead)]
            self._shards_left[job.id] = [
                dataclasses.replace(
                    whole,
                    children=group,
                    duplicates=whole.duplicates if k == 0 else 0,
                    illegal=whole.illegal if k == 0 else 0,
                    attempted=len(group) + (whole.duplicates + whole.illegal if k == 0 else 0),
                    leads=lead,
                    leading=k < lead,
                    shards=n,
                )
                for k, group in enumerate(groups)
            ]
        shards = self._shards_left[job.id]
        part = self._reported(shards.pop(0), job)
        final = not shards
        if final:
            del self._shards_left[job.id]
            self.expanded.append(parent.fingerprint)
        else:
            self._flight.append(job)  # the rest of it runs on, after the work queued meanwhile
        self.shards_sent.append((job.id, final))
        return JobResult(job, expansion=part, final=final)

    def _reported(self, result: R, job: Job) -> R:
        """``result`` (an Expansion or a Measurement) reporting the job's fake duration as its
        own when ``report_seconds`` is set."""
        if not self.report_seconds:
            return result
        key = "seconds" if isinstance(result, Expansion) else "run_seconds"
        changes: dict[str, Any] = {key: self._duration(job)}
        return dataclasses.replace(result, **changes)

    def _duration(self, job: Job) -> float:
        if job.kind is JobKind.EXPAND and job.stream:
            return self.expand_seconds / self.stream_shards
        if (
            job.kind is JobKind.EVALUATE
            and self.root_seconds is not None
            and any(c.parent is None for c in job.candidates)
        ):
            return self.root_seconds
        return {JobKind.EXPAND: self.expand_seconds, JobKind.EVALUATE: self.eval_seconds}.get(
            job.kind, self.remeasure_seconds
        )

    def cancel(self) -> None:
        self.cancelled += len(self._flight)
        self._flight.clear()
        self._left.clear()

    def machine(self) -> MachineInfo:
        return self._machine

    def close(self) -> None:
        self.closed = True
