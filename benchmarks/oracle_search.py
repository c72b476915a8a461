"""One search whose cost model is an oracle: what a perfect model would do (a measurement
instrument for ``search_efficiency.py --oracle``, not a tool for tuning).

The oracle answers for every C that earlier databases measured with that C's pooled time
(the median of every measurement of it, over the root's pooled time: the log time ratio a
model predicts), and for any other C with the learned model's prediction, as ``rank`` would.
It is a ``core.CandidateCostModel``: it reads each candidate's fingerprint, which no
feature vector holds. Everything else is ``schedsearch run`` unchanged: the same search,
pipeline, executor and store.

    .venv/bin/python benchmarks/oracle_search.py --from DB [DB ...] WORKLOAD.py [--proc P]
        [--size N=512,...] --db OUT.db [--budget 180] [--seed 0] [--workers 2] [--timing quiet]

Prints ``{"search_id": N}``; ``schedsearch show N --db OUT.db --json`` says the rest.
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

from schedsearch.core import Candidate, CostModel, FeatureVector, TrainingSample


def pooled_log_ratios(dbs: Sequence[Path]) -> dict[str, float]:
    """Fingerprint -> log(pooled time / pooled root time) over every ``ok`` measurement in
    ``dbs`` (databases of searches of one workload)."""
    times: dict[str, list[float]] = {}
    roots: set[str] = set()
    for db in dbs:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
            rows = con.execute("select fingerprint, time_median, depth from candidates "
                               "where status = 'ok' and time_median is not null").fetchall()
        for fingerprint, seconds, depth in rows:
            times.setdefault(fingerprint, []).append(seconds)
            if depth == 0:
                roots.add(fingerprint)
    if len(roots) != 1:
        raise SystemExit(f"oracle_search: the databases hold {len(roots)} unscheduled procs; give one workload's")
    pooled = {fp: statistics.median(ts) for fp, ts in times.items()}
    root = pooled[roots.pop()]
    return {fp: math.log(seconds / root) for fp, seconds in pooled.items()}


class OracleModel:
    """``core.CandidateCostModel``: known C from ``table``, the rest from ``fallback``."""

    def __init__(self, table: dict[str, float], fallback: CostModel | None) -> None:
        self.table, self.fallback = table, fallback
        self.asked = self.known = 0

    def predict_candidates(self, candidates: Sequence[Candidate]) -> list[float]:
        guesses = self.predict([c.features for c in candidates if c.features is not None])
        if len(guesses) != len(candidates):
            guesses = [0.0] * len(candidates)
        self.asked += len(candidates)
        self.known += sum(c.fingerprint in self.table for c in candidates)
        return [self.table.get(c.fingerprint, g) for c, g in zip(candidates, guesses, strict=True)]

    def predict(self, features: Sequence[FeatureVector]) -> list[float]:
        return self.fallback.predict(features) if self.fallback is not None else []

    def observe(self, samples: Sequence[TrainingSample]) -> None:
        if self.fallback is not None:
            self.fallback.observe(samples)

    def trained_on(self) -> int:
        return self.fallback.trained_on() if self.fallback is not None else 0

    def close(self) -> None:
        if self.fallback is not None:
            self.fallback.close()


def main(argv: list[str] | None = None) -> int:
    from schedsearch.app.compose import make_cost_model, make_executor
    from schedsearch.app.searching import SearchRunner, WorkloadFile, start_search
    from schedsearch.app.settings import SearchSettings
    from schedsearch.cli.wiring import parse_sizes

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("workload")
    p.add_argument("--from", dest="dbs", nargs="+", type=Path, required=True)
    p.add_argument("--proc")
    p.add_argument("--size", action="append", default=[])
    p.add_argument("--db", required=True)
    p.add_argument("--budget", type=float, default=180.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--timing", default="quiet")
    args = p.parse_args(argv)
    table = pooled_log_ratios(args.dbs)
    settings = SearchSettings(budget=args.budget, workers=args.workers, seed=args.seed, timing=args.timing,
                              cost_model="rank", warm_start=False, compiler_notes=False)
    with start_search(WorkloadFile.of(args.workload, args.proc, parse_sizes(args.size)), settings,
                      db=args.db) as session:
        config = session.config
        executor = make_executor(config.workers, None, config.bench, config.expand)
        model = OracleModel(table, make_cost_model(config, session.store, executor))
        with SearchRunner(session, executor, model) as runner:
            run = runner.run()
    print(json.dumps({"search_id": run.search.id, "oracle_known": model.known, "oracle_asked": model.asked}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
