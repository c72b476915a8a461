"""Expansion: from a parent candidate to its distinct legal children.

``Expander`` and ``root_candidate`` run inside workers (possibly on another node): they take
only plain records and rebuild Exo procs from the workload's source text.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from schedsearch.core import (
    Candidate,
    ExpandOptions,
    Expansion,
    ExpansionPart,
    FeatureVector,
    Rewrite,
    Schedule,
    Workload,
    sha256_text,
)
from schedsearch.errors import ReplayError
from schedsearch.model.features import CacheSizes, candidate_features, feature_vector, machine_caches, noted
from schedsearch.transforms import exo_patches
from schedsearch.transforms.call_memo import CallMemo
from schedsearch.transforms.codegen import fingerprint, kernel_c, proc_text
from schedsearch.transforms.replay import EXO_CATCH, rejected_by_exo, replay, try_apply
from schedsearch.transforms.rules import describe, propose_all, rule_for
from schedsearch.transforms.workload import bound_proc_from_source

#: Procs kept per Expander: enough for the frontier a worker sees, small enough for memory.
CACHE_SIZE = 256
#: Parents whose proposal (and remembered Exo calls) an Expander keeps: those whose shards
#: a worker may still be dealt. A streamed expansion cuts one parent into up to 20 shards,
#: and each shard needs the parent's whole proposal to know which rewrites are its own
#: (``dealt``). Few: each keeps the procs its calls made.
PROPOSALS_KEPT = 8


@functools.cache
def code_version() -> str:
    """sha256 of Exo's version and of every source file of schedsearch: any change to the
    code may change what an expansion gives, so expansions kept on disk are keyed by it."""
    package = Path(__file__).resolve().parents[1]
    try:
        exo = importlib.metadata.version("exo-lang")
    except importlib.metadata.PackageNotFoundError:  # Exo from a source tree: its files say it
        spec = importlib.util.find_spec("exo")
        assert spec is not None  # Exo is imported already
        exo = str(Path(spec.origin or "").parent)
    h = hashlib.sha256(f"exo {exo}".encode())
    for path in sorted(package.rglob("*.py")):
        h.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def propose(proc, options: ExpandOptions = ExpandOptions()) -> list[Rewrite]:
    """Plausible rewrites at ``proc``, in a deterministic order (Exo decides legality)."""
    return propose_all(proc, options)


def dealt(
    rewrites: Sequence[Rewrite], shard: int, shards: int, lead: int = 0, pool: Sequence[int] | None = None
) -> list[int]:
    """The positions (in proposal order) of the rewrites shard ``shard`` of ``shards`` tries,
    out of ``pool`` (positions; default: all of them).

    The rewrites are dealt out in proposal order, one to each shard in turn. With ``lead``,
    the first ``lead`` shards - the first one an executor runs on each of its workers - try
    one heavy rewrite each (``Rule.heavy``: a register tile) and nothing else: the first
    heavy ones in proposal order, which the rules propose best first. They come back in the
    time one of them takes, and the expensive work starts at once on every worker, as in
    longest-first scheduling. Everything else is dealt out over the other shards."""
    positions = list(range(len(rewrites))) if pool is None else list(pool)
    heavy = _leading(rewrites, shards, lead, positions)
    if shard < len(heavy):
        return [heavy[shard]]
    taken = set(heavy)
    rest = [p for p in positions if p not in taken]
    return rest[shard - len(heavy) :: shards - len(heavy)]


def _leading(rewrites: Sequence[Rewrite], shards: int, lead: int, positions: Sequence[int]) -> list[int]:
    """The positions of the heavy rewrites that lead, one to a shard (``dealt``)."""
    if not 0 < lead < shards:
        return []
    return [p for p in positions if rule_for(rewrites[p].kind).heavy][:lead]


#: A parent whose proc has at least this many statements is large: its ``Rule.deferred``
#: rewrites cost Exo seconds each and wait for its second expansion (``ExpansionPart``).
#: The unscheduled procs of the examples have 4-8, their register tiles and unrolled
#: nests 39-112; loop splits and tiles of a small proc stay under 20.
DEFER_FROM_STATEMENTS = 32


def proc_statements(text: str) -> int:
    """Statements of a proc as ``codegen.proc_text`` prints it, one a line (loops and
    allocations included; the header, its decorator and the assertions left out)."""
    return sum(
        1 for line in text.splitlines() if line.strip() and not line.lstrip().startswith(("def ", "assert ", "@"))
    )


def in_part(rewrites: Sequence[Rewrite], part: ExpansionPart, large: bool) -> list[int]:
    """The positions of the rewrites an expansion of ``part`` tries. Only a ``large``
    parent is expanded in two parts: a small one's FIRST part has every rewrite."""
    if part is ExpansionPart.ALL or not large:
        return [] if part is ExpansionPart.DEFERRED else list(range(len(rewrites)))
    wanted = part is ExpansionPart.DEFERRED
    return [p for p, r in enumerate(rewrites) if rule_for(r.kind).deferred is wanted]


def root_candidate(workload: Workload) -> Candidate:
    """The unscheduled, size-bound proc as a Candidate (depth 0, no parent)."""
    proc = bound_proc_from_source(workload)
    c_source = kernel_c(proc)
    return Candidate(
        schedule=Schedule(),
        c_source=c_source,
        fingerprint=fingerprint(c_source),
        proc_text=proc_text(proc),
        features=feature_vector(c_source, Schedule(), workload, machine_caches()),
    )


class Expander:
    """Expands candidates of one workload, caching procs by schedule.

    Replaying a child's schedule reuses its parent's proc (or the longest cached prefix),
    so a search that expands what it just generated replays one step, not the whole trace.
    """

    def __init__(
        self, workload: Workload, options: ExpandOptions = ExpandOptions(), caches: CacheSizes | None = None
    ) -> None:
        exo_patches.install()  # this process expands: Exo's overheads go (``exo_patches``)
        self.workload = workload
        self.options = options
        # The caches of the node that expands: features compare working sets with them.
        self.caches = caches if caches is not None else machine_caches()
        self._cache: OrderedDict[tuple[Rewrite, ...], object] = OrderedDict()
        # A parent's proposal, its size class (``DEFER_FROM_STATEMENTS``) and the Exo calls
        # made on it so far, by its steps (``_proposal``).
        self._proposals: OrderedDict[tuple[Rewrite, ...], tuple[list[Rewrite], bool, CallMemo]] = OrderedDict()
        self._notes: Callable[[str, bool], str | None] | None = None
        self._notes_version = ""

    def use_notes(self, notes: Callable[[str, bool], str | None], version: str) -> None:
        """Read the compiler's notes on every candidate's C into its features: ``notes(c_source,
        openmp)`` builds the kernel (or finds its build) and returns them, None if it cannot;
        ``version`` names the compiler, flags and CPU they come from; expansions kept on
        disk are kept under it (``cache_version``)."""
        self._notes, self._notes_version = notes, version
        for derived in ("cache_version", "root_vector_work"):  # worked out without the notes
            self.__dict__.pop(derived, None)

    def _features(self, c_source: str, schedule: Schedule) -> FeatureVector:
        return self._features_of([(c_source, schedule)])[0]

    def _features_of(self, made: Sequence[tuple[str, Schedule]]) -> list[FeatureVector]:
        """The features of each (C, schedule). The compiler's notes on them are asked for
        in parallel, one compiler per core: each is a build, and an expansion's children
        are built one after another otherwise. Only compilers run beside this thread: Exo
        (z3) is not safe beside a second Python thread, and the root's notes are read first."""
        notes: list[str | None] = [None] * len(made)
        root_work, root_vector_work = self.root_work, self.root_vector_work
        if self._notes is not None and made:
            ask = self._notes
            with ThreadPoolExecutor(max_workers=min(len(made), os.cpu_count() or 1)) as pool:
                notes = list(pool.map(lambda c: ask(c, "#pragma omp" in c), [c for c, _ in made]))
        return [
            feature_vector(
                c, schedule, self.workload, self.caches, root_work, n, root_vector_work if n is not None else None
            )
            for (c, schedule), n in zip(made, notes, strict=True)
        ]

    @functools.cached_property
    def cache_version(self) -> str:
        """Names everything but the parent that decides this expander's expansions: the
        workload, the options, the caches its features compare with, Exo's version and
        schedsearch's own code. Two expanders with the same version expand a parent alike,
        so an expansion kept under it (``evaluate.expansions``) may stand in for a new one."""
        parts = [
            code_version(),
            self.workload.key,
            json.dumps(self.options.to_json(), sort_keys=True),
            repr(self.caches),
            self._notes_version,
        ]
        return sha256_text("\n".join(parts))

    @functools.cached_property
    def root_work(self) -> float:
        """The unscheduled proc's log2 dynamic statement count: children's features give
        their work relative to it (``features.work_estimate``)."""
        c_source = kernel_c(self.proc_for(Schedule()))
        return candidate_features(c_source, Schedule(), self.workload, self.caches).log2_dynamic_statements

    @functools.cached_property
    def root_vector_work(self) -> float | None:
        """The unscheduled proc's ``log2_vector_work`` from the compiler's notes on it (None
        without notes): children's features give their vectorized work relative to it."""
        if self._notes is None:
            return None
        c_source = kernel_c(self.proc_for(Schedule()))
        notes = self._notes(c_source, "#pragma omp" in c_source)
        if notes is None:
            return None
        return candidate_features(c_source, Schedule(), self.workload, self.caches, notes=notes).log2_vector_work

    def _remember(self, steps: tuple[Rewrite, ...], proc) -> None:
        self._cache[steps] = proc
        self._cache.move_to_end(steps)
        while len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)

    def _proposal(self, parent: Candidate, proc) -> tuple[list[Rewrite], bool, CallMemo]:
        """The rewrites proposed at ``parent`` (its proc: ``proc``), whether it is large
        (``DEFER_FROM_STATEMENTS``) and the memo of Exo calls made on it, worked out once
        per parent: every shard of its expansion a worker is dealt asks again. Why: proposing
        is cheap next to a parent's rewrites (0.05-0.13 s on SGEMM 256's nodes, Zen 4), but
        a leading model's expansion of one parent is cut into 20 shards, and the proposals
        took 8.1 s of an expander's 21.4 s; rewrites dealt to different shards begin with
        the same calls as often as those of one shard (``call_memo``)."""
        steps = parent.schedule.steps
        kept = self._proposals.get(steps)
        if kept is None:
            large = proc_statements(parent.proc_text or proc_text(proc)) >= DEFER_FROM_STATEMENTS
            kept = (propose(proc, self.options), large, CallMemo())
            self._proposals[steps] = kept
            while len(self._proposals) > PROPOSALS_KEPT:
                self._proposals.popitem(last=False)
        self._proposals.move_to_end(steps)
        return kept

    def proc_for(self, schedule: Schedule):
        """The proc of ``schedule``, replayed from the longest cached prefix."""
        return self._rebuild(schedule)[0]

    def _rebuild(self, schedule: Schedule) -> tuple[object, int]:
        """The proc of ``schedule`` and how many of its steps had to be re-applied."""
        steps = schedule.steps
        for cut in range(len(steps), -1, -1):
            cached = self._cache.get(steps[:cut])
            if cached is not None:
                self._cache.move_to_end(steps[:cut])
                break
        else:
            cut, cached = 0, bound_proc_from_source(self.workload)
            self._remember((), cached)
        proc = cached
        for index in range(cut, len(steps)):
            proc = replay(proc, steps[index : index + 1], first_index=index)
            self._remember(steps[: index + 1], proc)
        return proc, len(steps) - cut

    def candidate(self, schedule: Schedule, parent: Candidate | None = None) -> Candidate:
        """``schedule`` replayed on this workload as a candidate (depth: its length), a child
        of ``parent`` when given: how a schedule recorded for other sizes (a warm start)
        becomes one of this search's candidates.

        Raises ReplayError when a step does not apply, or when the scheduled proc's C
        cannot be generated.
        """
        proc = self.proc_for(schedule)
        try:
            c_source = kernel_c(proc)
        except EXO_CATCH as exc:
            if not rejected_by_exo(exc):
                raise
            reason = " ".join(str(exc).split()) or type(exc).__name__
            raise ReplayError(
                f"the scheduled proc's C cannot be generated: {reason}", step=len(schedule) - 1, reason=reason
            ) from None
        return Candidate(
            schedule=schedule,
            c_source=c_source,
            fingerprint=fingerprint(c_source),
            proc_text=proc_text(proc),
            parent=parent.fingerprint if parent is not None else None,
            depth=len(schedule),
            features=self._features(c_source, schedule),
        )

    def adapt(self, schedule: Schedule) -> Candidate:
        """``schedule``, recorded at other sizes, as a candidate of this workload: each step
        replayed as recorded when it applies, else replaced by the first rewrite proposed
        at that point that differs from it only in arguments that follow from the sizes (a
        register tile's trip count, a split's tail) or name new loops. A warm start's seeds
        are made so. Raises ReplayError naming the first step with no such counterpart."""
        proc = self.proc_for(Schedule())
        steps: list[Rewrite] = []
        for index, step in enumerate(schedule.steps):
            child = try_apply(proc, step)
            if child is None:
                rule = rule_for(step.kind)
                free = rule.sized_args() | rule.naming_args()
                fixed = {k: v for k, v in step.args if k not in free}
                for other in propose(proc, self.options):
                    if (
                        other.kind is step.kind
                        and other.target == step.target
                        and {k: v for k, v in other.args if k not in free} == fixed
                    ):
                        child = try_apply(proc, other)
                        if child is not None:
                            step = other
                            break
            if child is None:
                raise ReplayError(
                    f"step {index} ({describe(step)}) does not apply at these sizes, nor does any variant of it",
                    step=index,
                )
            steps.append(step)
            proc = child
        return self.candidate(Schedule(tuple(steps)))

    def expand(
        self, parent: Candidate, shard: int = 0, shards: int = 1, lead: int = 0, part: ExpansionPart = ExpansionPart.ALL
    ) -> Expansion:
        """Children of ``parent`` whose C differs from the parent's and each other's.

        Only the rewrites of ``part`` are tried (``in_part``); a FIRST expansion says how
        many it left for the DEFERRED one (``Expansion.deferred``). With ``shards`` > 1 only
        the rewrites ``dealt`` gives ``shard`` (with ``lead`` leading shards) are tried, so
        several workers can share one parent; ``Expansion.merge`` puts the shards together.
        Each shard says how many shards lead with a heavy rewrite alone and whether it is one
        (``Expansion.leads``, ``Expansion.leading``).
        Never raises for a bad parent: the Expansion then carries ``error``.
        """
        started = time.perf_counter()
        try:
            proc, replayed = self._rebuild(parent.schedule)
            rewrites, large, memo = self._proposal(parent, proc)
            pool = in_part(rewrites, part, large)
        except Exception as exc:  # noqa: BLE001 - a bad parent is data, not a crash
            return Expansion(
                parent=parent.fingerprint,
                children=(),
                error=f"{type(exc).__name__}: {exc}",
                seconds=time.perf_counter() - started,
            )
        left = len(in_part(rewrites, ExpansionPart.DEFERRED, large)) if part is ExpansionPart.FIRST else 0
        seen = {parent.fingerprint}
        made: list[tuple[Schedule, str, str, str]] = []  # schedule, C, fingerprint, proc text
        order: list[int] = []
        illegal = duplicates = 0
        leads = len(_leading(rewrites, shards, lead, pool))
        for position in dealt(rewrites, shard, shards, lead, pool):
            rewrite = rewrites[position]
            child = try_apply(proc, rewrite, memo)
            c_source = None
            if child is not None:
                try:
                    c_source = kernel_c(child)
                except EXO_CATCH as exc:
                    if not rejected_by_exo(exc):
                        raise
                    c_source = None
            if c_source is None:
                illegal += 1
                continue
            fp = fingerprint(c_source)
            if fp in seen:
                duplicates += 1
                continue
            seen.add(fp)
            schedule = parent.schedule.then(rewrite)
            self._remember(schedule.steps, child)
            order.append(position)
            made.append((schedule, c_source, fp, proc_text(child)))
        features = self._features_of([(c_source, schedule) for schedule, c_source, _, _ in made])
        children = [
            Candidate(
                schedule=schedule,
                c_source=c_source,
                fingerprint=fp,
                proc_text=text,
                parent=parent.fingerprint,
                depth=parent.depth + 1,
                features=vector,
                built=noted(vector),
            )
            for (schedule, c_source, fp, text), vector in zip(made, features, strict=True)
        ]
        return Expansion(
            parent=parent.fingerprint,
            children=tuple(children),
            attempted=len(order) + illegal + duplicates,
            illegal=illegal,
            duplicates=duplicates,
            seconds=time.perf_counter() - started,
            replayed=replayed,
            order=tuple(order),
            deferred=left,
            leads=leads,
            leading=shard < leads,
            shards=shards,
        )
