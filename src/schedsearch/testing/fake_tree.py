"""The synthetic schedule tree the fakes simulate: tests search logic with no exo, cc or ray.

A schedule is a sequence of moves ``m0 .. m{moves-1}``. Its *label* is the sorted multiset of
its moves (without the identity move ``m0``), so ``m1,m2`` and ``m2,m1`` have the same label,
the same fake C and the same fingerprint - the same kind of duplicates real Exo schedules
produce. ``m0`` changes nothing, so expanding reports it as a duplicate of the parent. Times
and statuses follow deterministically from the label and the tree's seed, and any label can
be given an explicit time, status or re-measured time.

Guarantees: everything is deterministic - same tree and calls => same children, same
measurements. With ``FakeTree(features=True)`` children carry a feature vector (how often
each move occurs, and the depth) from which a model can learn the tree's times. The records
made here (``fake_workload``, ``fake_root``, ``fake_candidate``, ...) are plain core records;
``fake_executor`` runs the tree as an executor, ``fake_model`` predicts its times.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from schedsearch.core import (
    ArgRole,
    ArgSpec,
    Candidate,
    DType,
    Expansion,
    ExpansionPart,
    FeatureVector,
    MachineInfo,
    Measurement,
    Rewrite,
    RewriteKind,
    Schedule,
    SearchConfig,
    Status,
    Store,
    Timing,
    Workload,
    sha256_text,
)

if TYPE_CHECKING:
    from schedsearch.search.inherited import Inherited

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
