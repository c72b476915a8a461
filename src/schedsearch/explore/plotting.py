"""matplotlib drawings of a SearchTree: the tree itself and the best-so-far curve."""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from schedsearch.core import CandidateRecord, Status
from schedsearch.explore._optional import require
from schedsearch.explore.layout import tree_layout

if TYPE_CHECKING:
    from matplotlib.axes import Axes

    from schedsearch.explore.tree import SearchTree

#: marker and colour for each status that is not ``ok``; chosen to stand apart from the
#: speedup colormap and from each other.
STATUS_STYLE: dict[Status, tuple[str, str]] = {
    Status.WRONG_RESULT: ("X", "red"),
    Status.BUILD_ERROR: ("s", "darkorange"),
    Status.RUN_ERROR: ("v", "crimson"),
    Status.TIMEOUT: ("D", "purple"),
    Status.ILLEGAL: ("P", "saddlebrown"),
    Status.PENDING: ("o", "0.6"),
    Status.TAMPERED: ("*", "black"),
}

#: ids are written next to the nodes when the tree has at most this many.
LABEL_LIMIT = 40


def plot_tree(tree: SearchTree, ax: Axes | None = None, *, labels: bool | None = None, cmap: str = "viridis") -> Axes:
    """Draw ``tree`` by depth; see ``SearchTree.plot``. Returns the axes drawn on.

    Node collections carry a ``gid`` of ``nodes:<status>`` so callers can find them.
    """
    plt = require("matplotlib.pyplot")
    mpl = require("matplotlib")
    from matplotlib.collections import LineCollection
    from matplotlib.colors import LogNorm

    layout = tree_layout({r.id: r.parent_id for r in tree.records})
    pos = layout.positions
    if ax is None:
        width = min(max(6.0, 0.12 * layout.leaves + 2.0), 24.0)
        height = min(max(3.5, 0.9 * (layout.depth + 1) + 1.5), 12.0)
        _, ax = plt.subplots(figsize=(width, height))

    edges = [
        (pos[r.parent_id], pos[r.id])
        for r in tree.records
        if r.parent_id is not None and r.parent_id in pos and r.id in pos
    ]
    ax.add_collection(LineCollection(edges, colors="0.7", linewidths=0.6, zorder=1, gid="edges"))
    size = 60.0 if len(pos) <= 50 else 25.0 if len(pos) <= 500 else 10.0

    path = [r for r in tree.best_path() if r.id in pos]
    path_edges = [(pos[a.id], pos[b.id]) for a, b in itertools.pairwise(path)]
    if path_edges:
        ax.add_collection(LineCollection(path_edges, colors="goldenrod", linewidths=2.5, zorder=2, gid="best-path"))

    ok = [r for r in tree.records if r.id in pos and r.status is Status.OK]
    if ok:
        speedups = [r.speedup if r.speedup is not None else math.nan for r in ok]
        finite = sorted(s for s in speedups if s > 0 and math.isfinite(s))
        style: dict[str, Any] = dict(
            s=size, zorder=3, edgecolors="k", linewidths=0.3, label=f"ok ({len(ok)})", gid="nodes:ok"
        )
        if finite:
            # From the median to the best: the top half spreads over the whole colour map
            # instead of sharing one end of it with a long tail of slow candidates.
            low, high = statistics.median(finite), finite[-1]
            if high <= low * 1.01:  # a flat range would make LogNorm degenerate
                low, high = low / 1.1, high * 1.1
            colours = mpl.colormaps[cmap].with_extremes(bad="lightgray")
            points = ax.scatter(*_xy(ok, pos), c=speedups, cmap=colours, norm=LogNorm(low, high), **style)
            ax.figure.colorbar(
                points,
                ax=ax,
                label="speedup × (vs unscheduled)",
                pad=0.01,
                extend="min" if finite[0] < low else "neither",
            )
        else:
            ax.scatter(*_xy(ok, pos), color="tab:blue", **style)

    for status, (marker, colour) in STATUS_STYLE.items():
        group = [r for r in tree.records if r.id in pos and r.status is status]
        if not group:
            continue
        hollow = status is Status.PENDING
        ax.scatter(
            *_xy(group, pos),
            marker=marker,
            s=size * 1.2,
            facecolors="none" if hollow else colour,
            edgecolors=colour,
            linewidths=1.0 if hollow else 0.3,
            zorder=3,
            label=f"{status.value} ({len(group)})",
            gid=f"nodes:{status.value}",
        )

    winner = tree.winner
    if winner is not None and winner.id in pos:
        ax.scatter(
            *_xy([winner], pos),
            s=size * 4,
            facecolors="none",
            edgecolors="gold",
            linewidths=2.0,
            zorder=4,
            label=f"best #{winner.id}",
            gid="best",
        )

    for record in path[1:]:
        kind = record.schedule.steps[-1].kind.value if record.schedule.steps else ""
        note = ax.annotate(
            kind, pos[record.id], xytext=(6, -10), textcoords="offset points", fontsize=7, color="darkgoldenrod"
        )
        note.set_gid("best-path:label")
    declared = tree.declared_best
    if declared is not None and declared.record.id in pos and declared.speedup is not None:
        # The numbers every command reports for the best (re-measured side by side when it was).
        bid = declared.record.id
        note = ax.annotate(
            f"best #{bid}: {declared.speedup:.3g}×",
            pos[bid],
            xytext=(6, 8),
            textcoords="offset points",
            fontsize=8,
            fontweight="bold",
        )
        note.set_gid("best:label")

    if labels if labels is not None else len(pos) <= LABEL_LIMIT:
        for node_id, (x, y) in pos.items():
            ax.annotate(str(node_id), (x, y), xytext=(4, 4), textcoords="offset points", fontsize=7).set_gid("id")

    ax.set_xlim(-1.0, max(layout.leaves, 1))
    ax.set_ylim(-layout.depth - 0.5, 0.5)
    ax.set_yticks([-d for d in range(layout.depth + 1)], [str(d) for d in range(layout.depth + 1)])
    ax.set_xticks([])
    ax.set_ylabel("depth")
    ax.set_title(f"search {tree.search.id}: {tree.search.workload.label} — {len(tree)} candidates")
    if pos:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.02), ncol=4, frameon=False, fontsize=8)
    return ax


def plot_progress(
    tree: SearchTree,
    ax: Axes | None = None,
    *,
    x: Literal["time", "count"] = "time",
    scale: Literal["linear", "log"] = "linear",
    zoom: float | None = None,
) -> Axes:
    """Best-so-far against time or evaluation count; see ``SearchTree.plot_progress``.

    The curve is the Line2D with ``gid="progress"`` (one point per improvement); a dashed
    ``progress:tail`` carries the last value to the end of the search; every measured ok
    candidate is a grey point of the ``candidates`` collection behind it.
    """
    if x not in ("time", "count"):
        raise ValueError(f"x must be 'time' or 'count', not {x!r}")
    if scale not in ("linear", "log"):
        raise ValueError(f"scale must be 'linear' or 'log', not {scale!r}")
    if zoom is not None and not 0 < zoom < 1:
        raise ValueError(f"zoom must be between 0 and 1 (a share of the best speedup), not {zoom!r}")
    plt = require("matplotlib.pyplot")
    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 3.5))
    search = tree.search
    ax.set_xlabel("search seconds" if x == "time" else "candidates evaluated")
    ax.set_title(f"search {search.id}: best so far")
    points = tree.progress
    if not points:
        ax.text(0.5, 0.5, "no progress recorded", ha="center", va="center", transform=ax.transAxes)
        return ax

    by_speedup = all(p.speedup is not None for p in points)
    measured = tree.measured_order()
    dots = [
        (float(n) if x == "count" else t, r.speedup if by_speedup else r.seconds)
        for n, (r, t) in enumerate(measured, 1)
        if r.status is Status.OK and r.seconds is not None
    ]
    shown = [(a, b) for a, b in dots if b is not None]
    if shown:
        ax.scatter(
            [a for a, _ in shown],
            [b for _, b in shown],
            s=8,
            color="0.65",
            alpha=0.6,
            zorder=1,
            linewidths=0,
            label=f"candidates ({len(shown)})",
            gid="candidates",
        )
    xs = [p.elapsed if x == "time" else float(p.count) for p in points]
    ys = [p.speedup for p in points if p.speedup is not None] if by_speedup else [p.seconds for p in points]
    last = points[-1]
    final = f"{last.speedup:.3g}×" if by_speedup else f"{last.seconds:.3g} s"
    label = f"best so far (#{last.candidate_id}: {final})"
    (line,) = ax.step(xs, ys, where="post", marker="o", markersize=4, gid="progress", label=label, zorder=3)
    end = search.elapsed_seconds if x == "time" else float(len(measured) or search.counters.evaluated)
    if end > xs[-1]:
        ax.plot([xs[-1], end], [ys[-1], ys[-1]], ls="--", color=line.get_color(), gid="progress:tail", zorder=3)
    if by_speedup:
        ax.axhline(1.0, color="0.5", lw=0.8, ls=":", label="unscheduled")
        ax.set_ylabel("speedup ×")
    else:
        ax.set_ylabel("seconds per call")
    ax.set_yscale(scale)
    if zoom is not None and by_speedup:
        best = max(ys)
        ax.set_ylim(zoom * best, best * 1.05)
    ax.legend(loc="lower right", fontsize=8)
    return ax


def _xy(records: list[CandidateRecord], pos: Mapping[int, tuple[float, float]]) -> tuple[list[float], list[float]]:
    return [pos[r.id][0] for r in records], [pos[r.id][1] for r in records]
