"""Two recorded searches side by side: their bests, how many times faster one is, and their
best-so-far curves on one plot.

The dashboard's compare page reads the same ``SearchComparison`` (``dashboard.views``), so a
notebook and the dashboard name the same bests with the same numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from schedsearch.core import Rewrite, Status, Store
from schedsearch.explore import frames
from schedsearch.explore._optional import require
from schedsearch.explore.summary import format_seconds, format_speedup, summary_html
from schedsearch.explore.tree import SearchTree

if TYPE_CHECKING:
    import pandas
    from matplotlib.axes import Axes


@dataclass(frozen=True, slots=True)
class SearchComparison:
    """Searches ``a`` and ``b`` as two ``SearchTree`` snapshots (``a`` may be ``b``).

    Each search's best is its ``SearchTree.declared_best``: the one, and the numbers, every
    schedsearch command reports for it.
    """

    a: SearchTree
    b: SearchTree

    @classmethod
    def load(
        cls,
        store: Store,
        a_id: int,
        b_id: int,
        describe: Callable[[Rewrite], str] = Rewrite.describe,
        *,
        code: bool = True,
    ) -> SearchComparison:
        """Read both searches from ``store`` (NotFoundError for an unknown id). ``code=False``
        leaves the candidates' C and proc text out (``SearchTree.load``)."""
        return cls(SearchTree.load(store, a_id, describe, code=code), SearchTree.load(store, b_id, describe, code=code))

    @property
    def b_speedup_over_a(self) -> float | None:
        """How many times faster ``b``'s best is than ``a``'s (a's best time over b's: above 1
        when ``b`` found the faster schedule); None when either has no best."""
        a, b = self.a.declared_best, self.b.declared_best
        if a is None or b is None or a.seconds is None or b.seconds is None or b.seconds <= 0:
            return None
        return a.seconds / b.seconds

    @property
    def same_workload(self) -> bool:
        """Both searches tuned the same proc at the same sizes from the same source, so their
        times compare directly."""
        return self.a.search.workload.key == self.b.search.workload.key

    def to_dataframe(self) -> pandas.DataFrame:
        """One row per search (``a`` then ``b``), the columns of ``list_searches``."""
        searches = [self.a.search, self.b.search]
        bests = {self.a.search.id: self.a.declared_best, self.b.search.id: self.b.declared_best}
        return frames.searches_frame(searches, bests)

    def summary(self) -> dict[str, Any]:
        """Both searches' summaries (``SearchTree.summary``) and the ratio of their bests."""
        return {
            "a": self.a.summary(),
            "b": self.b.summary(),
            "b_speedup_over_a": self.b_speedup_over_a,
            "same_workload": self.same_workload,
        }

    def plot_progress(
        self,
        ax: Axes | None = None,
        x: Literal["time", "count"] = "time",
        *,
        scale: Literal["linear", "log"] = "log",
    ) -> Axes:
        """Both searches' best time so far against elapsed seconds (``x="time"``) or
        candidates evaluated (``"count"``), every measured candidate a faint point behind.

        Times, not speedups: two searches' speedups are over their own unscheduled proc's
        time. Each curve is a Line2D with ``gid="progress:a"`` / ``"progress:b"``; each
        search's unscheduled proc is a dashed line (``baseline:a``, ``baseline:b``).
        """
        if x not in ("time", "count"):
            raise ValueError(f"x must be 'time' or 'count', not {x!r}")
        if scale not in ("linear", "log"):
            raise ValueError(f"scale must be 'linear' or 'log', not {scale!r}")
        plt = require("matplotlib.pyplot")
        if ax is None:
            _, ax = plt.subplots(figsize=(6.5, 3.5))
        for name, tree in (("a", self.a), ("b", self.b)):
            self._draw(ax, name, tree, x)
        ax.set_xlabel("search seconds" if x == "time" else "candidates evaluated")
        ax.set_ylabel("seconds per call")
        ax.set_yscale(scale)
        ax.set_title(f"search {self.a.search.id} and search {self.b.search.id}: best so far")
        ax.legend(loc="upper right", fontsize=8)
        return ax

    @staticmethod
    def _draw(ax: Axes, name: str, tree: SearchTree, x: Literal["time", "count"]) -> None:
        # The recorded best-so-far points, as SearchTree.plot_progress and the dashboard draw them.
        points = [p for p in tree.progress if p.seconds > 0]
        measured = tree.measured_order()
        dots = [
            (float(n) if x == "count" else t, r.seconds)
            for n, (r, t) in enumerate(measured, 1)
            if r.status is Status.OK and r.seconds is not None and r.seconds > 0
        ]
        if not points:
            return
        xs = [p.elapsed if x == "time" else float(p.count) for p in points]
        ys = [p.seconds for p in points]
        end = tree.search.elapsed_seconds if x == "time" else float(len(measured) or tree.search.counters.evaluated)
        if end > xs[-1]:  # the last best holds to the end of the search
            xs.append(end)
            ys.append(ys[-1])
        label = f"search {tree.search.id} ({tree.search.config.strategy.value}): {format_seconds(ys[-1])}"
        (line,) = ax.step(xs, ys, where="post", marker="o", markersize=3, gid=f"progress:{name}", label=label, zorder=3)
        colour = line.get_color()
        if dots:
            dx, dy = [d[0] for d in dots], [d[1] for d in dots]
            ax.scatter(dx, dy, s=6, color=colour, alpha=0.25, linewidths=0, zorder=1, gid=f"dots:{name}")
        baseline = tree.search.baseline_seconds
        if baseline is not None and baseline > 0:
            ax.axhline(baseline, color=colour, lw=0.8, ls="--", alpha=0.6, gid=f"baseline:{name}")

    def _repr_html_(self) -> str:
        ratio = self.b_speedup_over_a
        a_id, b_id = self.a.search.id, self.b.search.id
        # Numbers and fixed words only: the database's text is in the two summaries, escaped there.
        verdict = (
            "one of them has no successful candidate yet"
            if ratio is None
            else f"search {b_id}'s best is <b>{format_speedup(ratio)}</b> as fast as search {a_id}'s"
        )
        caveat = "" if self.same_workload else " (different workloads: their times do not compare directly)"
        return f'<div class="schedsearch-compare"><p>{verdict}{caveat}</p>{summary_html(self.a)}{summary_html(self.b)}</div>'


def compare_searches(
    store: Store,
    a_id: int,
    b_id: int,
    describe: Callable[[Rewrite], str] = Rewrite.describe,
) -> SearchComparison:
    """Searches ``a_id`` and ``b_id`` of ``store`` side by side (``SearchComparison.load``)."""
    return SearchComparison.load(store, a_id, b_id, describe)
