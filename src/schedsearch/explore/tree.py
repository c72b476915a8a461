"""``SearchTree``: one recorded search and all its candidates, ready to explore.

A tree is a snapshot read from any ``core.Store``; it holds records only, so it stays
usable after the store is closed. Load it again to see a running search move on.
"""

from __future__ import annotations

import difflib
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal

from schedsearch.core import CandidateRecord, ProgressPoint, Rewrite, SearchRecord, Status, Store
from schedsearch.explore import frames, plotting
from schedsearch.explore._optional import require
from schedsearch.explore.kinds import KindStats, kind_stats
from schedsearch.explore.summary import summary_data, summary_html
from schedsearch.numbers import DeclaredBest, best_among, step

if TYPE_CHECKING:
    import networkx
    import pandas
    from matplotlib.axes import Axes


@dataclass(frozen=True, slots=True)
class TreeNode:
    """The flat, tabular view of one candidate (one row of ``SearchTree.to_dataframe``)."""

    id: int
    parent_id: int | None
    depth: int
    step: str  # the last rewrite's describe(); "" for the unscheduled root
    status: Status
    seconds: float | None  # the search-time median
    spread: float | None  # its interquartile range relative to it
    gflops: float | None
    speedup: float | None
    gain: float | None  # the parent's time / this time: what the last step did
    within_noise: bool | None  # the gain is smaller than the two times' combined spread
    fingerprint: str
    expanded: bool
    error: str  # first line of the error text, "" when none
    # What measuring it cost: seconds of the search's own elapsed time it was measured at, and
    # the seconds its build and its verification and timing took (0 for a build found ready).
    measured_at: float | None = None
    build_seconds: float = 0.0
    run_seconds: float = 0.0

    @staticmethod
    def of(
        record: CandidateRecord,
        describe: Callable[[Rewrite], str] = Rewrite.describe,
        parent: CandidateRecord | None = None,
    ) -> TreeNode:
        """Flatten a stored candidate; ``describe`` prints its last step; ``parent`` gives its gain."""
        steps = record.schedule.steps
        s = step(record, parent)
        return TreeNode(
            id=record.id,
            parent_id=record.parent_id,
            depth=record.depth,
            step=describe(steps[-1]) if steps else "",
            status=record.status,
            seconds=record.seconds,
            spread=record.timing.spread if record.timing is not None else None,
            gflops=record.gflops,
            speedup=record.speedup,
            gain=s.gain,
            within_noise=s.within_noise,
            fingerprint=record.fingerprint,
            expanded=record.expanded,
            error=record.error.strip().splitlines()[0] if record.error.strip() else "",
            measured_at=record.measured_at,
            build_seconds=record.build_seconds,
            run_seconds=record.run_seconds,
        )


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class SearchTree:
    """A search record, its candidates in insertion order and its best-so-far curve.

    ``describe`` prints a step. Which arguments only name created loops and buffers is
    known to the rewrite rules, not to this package: pass ``transforms.describe_step`` to
    leave them out (the default prints every argument).
    """

    search: SearchRecord
    records: tuple[CandidateRecord, ...]
    progress: tuple[ProgressPoint, ...] = ()
    describe: Callable[[Rewrite], str] = Rewrite.describe
    _by_id: Mapping[int, CandidateRecord] = field(init=False)
    _children: Mapping[int, tuple[int, ...]] = field(init=False)

    def __post_init__(self) -> None:
        by_id = {r.id: r for r in self.records}
        children: dict[int, list[int]] = {}
        for r in self.records:
            if r.parent_id is not None and r.parent_id in by_id:
                children.setdefault(r.parent_id, []).append(r.id)
        # Frozen: the indexes are derived once here and exposed read-only.
        object.__setattr__(self, "_by_id", types.MappingProxyType(by_id))
        object.__setattr__(self, "_children", types.MappingProxyType({k: tuple(v) for k, v in children.items()}))

    @classmethod
    def load(
        cls,
        store: Store,
        search_id: int,
        describe: Callable[[Rewrite], str] = Rewrite.describe,
        *,
        code: bool = True,
    ) -> SearchTree:
        """Read search ``search_id`` with all its candidates and progress from ``store``.
        ``code=False`` reads the candidates without their C and proc text (``diff`` is then
        empty): much less to read for a search of thousands of candidates."""
        return cls(
            search=store.get_search(search_id),
            records=tuple(store.candidates(search_id, code=code)),
            progress=tuple(store.progress(search_id)),
            describe=describe,
        )

    # ------------------------------------------------------------------ access

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[CandidateRecord]:
        return iter(self.records)

    def __contains__(self, candidate_id: object) -> bool:
        return candidate_id in self._by_id

    def __getitem__(self, candidate_id: int) -> CandidateRecord:
        try:
            return self._by_id[candidate_id]
        except KeyError:
            raise KeyError(f"search {self.search.id} has no candidate #{candidate_id}") from None

    def __repr__(self) -> str:
        return (
            f"SearchTree(search={self.search.id}, workload={self.search.workload.label!r}, "
            f"status={self.search.status.value!r}, candidates={len(self.records)})"
        )

    @property
    def root(self) -> CandidateRecord | None:
        """The unscheduled candidate (the first one without a parent), if any."""
        return next((r for r in self.records if r.parent_id is None), None)

    @property
    def winner(self) -> CandidateRecord | None:
        """The search's declared best, else the fastest ``ok`` candidate, else None."""
        best = self.declared_best
        return best.record if best is not None else None

    @property
    def declared_best(self) -> DeclaredBest | None:
        """The best with the numbers every schedsearch command reports for it: the finalists'
        side-by-side re-measurement when there was one (``kind`` says which), else the
        fastest search-time median."""
        return best_among(self.search, self.records)

    def nodes(self) -> list[TreeNode]:
        """Every candidate as a flat TreeNode, in insertion order."""
        by_id = self._by_id
        return [
            TreeNode.of(r, self.describe, by_id.get(r.parent_id) if r.parent_id is not None else None)
            for r in self.records
        ]

    def children(self, candidate_id: int) -> list[CandidateRecord]:
        """The direct children of a candidate, in the order the search produced them."""
        self[candidate_id]  # an unknown id raises KeyError here
        return [self._by_id[c] for c in self._children.get(candidate_id, ())]

    def lineage(self, candidate_id: int) -> list[CandidateRecord]:
        """The chain from the root to ``candidate_id`` (root first, the candidate last)."""
        chain = [self[candidate_id]]
        seen = {candidate_id}
        while chain[-1].parent_id is not None and chain[-1].parent_id in self._by_id:
            parent_id = chain[-1].parent_id
            if parent_id in seen:  # a parent cycle can only come from corrupt data
                break
            seen.add(parent_id)
            chain.append(self._by_id[parent_id])
        return chain[::-1]

    def best_path(self) -> list[CandidateRecord]:
        """The chain from the root to the winner (empty when nothing succeeded)."""
        winner = self.winner
        return self.lineage(winner.id) if winner is not None else []

    def measured_order(self) -> list[tuple[CandidateRecord, float]]:
        """Every measured candidate with the search's own elapsed seconds when it was measured
        (the time between the runs of a resumed search does not count), in measurement order:
        the order the budget was spent in."""
        started = self.search.started_at

        def elapsed(r: CandidateRecord) -> float | None:
            if r.measured_at is not None:
                return r.measured_at
            return None if r.measured_unix is None else r.measured_unix - started

        # A row found tampered on resume was never measured by this search (``Status.TAMPERED``).
        measured = [(r, elapsed(r)) for r in self.records if r.status not in (Status.PENDING, Status.TAMPERED)]
        timed = [(r, t) for r, t in measured if t is not None]
        timed.sort(key=lambda rt: (rt[0].measured_unix or 0.0, rt[0].id))
        return timed

    def best(self, k: int = 5) -> list[CandidateRecord]:
        """The ``k`` fastest ``ok`` candidates with a timing, fastest first."""
        timed = [r for r in self.records if r.status is Status.OK and r.seconds is not None]
        timed.sort(key=lambda r: (r.seconds, r.id))
        return timed[:k]

    def status_counts(self) -> dict[Status, int]:
        """How many candidates ended in each status (only statuses that occur)."""
        counts: dict[Status, int] = {}
        for r in self.records:
            counts[r.status] = counts.get(r.status, 0) + 1
        return counts

    # ------------------------------------------------------------------ text

    def diff(self, candidate_id: int, against: int | None = None, context: int = 3) -> str:
        """Unified diff of the Exo text from ``against`` (default: the parent) to the candidate.

        The root has no parent; its diff against nothing is empty.
        """
        new = self[candidate_id]
        if against is None:
            if new.parent_id is None or new.parent_id not in self._by_id:
                return ""
            against = new.parent_id
        old = self[against]
        lines = difflib.unified_diff(
            old.proc_text.splitlines(),
            new.proc_text.splitlines(),
            fromfile=_label(old, self.describe),
            tofile=_label(new, self.describe),
            n=context,
            lineterm="",
        )
        return "\n".join(lines)

    def schedule_text(self, candidate_id: int) -> str:
        """The candidate's schedule, one numbered rewrite per line."""
        steps = self[candidate_id].schedule.steps
        return "\n".join(f"{i}. {self.describe(s)}" for i, s in enumerate(steps, 1)) or "(unscheduled)"

    # ------------------------------------------------------------------ views

    def to_dataframe(self) -> pandas.DataFrame:
        """One row per candidate: id, parent_id, depth, step, status, seconds, spread, gflops,
        speedup, gain (over the parent), within_noise, time (readable, with its spread),
        fingerprint, expanded, error."""
        return frames.nodes_frame(self.nodes())

    def top_dataframe(self, k: int = 10) -> pandas.DataFrame:
        """The ``k`` fastest ok candidates with their rank and full schedule."""
        return frames.top_frame(self.best(k), self.describe)

    def kinds(self) -> list[KindStats]:
        """Per rewrite kind: how often it was tried, legal, ok, faster than its parent, and
        on the path to the best."""
        return kind_stats(self.records, self.best_path())

    def kinds_dataframe(self) -> pandas.DataFrame:
        """``kinds()`` as a table."""
        return frames.kinds_frame(self.kinds())

    def to_networkx(self) -> networkx.DiGraph:
        """A DiGraph: nodes are candidate ids carrying the TreeNode fields as attributes,
        edges go parent -> child and carry the child's ``step``."""
        nx = require("networkx")
        graph = nx.DiGraph(search_id=self.search.id, workload=self.search.workload.label)
        nodes = self.nodes()
        for node in nodes:
            attrs = {f.name: getattr(node, f.name) for f in fields(TreeNode) if f.name != "id"}
            attrs["status"] = node.status.value
            graph.add_node(node.id, **attrs)
        for node in nodes:
            if node.parent_id is not None and node.parent_id in self._by_id:
                graph.add_edge(node.parent_id, node.id, step=node.step)
        return graph

    def plot(self, ax: Axes | None = None, *, labels: bool | None = None, cmap: str = "viridis") -> Axes:
        """Draw the tree by depth: colour = speedup, failures marked by status, the path to
        the best drawn and labelled with its steps' kinds, the best ringed.

        The colour scale runs from the median ok speedup to the best, so the top candidates
        are told apart (slower ones share the lowest colour). ``labels`` writes candidate ids
        next to the nodes (default: only for small trees).
        """
        return plotting.plot_tree(self, ax, labels=labels, cmap=cmap)

    def plot_progress(
        self,
        ax: Axes | None = None,
        x: Literal["time", "count"] = "time",
        *,
        scale: Literal["linear", "log"] = "linear",
        zoom: float | None = None,
    ) -> Axes:
        """Best-so-far speedup against elapsed seconds (``x="time"``) or evaluations
        (``"count"``), every measured candidate scattered behind it.

        ``scale="log"`` for a log speedup axis; ``zoom=0.5`` shows only speedups of at least
        half the final best, where the interesting differences are.
        """
        return plotting.plot_progress(self, ax, x=x, scale=scale, zoom=zoom)

    def _repr_html_(self) -> str:
        return summary_html(self)

    def summary(self) -> dict[str, Any]:
        """The numbers the HTML summary shows, as plain data."""
        return summary_data(self)


def _label(record: CandidateRecord, describe: Callable[[Rewrite], str]) -> str:
    steps = record.schedule.steps
    return f"#{record.id} " + (describe(steps[-1]) if steps else "(unscheduled)")
