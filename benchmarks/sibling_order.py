"""How well the cost model orders a parent's children: the choice a search makes with it
(a measurement, not a test).

A search with ``rank`` measures an expanded node's children in predicted order, and the
first ones decide where it goes next. So for every parent with at least ``--least`` ``ok``
children in the given databases (``search_efficiency.py --keep DIR`` leaves one per run):
the model is fitted exactly as a search fits it (``LearnedCostModel``, the work estimate
under its trees) on that search's measurements made before the children were made, and
asked to order them. A child's true time is its C's pooled time: the median of every
measurement of that C in all the databases given of the workload, so one lucky run does not
decide it. Features are computed again from each candidate's stored C with the code in use,
so databases made before a change of the features still serve.

Reported per workload, over the parents: how much slower than the fastest child is the
model's first pick (top-1 regret, mean), the best of its first three (top-3), a uniformly
random pick (its expectation), and the rank correlation among siblings (median). A perfect
model has no regret; one that reads nothing has the random pick's. With ``--cold`` every
parent is ordered by the analytic estimate alone: the model before it has learned anything,
as in a search's first round without history.

``--history DB ...`` trains the model on every measurement of those databases too, as a
store of earlier searches of other workloads or sizes on this machine does; with ``--cold``
on those alone. ``--first-round`` scores the root's children only: a search's first round.

``--kind-prior W`` adds a rewrite-level prior learned from the search itself: each child's
score is its prediction plus ``W`` times the mean log gain (child over parent time) of its
last rewrite's kind over the search's measurements made before the children were, shrunk
towards none by ``KIND_SHRINK`` pseudo-observations. A large ``W`` orders the siblings by
kind first and by the model within a kind.

    .venv/bin/python benchmarks/sibling_order.py DB [DB ...] [--least 6] [--cold] [--kind-prior W]
        [--notes CACHE_DIR] [--history DB ...] [--first-round]

It fits one small model per parent: a minute for a benchmark's 18 databases.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from schedsearch.core import BenchConfig, CandidateRecord, Schedule, Status, TrainingSample
from schedsearch.evaluate.build import kernel_notes
from schedsearch.model import LearnedCostModel
from schedsearch.search.ranking import spearman
from schedsearch.store import open_store
from schedsearch.transforms import Expander
from schedsearch.model.features import candidate_features, feature_vector, work_estimate


@dataclass
class Scores:
    """One workload's parents."""

    top1: list[float]
    top3: list[float]
    random: list[float]
    rho: list[float]


#: Pseudo-observations of no gain each rewrite kind's prior starts from (``--kind-prior``).
KIND_SHRINK = 2.0


def kind_prior(before: Sequence[CandidateRecord], by_id: dict[int, CandidateRecord]) -> dict[str, float]:
    """Rewrite kind -> the mean log time ratio of a child over its measured parent, over
    ``before`` (children of the root left out: their parent is the unscheduled proc, whose
    rewrites are of another order), shrunk by ``KIND_SHRINK`` pseudo-observations of 0."""
    gains: dict[str, list[float]] = {}
    for r in before:
        parent = by_id.get(r.parent_id) if r.parent_id is not None else None
        if parent is None or parent.depth == 0 or not r.schedule.steps or parent.timing is None:
            continue
        gains.setdefault(r.schedule.steps[-1].kind.value, []).append(math.log(r.timing.median / parent.timing.median))
    return {kind: sum(g) / (len(g) + KIND_SHRINK) for kind, g in gains.items()}


def _measured(records: Sequence[CandidateRecord]) -> list[CandidateRecord]:
    return [r for r in records if r.status is Status.OK and r.timing is not None and r.reused_search_id is None]


def pooled(dbs: Sequence[Path]) -> dict[tuple[str, str], float]:
    """(workload key, fingerprint) -> median of every measurement of that C."""
    times: dict[tuple[str, str], list[float]] = {}
    for db in dbs:
        store = open_store(str(db), create=False, read_only=True)
        try:
            for search in store.list_searches():
                for r in _measured(store.candidates(search.id)):
                    times.setdefault((search.workload.key, r.fingerprint), []).append(r.timing.median)
        finally:
            store.close()
    return {key: statistics.median(ts) for key, ts in times.items()}


def _notes_reader(notes_cache: Path | None):
    config = BenchConfig()

    def notes_of(c_source: str) -> str | None:
        return kernel_notes(c_source, config, notes_cache) if notes_cache is not None else None
    return notes_of


def _rows(store, search, notes_of) -> tuple[CandidateRecord | None, list]:
    """The search's root and, for every other measured candidate, (record, features, log
    of its time over the root's)."""
    workload = search.workload
    expander = Expander(workload)
    root = next((r for r in store.candidates(search.id) if r.depth == 0), None)
    if root is None or root.timing is None:
        return None, []
    root_notes = notes_of(root.c_source)
    root_vector_work = None if root_notes is None else candidate_features(
        root.c_source, Schedule(), workload, expander.caches, notes=root_notes).log2_vector_work
    rows = []
    for r in _measured(store.candidates(search.id)):
        if r.depth == 0:
            continue
        vector = feature_vector(r.c_source, r.schedule, workload, expander.caches, expander.root_work,
                                notes_of(r.c_source), root_vector_work)
        rows.append((r, vector, math.log(r.timing.median / root.timing.median)))
    return root, rows


def history(dbs: Sequence[Path], notes_cache: Path | None = None) -> list[TrainingSample]:
    """Every measurement of the searches in ``dbs`` as training samples: the history a
    store of earlier searches (other workloads, other sizes) gives a new search's model."""
    notes_of = _notes_reader(notes_cache)
    samples = []
    for db in dbs:
        store = open_store(str(db), create=False, read_only=True)
        try:
            for search in store.list_searches():
                samples += [TrainingSample(v, y) for _, v, y in _rows(store, search, notes_of)[1]]
        finally:
            store.close()
    return samples


def score(db: Path, truth: dict[tuple[str, str], float], least: int, out: dict[str, Scores],
          cold: bool = False, prior_weight: float = 0.0, notes_cache: Path | None = None,
          earlier: Sequence[TrainingSample] = (), first_round: bool = False) -> None:
    """Add the parents of every search in ``db`` to ``out`` (by workload label); with
    ``cold``, ordered by the analytic estimate alone (nothing learned); with
    ``prior_weight``, by the prediction plus that weight times the kind prior (``kind_prior``);
    with ``notes_cache``, the features read gcc's notes on each kernel, built (with this
    machine's compiler and default flags) into that cache folder; ``earlier`` samples
    (``history``) are trained on too; with ``first_round`` only the root's children are
    scored."""
    notes_of = _notes_reader(notes_cache)
    store = open_store(str(db), create=False, read_only=True)
    try:
        for search in store.list_searches():
            workload = search.workload
            root, rows = _rows(store, search, notes_of)
            if root is None:
                continue
            by_id = {r.id: r for r, _, _ in rows} | {root.id: root}
            label = f"{workload.proc}[{','.join(f'{k}={v}' for k, v in workload.sizes)}]"
            scores = out.setdefault(label, Scores([], [], [], []))
            by_parent: dict[int, list] = {}
            for row in rows:
                if (workload.key, row[0].fingerprint) in truth and row[0].parent_id is not None \
                        and (not first_round or row[0].parent_id == root.id):
                    by_parent.setdefault(row[0].parent_id, []).append(row)
            for kids in by_parent.values():
                if len(kids) < least:
                    continue
                made = min(k[0].created_at for k in kids)
                before = [r for r, _, _ in rows if r.measured_unix is not None and r.measured_unix < made]
                train = list(earlier) + ([] if cold else [TrainingSample(v, y) for r, v, y in rows
                                                          if r.measured_unix is not None and r.measured_unix < made])
                model = LearnedCostModel(train, background=False, estimate=work_estimate)
                predicted = model.predict([v for _, v, _ in kids])
                if len(predicted) != len(kids):
                    continue
                if prior_weight:
                    prior = kind_prior(before, by_id)
                    predicted = [p + prior_weight * prior.get(r.schedule.steps[-1].kind.value, 0.0)
                                 for p, (r, _, _) in zip(predicted, kids, strict=True)]
                true = [math.log(truth[(workload.key, r.fingerprint)]) for r, _, _ in kids]
                best = min(true)
                # Ties keep fingerprint order, never the stored order (a ranked search
                # stored its children in its own model's order).
                order = sorted(range(len(kids)), key=lambda i: (predicted[i], kids[i][0].fingerprint))
                scores.top1.append(true[order[0]] - best)
                scores.top3.append(min(true[i] for i in order[:3]) - best)
                scores.random.append(statistics.mean(t - best for t in true))
                rho = spearman(predicted, true)
                if rho is not None:
                    scores.rho.append(rho)
    finally:
        store.close()


def _share(log_ratios: list[float]) -> str:
    """A mean log time ratio as a share slower (the geometric mean of the ratios)."""
    return f"{math.exp(statistics.mean(log_ratios)) - 1:6.1%}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dbs", nargs="+", type=Path)
    p.add_argument("--least", type=int, default=6, help="children a parent needs to be scored [6]")
    p.add_argument("--cold", action="store_true",
                   help="order by the analytic estimate alone, as a first round without history does")
    p.add_argument("--kind-prior", type=float, default=0.0, metavar="W",
                   help="add W times each child's rewrite kind's mean gain in the search so far [0: none]")
    p.add_argument("--notes", type=Path, metavar="CACHE_DIR",
                   help="features with gcc's notes on each kernel, built into this cache folder")
    p.add_argument("--history", type=Path, nargs="+", default=[], metavar="DB",
                   help="also train on every measurement of these databases (other workloads or sizes)")
    p.add_argument("--first-round", action="store_true", help="score the root's children only")
    args = p.parse_args(argv)
    missing = [str(db) for db in [*args.dbs, *args.history] if not db.is_file()]
    if missing:
        print(f"sibling_order: no such database: {', '.join(missing)}", file=sys.stderr)
        return 2
    truth = pooled(args.dbs)
    earlier = history(args.history, args.notes)
    out: dict[str, Scores] = {}
    for db in args.dbs:
        score(db, truth, args.least, out, args.cold, args.kind_prior, args.notes, earlier, args.first_round)
    for label, s in out.items():
        if not s.top1:
            continue
        print(f"{label}: {len(s.top1)} parents; the model's first pick is slower than the fastest child by "
              f"{_share(s.top1)} (mean), the best of its first three by {_share(s.top3)}, a random pick by "
              f"{_share(s.random)}; rank correlation among siblings {statistics.median(s.rho):.2f} "
              f"(median)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
