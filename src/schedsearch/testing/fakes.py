"""A simulated executor over a synthetic schedule tree: tests search logic with no exo, cc or ray.

The tree: a schedule is a sequence of moves ``m0 .. m{moves-1}``. Its *label* is the sorted
multiset of its moves (without the identity move ``m0``), so ``m1,m2`` and ``m2,m1`` have
the same label, the same fake C and the same fingerprint - the same kind of duplicates real
Exo schedules produce. ``m0`` changes nothing, so expanding reports it as a duplicate of the
parent. Times and statuses follow deterministically from the label and the tree's seed, and
any label can be given an explicit time, status or re-measured time.

Everything is deterministic: same tree and calls => same children, same measurements.

With ``FakeTree(features=True)`` children carry a feature vector (how often each move
occurs, and the depth) from which a model can learn the tree's times; ``FakeCostModel``
predicts with any rule a test gives it and records what it was told.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from schedsearch.core import (
    ArgRole,
    ArgSpec,
    Candidate,
    DType,
    Expansion,
    ExpansionPart,
    FeatureVector,
    Job,
    JobKind,
    JobResult,
    MachineInfo,
    Measurement,
    Paired,
    Rewrite,
    RewriteKind,
    Schedule,
    SearchConfig,
    Status,
    Store,
    Timing,
    TrainingSample,
    Workload,
    sha256_text,
)

if TYPE_CHECKING:
    from schedsearch.search.inherited import Inherited

R = TypeVar("R", Expansion, Measurement)

#: Feature version of the fake tree's vectors.
FAKE_FEATURES = "fake-v1"

_FAILURES = (Status.BUILD_ERROR, Status.RUN_ERROR, Status.WRONG_RESULT, Status.TIMEOUT)
IDENTITY_MOVE = "m0"


def fake_workload(proc: str = "fake_gemm", n: int = 64) -> Workload:
    """A Workload record that no one will compile (the fake executor never reads the source)."""
    source = f"# synthetic workload {proc} n={n}\n"
    return Workload(
        path=f"/nonexistent/{proc}.py",
        source=source,
        source_sha256=sha256_text(source),
        proc=proc,
        sizes=(("N", n),),
        args=(ArgSpec("A", ArgRole.TENSOR, DType.F32, (n, n)), ArgSpec("C", ArgRole.TENSOR, DType.F32, (n, n), True)),
        flops=2 * n**3,
    )


def _c_source(label: str) -> str:
    return f"/* fake kernel [{label}] */\nvoid schedsearch_kernel(void) {{}}\n"


def fingerprint_of(label: str) -> str:
    """Fingerprint the fake tree gives the schedule with this label ('' is the root)."""
    return sha256_text(_c_source(label))


def label_of(schedule: Schedule) -> str:
    """Order-insensitive label of a fake schedule: its non-identity moves, sorted."""
    return "+".join(sorted(s.target for s in schedule.steps if s.target != IDENTITY_MOVE))


def fake_root(moves: int | None = None) -> Candidate:
    """The unscheduled candidate of the fake tree (with features when ``moves`` is given)."""
    return _candidate(Schedule(), parent=None, depth=0, moves=moves)


def fake_candidate(*moves: str, parent: Candidate | None = None) -> Candidate:
    """The fake tree's candidate of the schedule ``moves`` (e.g. ``"m1", "m3"``), one step
    per move; a child of ``parent`` when given (a warm-start seed has no parent yet)."""
    schedule = Schedule(tuple(Rewrite.make(RewriteKind.SPLIT, m) for m in moves))
    return _candidate(schedule, parent.fingerprint if parent else None, len(moves))


def fake_replay(schedule: Schedule) -> Candidate:
    """The fake tree's candidate of ``schedule`` (the ``replay`` a resume rebuilds stored rows
    with: ``search.inherited.rebuild_inherited``)."""
    return _candidate(schedule, parent=None, depth=len(schedule))


def fake_inherited(store: Store, search_id: int, config: SearchConfig, root: Candidate | None = None) -> Inherited:
    """What a resume of search ``search_id`` rebuilds of its stored rows on the fake tree
    (pass it as ``run_search(..., search_id=..., inherited=...)``)."""
    from schedsearch.search.inherited import rebuild_inherited

    return rebuild_inherited(store, search_id, root if root is not None else fake_root(), config, fake_replay)


def fake_features(schedule: Schedule, moves: int) -> FeatureVector:
    """How often each move m1..m{moves-1} occurs in the schedule, then its depth."""
    counts = [float(sum(s.target == f"m{i}" for s in schedule.steps)) for i in range(1, moves)]
    return FeatureVector(FAKE_FEATURES, (*counts, float(len(schedule))))


def _candidate(
    schedule: Schedule, parent: str | None, depth: int, moves: int | None = None, unbuilt: frozenset[str] = frozenset()
) -> Candidate:
    """A fake node; with features (``moves``) it is built where it was made (as with gcc's
    notes), unless its label is in ``unbuilt``."""
    label = label_of(schedule)
    source = _c_source(label)
    return Candidate(
        schedule=schedule,
        c_source=source,
        fingerprint=sha256_text(source),
        proc_text=f"fake proc [{label}]",
        parent=parent,
        depth=depth,
        features=fake_features(schedule, moves) if moves is not None else None,
        built=moves is not None and label not in unbuilt,
    )


class FakeClock:
    """A clock the test moves by hand (pass it as ``run_search(..., clock=clock)``)."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def _unit(seed: int, text: str) -> float:
    """Deterministic pseudo-random number in [0, 1) from a seed and a text."""
    digest = hashlib.sha256(f"{seed}|{text}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass(frozen=True)
class FakeTree:
    """The rule of the synthetic tree. Labels are what ``label_of`` gives ('' = root).

    ``branching`` moves are proposed per node (plus the identity move, reported as a
    duplicate), chosen per parent by hash; ``illegal_per_expand`` rejected rewrites are
    reported per expansion. A node's time is ``base_seconds`` times a per-move factor in
    [0.7, 1.3) for each move; ``failure_rate`` of the non-root labels get a failing status.
    With ``costly_every`` k > 0, every k-th move (m_k, m_2k, ...) is a costly rewrite: a
    FIRST expansion leaves it out, and a DEFERRED one has only those (``ExpansionPart``).
    """

    moves: int = 6
    branching: int = 3
    illegal_per_expand: int = 1
    base_seconds: float = 1e-3
    failure_rate: float = 0.1
    seed: int = 0
    times: Mapping[str, float] = field(default_factory=dict)
    statuses: Mapping[str, Status] = field(default_factory=dict)
    remeasure_times: Mapping[str, float] = field(default_factory=dict)
    unreplayable: frozenset[str] = frozenset()  # labels whose expansion reports an error
    features: bool = False  # children carry ``fake_features`` and are built (``Candidate.built``) ...
    unbuilt: frozenset[str] = frozenset()  # ... but for these labels
    costly_every: int = 0

    def seconds(self, label: str) -> float:
        """The (noise-free) time of the node with this label."""
        if label in self.times:
            return self.times[label]
        t = self.base_seconds
        for move in label.split("+") if label else ():
            t *= 0.7 + 0.6 * _unit(self.seed, f"factor {move}")
        return t

    def status(self, label: str) -> Status:
        """The status the node with this label evaluates to."""
        if label in self.statuses:
            return self.statuses[label]
        if label and _unit(self.seed, f"fails {label}") < self.failure_rate:
            return _FAILURES[int(_unit(self.seed, f"how {label}") * len(_FAILURES))]
        return Status.OK

    def costly(self, move: str) -> bool:
        """Whether ``move`` is one of the costly rewrites (``costly_every``)."""
        return self.costly_every > 0 and int(move[1:]) % self.costly_every == 0

    def expand(self, parent: Candidate, part: ExpansionPart = ExpansionPart.ALL) -> Expansion:
        """The children of ``parent`` (identity move dropped as a duplicate) of ``part``."""
        label = label_of(parent.schedule)
        if label in self.unreplayable:
            return Expansion(parent=parent.fingerprint, children=(), error=f"cannot replay [{label}]")
        names = [f"m{i}" for i in range(1, self.moves)]
        names.sort(key=lambda m: _unit(self.seed, f"order {label} {m}"))
        proposed = names[: self.branching]
        left = sum(self.costly(m) for m in proposed) if part is ExpansionPart.FIRST else 0
        if part is not ExpansionPart.ALL:
            proposed = [m for m in proposed if self.costly(m) is (part is ExpansionPart.DEFERRED)]
        moves = self.moves if self.features else None
        children = tuple(
            _candidate(
                parent.schedule.then(Rewrite.make(RewriteKind.SPLIT, m)),
                parent.fingerprint,
                parent.depth + 1,
                moves,
                self.unbuilt,
            )
            for m in proposed
        )
        return Expansion(
            parent=parent.fingerprint,
            children=children,
            attempted=len(children) + 1 + self.illegal_per_expand,
            illegal=self.illegal_per_expand,
            duplicates=1,
            deferred=left,
        )

    def measure(
        self, candidate: Candidate, *, remeasure: bool = False, machine: MachineInfo | None = None
    ) -> Measurement:
        """The measurement of ``candidate`` (re-measured times when ``remeasure`` is set)."""
        label = label_of(candidate.schedule)
        status = self.status(label)
        if status is not Status.OK:
            return Measurement(candidate.fingerprint, status, error=f"fake {status.value} [{label}]", machine=machine)
        t = self.remeasure_times.get(label, self.seconds(label)) if remeasure else self.seconds(label)
        return Measurement(
            candidate.fingerprint,
            Status.OK,
            Timing(median=t, min=t * 0.98, q1=t * 0.99, q3=t * 1.01, samples=(t,)),
            machine=machine,
        )


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
    With ``drift``, the machine's speed changes: the n-th evaluation's times are the tree's
    times multiplied by ``drift(n)``, and so are those of the yardstick it is timed beside
    (``Job.yardstick``; ``yardsticks`` records which, per candidate). ``root_seconds``: an
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
        drift: Callable[[int], float] | None = None,
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
        self.drift = drift
        self.yardsticks: dict[str, str | None] = {}  # fingerprint -> the yardstick its evaluation job named
        self.asked_after: list[int] = []  # per expand_calls entry: evaluations finished before it
        self._rng = random.Random(shuffle_seed) if shuffle_seed is not None else None
        self._machine = MachineInfo(cpu_model="fake cpu", cores=2, hostname="fake", compiler="fakecc")
        self.expanded: list[str] = []
        self.expand_calls: list[list[str]] = []
        self.parts_asked: list[tuple[str, ExpansionPart]] = []  # (parent fingerprint, part) per expansion job
        self.evaluated: list[str] = []
        self.cutoffs: dict[str, float | None] = {}  # fingerprint -> the cutoff its evaluation job carried
        self.contends: dict[str, float | None] = {}  # fingerprint -> the contend bar its evaluation job carried
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
            self.contends[candidate.fingerprint] = job.contend
            self.yardsticks[candidate.fingerprint] = job.yardstick.fingerprint if job.yardstick else None
            if self.on_evaluate is not None:
                self.on_evaluate(candidate)
            m = self._drifted(candidate, job.yardstick)
            return [JobResult(job, measurements=(self._reported(m, job),))]
        return [JobResult(job, measurements=tuple(self._remeasure(job.candidates)))]

    def _drifted(self, candidate: Candidate, yardstick: Candidate | None) -> Measurement:
        """The tree's measurement at this moment's speed (``drift``), beside ``yardstick``."""
        m = self.tree.measure(candidate, machine=self._machine)
        if self.drift is None or m.timing is None:
            return m
        factor = self.drift(len(self.evaluated))
        m = dataclasses.replace(m, timing=m.timing.scaled(factor))
        if yardstick is None:
            return m
        y = self.tree.measure(yardstick, machine=self._machine).timing
        return m if y is None else dataclasses.replace(m, paired=Paired(yardstick.fingerprint, y.scaled(factor)))

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


class LuckyFirstTime(FakeExecutor):
    """A ``FakeExecutor`` whose every candidate's first measurement comes out ``lucky`` times
    its true time (a lucky moment: 0.8 is 20% fast); later measurements are true."""

    def __init__(self, tree: FakeTree, lucky: float = 0.8) -> None:
        super().__init__(tree)
        self.lucky = lucky

    def _drifted(self, candidate: Candidate, yardstick: Candidate | None) -> Measurement:
        m = super()._drifted(candidate, yardstick)
        if m.timing is None or self.evaluated.count(candidate.fingerprint) > 1:
            return m
        return dataclasses.replace(m, timing=m.timing.scaled(self.lucky))


class FakeCostModel:
    """``core.CostModel`` predicting with ``rule(features)``; records every call.

    ``ready`` says whether a model "exists" yet (``predict`` returns ``[]`` until then);
    ``observed`` holds every sample it was given, ``predicted`` every batch it answered.
    """

    def __init__(self, rule: Callable[[FeatureVector], float], *, ready: bool = True) -> None:
        self.rule = rule
        self.ready = ready
        self.observed: list[TrainingSample] = []
        self.predicted: list[list[float]] = []
        self.closed = False

    def predict(self, features: Sequence[FeatureVector]) -> list[float]:
        if not self.ready:
            return []
        out = [self.rule(f) for f in features]
        self.predicted.append(out)
        return out

    def observe(self, samples: Sequence[TrainingSample]) -> None:
        self.observed.extend(samples)

    def trained_on(self) -> int:
        return len(self.observed) if self.ready else 0

    def close(self) -> None:
        self.closed = True


def oracle(tree: FakeTree) -> Callable[[FeatureVector], float]:
    """A perfect rule for a ``FakeTree(features=True)``: the true log(time / root time)."""
    import math

    def rule(features: FeatureVector) -> float:
        label = "+".join(sorted(f"m{i + 1}" for i, n in enumerate(features.values[:-1]) for _ in range(int(n))))
        return math.log(tree.seconds(label) / tree.seconds(""))

    return rule
