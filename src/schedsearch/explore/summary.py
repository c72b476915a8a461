"""A compact HTML summary of a search, shown when a SearchTree is a cell's last value."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from schedsearch.numbers import NumberKind, ending

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


def format_spread(spread: float | None) -> str:
    """Half the interquartile range relative to the median, ``±1.5%``; "" when unknown."""
    return "" if spread is None else f"±{50 * spread:.1f}%"


def format_time(seconds: float | None, spread: float | None) -> str:
    """``1.23 ms ±1.5%`` (without the spread when it is unknown)."""
    text = format_seconds(seconds)
    return f"{text} {format_spread(spread)}" if seconds is not None and spread is not None else text


def format_speedup(speedup: float | None) -> str:
    """``12.3×``; ``—`` when unknown."""
    return "—" if speedup is None else f"{speedup:.3g}×"


def summary_data(tree: SearchTree) -> dict[str, Any]:
    """Workload, status, counters, baseline, best and top candidates as plain data.

    The best is the one every schedsearch command names, with the same numbers
    (``numbers.declared_best``); ``best_numbers`` says which kind they are.
    """
    search = tree.search
    best = tree.declared_best
    return {
        "search_id": search.id,
        "workload": search.workload.label,
        "status": search.status.value,
        "ended": ending(search).value,
        "strategy": search.config.strategy.value,
        "elapsed_seconds": search.elapsed_seconds,
        "candidates": len(tree),
        "counters": search.counters.to_json(),
        "statuses": {k.value: v for k, v in tree.status_counts().items()},
        "baseline_seconds": search.baseline_seconds,
        "best_candidate_id": best.record.id if best is not None else None,
        "best_seconds": best.seconds if best is not None else None,
        "best_spread": best.spread if best is not None else None,
        "best_speedup": best.speedup if best is not None else None,
        "best_numbers": best.kind.value if best is not None else None,
        "best_remeasured": best is not None and best.kind is NumberKind.REMEASURED,
        "best_is_unscheduled": best is not None and best.is_unscheduled,
        "top": [
            (r.id, r.depth, r.seconds, r.timing.spread if r.timing is not None else None, r.gflops, r.speedup)
            for r in tree.best(TOP_ROWS)
        ],
    }


def summary_html(tree: SearchTree) -> str:
    """The HTML block: a header line, a counters line, and the top-5 table."""
    data = summary_data(tree)
    esc = html.escape
    counters = data["counters"]
    header = (
        f"<b>search {data['search_id']}</b> · <code>{esc(data['workload'])}</code> · "
        f"{esc(data['status'])} ({esc(data['ended'].replace('_', ' '))}) · {esc(data['strategy'])} · "
        f"{data['elapsed_seconds']:.1f} s"
    )
    counts = " · ".join(f"{esc(k)} {v}" for k, v in counters.items())
    statuses = ", ".join(f"{esc(k)} {v}" for k, v in data["statuses"].items())
    best = f"baseline {format_seconds(data['baseline_seconds'])} · "
    if data["best_candidate_id"] is None:
        best += "best —"
    elif data["best_is_unscheduled"]:
        best += "<b>nothing faster than the unscheduled proc found</b>"
    else:
        best += f"best <b>{format_speedup(data['best_speedup'])}</b>"
    if data["best_candidate_id"] is not None:
        note = (
            "finalists re-measured side by side"
            if data["best_remeasured"]
            else "search-time median, not re-measured side by side"
        )
        best += f" (#{data['best_candidate_id']}, {format_time(data['best_seconds'], data['best_spread'])}, {note})"
    rows = "".join(
        "<tr>"
        f"<td>{rank}</td><td>#{cid}{' *' if cid == data['best_candidate_id'] else ''}</td><td>{depth}</td>"
        f"<td>{format_time(secs, spread)}</td>"
        f"<td>{'—' if gflops is None else f'{gflops:.3g}'}</td><td>{format_speedup(speedup)}</td>"
        f"<td><code>{esc(_last_step(tree, cid))}</code></td>"
        "</tr>"
        for rank, (cid, depth, secs, spread, gflops, speedup) in enumerate(data["top"], 1)
    )
    table = (
        "<table><thead><tr><th>rank</th><th>id</th><th>depth</th><th>time (search-time median)</th>"
        f"<th>GFLOP/s</th><th>speedup</th><th>last step</th></tr></thead><tbody>{rows}</tbody></table>"
        + ("<p><small>* the best</small></p>" if any(t[0] == data["best_candidate_id"] for t in data["top"]) else "")
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
