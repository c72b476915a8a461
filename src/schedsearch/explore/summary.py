"""A compact HTML summary of a search, shown when a SearchTree is a cell's last value."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from schedsearch.explore.tree import SearchTree

TOP_ROWS = 5


def format_seconds(seconds: float | None) -> str:
    """Seconds with a readable unit: ``1.23 ms``, ``450 µs``; ``—`` when unknown."""
    if seconds is None:
        return "—"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def format_speedup(speedup: float | None) -> str:
    """``12.3×``; ``—`` when unknown."""
    return "—" if speedup is None else f"{speedup:.3g}×"


def summary_data(tree: SearchTree) -> dict[str, Any]:
    """Workload, status, counters, baseline, best and top candidates as plain data."""
    search = tree.search
    winner = tree.winner
    # Prefer the finalists' side-by-side numbers; fall back to the winner's own timing.
    best_speedup = search.best_speedup
    best_seconds = search.best_seconds
    if winner is not None:
        best_speedup = winner.speedup if best_speedup is None else best_speedup
        best_seconds = winner.seconds if best_seconds is None else best_seconds
    return {
        "search_id": search.id,
        "workload": search.workload.label,
        "status": search.status.value,
        "strategy": search.config.strategy.value,
        "elapsed_seconds": search.elapsed_seconds,
        "candidates": len(tree),
        "counters": search.counters.to_json(),
        "statuses": {k.value: v for k, v in tree.status_counts().items()},
        "baseline_seconds": search.baseline_seconds,
        "best_candidate_id": winner.id if winner is not None else None,
        "best_seconds": best_seconds,
        "best_speedup": best_speedup,
        "best_remeasured": search.best_speedup is not None,
        "top": [(r.id, r.depth, r.seconds, r.gflops, r.speedup) for r in tree.best(TOP_ROWS)],
    }


def summary_html(tree: SearchTree) -> str:
    """The HTML block: a header line, a counters line, and the top-5 table."""
    data = summary_data(tree)
    esc = html.escape
    counters = data["counters"]
    header = (
        f"<b>search {data['search_id']}</b> · <code>{esc(data['workload'])}</code> · "
        f"{esc(data['status'])} · {esc(data['strategy'])} · {data['elapsed_seconds']:.1f} s"
    )
    counts = " · ".join(f"{esc(k)} {v}" for k, v in counters.items())
    statuses = ", ".join(f"{esc(k)} {v}" for k, v in data["statuses"].items())
    best = f"baseline {format_seconds(data['baseline_seconds'])} · "
    best += f"best <b>{format_speedup(data['best_speedup'])}</b>"
    if data["best_candidate_id"] is not None:
        note = ", finalists re-measured" if data["best_remeasured"] else ""
        best += f" (#{data['best_candidate_id']}, {format_seconds(data['best_seconds'])}{note})"
    rows = "".join(
        "<tr>"
        f"<td>{rank}</td><td>#{cid}</td><td>{depth}</td><td>{format_seconds(secs)}</td>"
        f"<td>{'—' if gflops is None else f'{gflops:.3g}'}</td><td>{format_speedup(speedup)}</td>"
        f"<td><code>{esc(_last_step(tree, cid))}</code></td>"
        "</tr>"
        for rank, (cid, depth, secs, gflops, speedup) in enumerate(data["top"], 1)
    )
    table = (
        "<table><thead><tr><th>rank</th><th>id</th><th>depth</th><th>time</th><th>GFLOP/s</th>"
        f"<th>speedup</th><th>last step</th></tr></thead><tbody>{rows}</tbody></table>"
        if rows
        else "<p><i>no successful candidates yet</i></p>"
    )
    return (
        '<div class="schedsearch-tree">'
        f"<p>{header}</p>"
        f"<p>{len(tree)} candidates ({statuses or 'none'}) · {counts}</p>"
        f"<p>{best}</p>"
        f"{table}</div>"
    )


def _last_step(tree: SearchTree, candidate_id: int) -> str:
    steps = tree[candidate_id].schedule.steps
    return tree.describe(steps[-1]) if steps else "(unscheduled)"
