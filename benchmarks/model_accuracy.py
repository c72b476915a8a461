"""How well the cost model ranks what it has not seen, after N measurements of a workload
(a measurement, not a test).

For each search in the given SQLite databases (``search_efficiency.py --keep DIR`` leaves
one per run): its ``ok`` measurements in the order they were made; the model is fitted
exactly as a search fits it (``schedsearch.model.LearnedCostModel``) on the first ``--after``
of them, plus, with ``--history``, every measurement of the *other* searches in the same
database made before this one started (what ``rank-warm`` had), and asked for the rest.
``--no-estimate`` fits the trees alone, without the analytic work estimate they start from.
Reported per search: Spearman's rank correlation of predicted against measured time over
the held-out rest, over the held-out candidates faster than the median one (the near-ties
the search actually has to separate), how many of the held-out fastest 10 the model put in
its own top 10, and how far apart the held-out times are (90th over 10th percentile: near
1, only measurement noise separates them).

Two references for those numbers, also per search:

- ``recorded``: the rank correlation of the predictions the search itself made for the
  held-out candidates (``candidates.predicted``, made before each was measured, by the model
  it had then) - what ``show`` reported as the correlation after ``SETTLED_AFTER``.
- ``repeat``: how well the held-out measurements would rank a second measurement of the same
  kernels, from their own spread (``ranking.repeatability``, what a search records as
  ``settled_repeat``). No model can rank the held-out times better than they rank
  themselves; this bound is optimistic, since a host that drifts between two measurements
  moves them further apart than the samples of one do.

``--others`` fits on every measurement of the same workload in the *other* databases given
too (the same kernel searched again on this machine, as a store that kept them all holds):
with thousands of samples of the workload, what is left of the error is not for want of data.

    .venv/bin/python benchmarks/model_accuracy.py DB [DB ...] [--after 200] [--history] [--others]

It fits one small model per search: seconds, not minutes.
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import sys
from dataclasses import dataclass
from pathlib import Path

from schedsearch.core import FeatureVector, Timing, TrainingSample
from schedsearch.model import LearnedCostModel
from schedsearch.model.features import work_estimate
from schedsearch.search.ranking import repeatability, spearman

TOP = 10


def searches(db: Path) -> list[tuple[int, str, float]]:
    """(id, workload label, started_at) of every search with a baseline, oldest first."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        rows = con.execute(
            "select s.id, w.proc, w.sizes, s.started_at from searches s join workloads w on w.id = s.workload_id "
            "where s.baseline_seconds is not null order by s.started_at").fetchall()
    return [(int(i), f"{proc}[{','.join(f'{k}={v}' for k, v in json.loads(sizes or '[]'))}]", float(t))
            for i, proc, sizes, t in rows]


@dataclass(frozen=True)
class Measured:
    """One ``ok`` measurement of a search, as the model learns it and as the search saw it."""

    sample: TrainingSample
    predicted: float | None  # the search's own prediction, made before it was measured
    timing: Timing


def measured(db: Path, search_id: int) -> list[Measured]:
    """The search's ok measurements with features, in the order they were made."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        base = con.execute("select baseline_seconds from searches where id = ?", (search_id,)).fetchone()[0]
        rows = con.execute(
            "select features, time_median, predicted, time_q1, time_q3, time_min from candidates where search_id = ? "
            "and status = 'ok' and time_median is not null and features is not null and reused_search_id is null "
            "order by measured_at", (search_id,)).fetchall()
    out = []
    for features, seconds, predicted, q1, q3, fastest in rows:
        f = json.loads(features)
        timing = Timing(median=seconds, min=fastest or seconds, q1=q1 or seconds, q3=q3 or seconds)
        out.append(Measured(TrainingSample(FeatureVector(f["version"], tuple(f["values"])), math.log(seconds / base)),
                            predicted, timing))
    return out


def samples(db: Path, search_id: int) -> list[TrainingSample]:
    """The search's ok measurements with features, in the order they were made."""
    return [m.sample for m in measured(db, search_id)]


def recorded(rest: list[Measured]) -> float | None:
    """Rank correlation of the search's own predictions for ``rest`` with their times."""
    pairs = [(m.predicted, m.sample.log_ratio) for m in rest if m.predicted is not None]
    return spearman([p for p, _ in pairs], [t for _, t in pairs]) if pairs else None


def _shown(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def held_out(train: list[TrainingSample], rest: list[TrainingSample], estimate: bool = True) -> dict:
    """Rank correlations and top-10 overlap of a model fitted on ``train`` over ``rest``."""
    model = LearnedCostModel(train, background=False, estimate=work_estimate if estimate else None)
    predicted = model.predict([s.features for s in rest])
    if len(predicted) != len(rest):
        return {"held_out": len(rest), "spearman": None, "spearman_faster_half": None, f"top{TOP}_overlap": None,
                "p90_over_p10": None}
    measured = [s.log_ratio for s in rest]
    median = sorted(measured)[len(measured) // 2]
    fast = [i for i, m in enumerate(measured) if m <= median]
    best = set(sorted(range(len(rest)), key=lambda i: measured[i])[:TOP])
    ordered = sorted(measured)
    picked = set(sorted(range(len(rest)), key=lambda i: predicted[i])[:TOP])
    return {
        "held_out": len(rest),
        "spearman": spearman(predicted, measured),
        "spearman_faster_half": spearman([predicted[i] for i in fast], [measured[i] for i in fast]),
        f"top{TOP}_overlap": len(best & picked),
        # how far apart the held-out times are: near 1, only noise separates them
        "p90_over_p10": math.exp(ordered[len(ordered) * 9 // 10] - ordered[len(ordered) // 10]),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dbs", nargs="+", type=Path)
    p.add_argument("--after", type=int, default=200, help="measurements the model is fitted on [200]")
    p.add_argument("--history", action="store_true", help="also fit on the database's earlier searches")
    p.add_argument("--others", action="store_true",
                   help="also fit on the same workload's measurements in the other databases given")
    p.add_argument("--no-estimate", action="store_true", help="fit the trees without the work estimate")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    missing = [str(db) for db in args.dbs if not db.is_file()]
    if missing:
        print(f"model_accuracy: no such database: {', '.join(missing)}", file=sys.stderr)
        return 2
    known = {db: searches(db) for db in args.dbs}
    results = []
    for db in args.dbs:
        for search_id, label, started in known[db]:
            mine = measured(db, search_id)
            if len(mine) < args.after + TOP:
                continue  # too few measurements to hold any out
            history = [s for other, _, t in known[db] if args.history and other != search_id and t < started
                       for s in samples(db, other)]
            others = [s for elsewhere in args.dbs if args.others and elsewhere != db
                      for other, name, _ in known[elsewhere] if name == label for s in samples(elsewhere, other)]
            train = history + others + [m.sample for m in mine[: args.after]]
            rest = mine[args.after:]
            row = {"db": db.name, "search": search_id, "workload": label, "history": len(train) - args.after,
                   **held_out(train, [m.sample for m in rest], estimate=not args.no_estimate),
                   "recorded": recorded(rest), "repeat": repeatability([m.timing for m in rest])}
            results.append(row)
            if not args.json:
                print(f"{db.name} #{search_id} {label}: fitted on {args.after} (+{row['history']} more), "
                      f"{row['held_out']} held out: rank correlation {_shown(row['spearman'])} "
                      f"(faster half {_shown(row['spearman_faster_half'])}; the search's own predictions "
                      f"{_shown(row['recorded'])}; the times' own repeatability {_shown(row['repeat'])}), "
                      f"top {TOP} overlap {row[f'top{TOP}_overlap']}; their times span "
                      f"{row['p90_over_p10'] or 0:.2f}x (90th / 10th percentile)")
    if args.json:
        print(json.dumps(results, indent=2))
    elif not results:
        print(f"no search with more than {args.after + TOP} ok measurements")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
