"""pandas tables of searches and candidates."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from typing import TYPE_CHECKING

from schedsearch.core import CandidateRecord, Rewrite, SearchRecord, Store
from schedsearch.explore._optional import require
from schedsearch.explore.kinds import KindStats
from schedsearch.explore.summary import format_seconds, format_spread
from schedsearch.numbers import DeclaredBest, load_declared_best

if TYPE_CHECKING:
    import pandas

    from schedsearch.explore.tree import TreeNode

NODE_COLUMNS = (
    "id",
    "parent_id",
    "depth",
    "step",
    "status",
    "seconds",
    "spread",
    "gflops",
    "speedup",
    "gain",
    "within_noise",
    "time",
    "fingerprint",
    "expanded",
    "error",
    "measured_at",
    "build_seconds",
    "run_seconds",
)

#: ``time`` is the median in a readable unit and ``spread`` half its interquartile range
#: relative to it (``±1.5%``, as the CLI shows it); ``seconds`` keeps the number for computing
#: with. In the nodes table, ``gain`` is the parent's time over the node's and ``within_noise``
#: says the two times' spreads overlap.
TOP_COLUMNS = ("rank", "id", "depth", "time", "spread", "gflops", "speedup", "seconds", "schedule")

KIND_COLUMNS = ("kind", "tried", "legal", "ok", "faster", "on_best_path", "best_gain")

SEARCH_COLUMNS = (
    "id",
    "workload",
    "status",
    "strategy",
    "started",
    "elapsed_seconds",
    "evaluated",
    "ok",
    "failed",
    "baseline_seconds",
    "best_candidate_id",
    "best_seconds",
    "best_speedup",
    "best_numbers",
)


def nodes_frame(nodes: Sequence[TreeNode]) -> pandas.DataFrame:
    """One row per TreeNode; statuses as plain strings, missing numbers as NaN."""
    pd = require("pandas")
    rows = []
    for node in nodes:
        row = {f.name: getattr(node, f.name) for f in fields(node)}
        row["status"] = node.status.value
        row["time"] = format_seconds(node.seconds)
        row["spread"] = format_spread(node.spread) or "—"
        rows.append(row)
    frame = pd.DataFrame(rows, columns=list(NODE_COLUMNS))
    # Nullable ints keep the root's missing parent as <NA> instead of turning ids into floats.
    frame["parent_id"] = frame["parent_id"].astype("Int64")
    for column in ("seconds", "gflops", "speedup", "gain", "measured_at", "build_seconds", "run_seconds"):
        frame[column] = frame[column].astype("float64")
    frame["within_noise"] = frame["within_noise"].astype("boolean")
    return frame


def top_frame(
    records: Sequence[CandidateRecord],
    describe: Callable[[Rewrite], str] = Rewrite.describe,
) -> pandas.DataFrame:
    """Ranked table of candidates (already sorted fastest first) with their full schedules."""
    pd = require("pandas")
    rows = [
        {
            "rank": rank,
            "id": r.id,
            "depth": r.depth,
            "time": format_seconds(r.seconds),
            "spread": format_spread(r.timing.spread if r.timing is not None else None) or "—",
            "seconds": r.seconds,
            "gflops": r.gflops,
            "speedup": r.speedup,
            "schedule": " ; ".join(describe(s) for s in r.schedule.steps) or "(unscheduled)",
        }
        for rank, r in enumerate(records, 1)
    ]
    frame = pd.DataFrame(rows, columns=list(TOP_COLUMNS))
    for column in ("seconds", "gflops", "speedup"):
        frame[column] = frame[column].astype("float64")
    return frame


def kinds_frame(stats: Sequence[KindStats]) -> pandas.DataFrame:
    """One row per rewrite kind: tried, legal, ok, faster than the parent, on the best path."""
    pd = require("pandas")
    rows = [{f.name: getattr(k, f.name) for f in fields(k)} for k in stats]
    frame = pd.DataFrame(rows, columns=list(KIND_COLUMNS))
    frame["best_gain"] = frame["best_gain"].astype("float64")
    return frame


def searches_frame(searches: Sequence[SearchRecord], bests: Mapping[int, DeclaredBest | None]) -> pandas.DataFrame:
    """One row per search: workload label, status, counters, baseline and best. ``bests``
    (by search id, from ``numbers.load_declared_best``) gives each search's best with the
    numbers the CLI shows and their kind (``best_numbers``: ``remeasured`` side by side or
    ``search_time``)."""
    pd = require("pandas")
    rows = [
        {
            "id": s.id,
            "workload": s.workload.label,
            "status": s.status.value,
            "strategy": s.config.strategy.value,
            "started": pd.Timestamp(s.started_at, unit="s", tz="UTC").floor("s"),
            "elapsed_seconds": s.elapsed_seconds,
            "evaluated": s.counters.evaluated,
            "ok": s.counters.ok,
            "failed": s.counters.failed,
            "baseline_seconds": s.baseline_seconds,
            "best_candidate_id": best.record.id if best is not None else None,
            "best_seconds": best.seconds if best is not None else None,
            "best_speedup": best.speedup if best is not None else None,
            "best_numbers": best.kind.value if best is not None else None,
        }
        for s in searches
        for best in [bests.get(s.id)]
    ]
    frame = pd.DataFrame(rows, columns=list(SEARCH_COLUMNS))
    frame["best_candidate_id"] = frame["best_candidate_id"].astype("Int64")
    for column in ("baseline_seconds", "best_seconds", "best_speedup"):
        frame[column] = frame[column].astype("float64")
    return frame


def list_searches(store: Store, workload_key: str | None = None) -> pandas.DataFrame:
    """Every search in ``store`` (optionally of one workload) as a table, each with the best
    every schedsearch command names for it."""
    searches = store.list_searches(workload_key)
    return searches_frame(searches, {s.id: load_declared_best(store, s) for s in searches})
