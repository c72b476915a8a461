"""The units of work an executor is handed (``Job``) and what each gives back (``JobResult``).
Standard library only."""

from __future__ import annotations

from dataclasses import dataclass

# Imported at run time, not under TYPE_CHECKING: the codec resolves the records'
# annotations by name in this module (``codec.decode``).
from schedsearch.core.enums import ExpansionPart, JobKind
from schedsearch.core.measurements import Measurement
from schedsearch.core.records import Candidate, Expansion


@dataclass(frozen=True, slots=True)
class Job:
    """One unit of work handed to an ``Executor``. ``id`` is the submitter's, unique among
    its jobs in flight; ``candidates`` holds the parent (expand), the candidate (evaluate)
    or the finalists (remeasure). An evaluated candidate whose verification call takes
    longer than ``cutoff`` seconds is timed by that call alone. An expansion with ``stream``
    is wanted piece by piece: nothing else is left to measure, so the executor may share it
    out in small shards and return each as it finishes; with ``all_heavy_first`` every heavy
    rewrite (a register tile) is made alone before the rest (else only the first per
    worker). An expansion tries the ``part`` of the parent's rewrites it names
    (``ExpansionPart``). An executor that must hold expansions back starts those of lower
    ``priority`` first."""

    id: int
    kind: JobKind
    candidates: tuple[Candidate, ...]
    cutoff: float | None = None
    stream: bool = False
    all_heavy_first: bool = False
    part: ExpansionPart = ExpansionPart.ALL
    priority: float = 0.0


@dataclass(frozen=True, slots=True)
class JobResult:
    """What a finished ``Job`` gave: an expansion, or measurements in the job's order.

    A failure of the candidate is a measurement with its status; a worker that died is an
    expansion with ``error`` or a ``run_error`` measurement, never an exception.

    An expansion may come in several results, one per shard, each with the children of its
    share of the parent's rewrites; ``final`` marks the last. Children of different shards
    may share their C: the receiver deduplicates."""

    job: Job
    expansion: Expansion | None = None
    measurements: tuple[Measurement, ...] = ()
    final: bool = True
