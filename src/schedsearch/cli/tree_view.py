"""``schedsearch tree``: the search tree as text that keeps its numbers at any width.

Each node reads ``#id status time ±spread speedup [~] [best:] step``: the numbers come before the step
text, so a narrow terminal or a CI log cuts the step, never the time. Times are search-time
medians with half their interquartile range; a ``~`` before the step marks a step whose gain
over its parent is within the two measurements' noise. The path from the root to the search's
best (``numbers.declared_best``, the same one every command names) is marked with ``*``, and
the header gives the best's reported numbers and their kind; a node whose children are not
shown says ``+N`` (its hidden descendants). A search timed on several cluster nodes names,
after each node's numbers, the cluster node that timed it (``nodes.node_labels``).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from rich.console import Group
from rich.text import Text
from rich.tree import Tree

from schedsearch.cli.numbers_view import BEST_MARK, NOISE_MARK, fmt_spread, record_spread
from schedsearch.cli.render import STATUS_STYLE, fmt_num, fmt_seconds, step_text
from schedsearch.core import CandidateRecord, SearchRecord, Status
from schedsearch.nodes import node_counts, node_labels, several_nodes
from schedsearch.numbers import DeclaredBest, NumberKind, best_among, step


class TreeSort(StrEnum):
    """Sibling order in the tree."""

    ORDER = "order"  # as the search produced them
    SPEED = "speed"  # fastest first, then unmeasured and failed ones by id


def _sort_key(sort: TreeSort):
    def key(r: CandidateRecord) -> tuple:
        if sort is TreeSort.SPEED:
            timed = r.status is Status.OK and r.seconds is not None
            return (not timed, r.seconds if timed else 0.0, r.id)
        return (r.id,)

    return key


def tree_header(search: SearchRecord, records: Sequence[CandidateRecord], shown: int) -> str:
    """What the tree holds, with counts that add up: every rewrite tried is a duplicate,
    illegal, or a new candidate; every candidate is ok, failed or not yet measured."""
    c = search.counters
    new = len(records) - sum(r.parent_id is None for r in records) - c.warm_started
    ok = sum(r.status is Status.OK for r in records)
    pending = sum(r.status is Status.PENDING for r in records)
    tampered = sum(r.status is Status.TAMPERED for r in records)
    failed = len(records) - ok - pending - tampered
    seeds = f", {c.warm_started} warm-started from earlier searches" if c.warm_started else ""
    head = (
        f"search {search.id}: {len(records)} candidates (the unscheduled proc{seeds} and {new} new of "
        f"{c.generated} rewrites tried; {c.duplicates} duplicate, {c.illegal} illegal): "
        f"{ok} ok, {failed} failed, {pending} not measured"
    )
    if tampered:
        head += f", {tampered} tampered (their stored schedule does not give their C: never used)"
    if c.reused:
        head += f"; {c.reused} measurements reused from earlier searches"
    if shown < len(records):
        head += f"; showing {shown}"
    return head


def best_line(best: DeclaredBest | None, cluster: bool = False) -> str:
    """The header's second line: the best with the numbers every command reports for it;
    ``cluster``: the legend says that each node then names the cluster node that timed it."""
    timed_by = ", cluster node that timed it" if cluster else ""
    legend = (
        f"nodes: search-time median ±half its interquartile range, speedup{timed_by}; {NOISE_MARK} a step "
        f"within noise of its parent"
    )
    if best is None:
        return f"best: none measured ok ({legend})"
    who = "the unscheduled proc (nothing faster found)" if best.is_unscheduled else f"#{best.record.id}"
    numbers = f"{fmt_seconds(best.seconds)} {fmt_num(best.speedup, 'x')}"
    kind = (
        "finalists re-measured side by side"
        if best.kind is NumberKind.REMEASURED
        else "search-time median, not re-measured"
    )
    return f"best: {who}, {numbers} ({kind}; {legend})"


def search_tree(
    search: SearchRecord,
    records: Sequence[CandidateRecord],
    *,
    max_depth: int | None = None,
    sort: TreeSort = TreeSort.ORDER,
) -> Group:
    """The header (counts, the best) and a rich Tree of the search, down to ``max_depth``
    (all of it when None)."""
    by_id = {r.id: r for r in records}
    children: dict[int | None, list[CandidateRecord]] = {}
    for r in records:
        parent = r.parent_id if r.parent_id in by_id else None
        children.setdefault(parent, []).append(r)
    for siblings in children.values():
        siblings.sort(key=_sort_key(sort))

    best = best_among(search, records)
    best_id = best.record.id if best is not None else None
    on_path: set[int] = set()
    node = by_id.get(best_id) if best_id is not None else None
    while node is not None and node.id not in on_path:
        on_path.add(node.id)
        node = by_id.get(node.parent_id) if node.parent_id is not None else None

    # Timed on several cluster nodes: each line names its node, padded so the steps line up.
    labels = node_labels(records) if several_nodes(node_counts(records)) else None
    width = max((len(labels[r.node]) for r in records if labels and r.node), default=0)

    descendants: dict[int, int] = {}

    def count(r: CandidateRecord) -> int:
        if r.id not in descendants:
            descendants[r.id] = sum(1 + count(c) for c in children.get(r.id, []))
        return descendants[r.id]

    def label(r: CandidateRecord, hidden: int) -> Text:
        mark = BEST_MARK if r.id in on_path else " "
        t = Text(f"{mark}#{r.id} ", style="bold" if r.id in on_path else "")
        t.append(f"{r.status.value:<12}", style=STATUS_STYLE.get(r.status, ""))
        if r.seconds is not None:
            t.append(f"{fmt_seconds(r.seconds):>9} {fmt_spread(record_spread(r)):>6} {fmt_num(r.speedup, 'x'):>7} ")
        else:
            t.append(" " * 25)
        if labels is not None:
            t.append(f"{labels.get(r.node, ''):<{width}} ", style="dim")
        noisy = step(r, by_id.get(r.parent_id) if r.parent_id is not None else None).within_noise
        t.append(f"{NOISE_MARK} " if noisy else "  ", style="yellow")
        if hidden:
            t.append(f"+{hidden} ", style="cyan")
        if r.id == best_id:
            # before the step, so a narrow terminal keeps it; its reported numbers are in the header
            t.append("best: ", style="bold yellow")
        t.append(step_text(r), style="bold" if r.id == best_id else "")
        if r.reused_candidate_id is not None:
            t.append(f"  (measured by search {r.reused_search_id}, #{r.reused_candidate_id})", style="dim")
        return t

    shown = 0

    def add(parent: Tree, r: CandidateRecord) -> None:
        nonlocal shown
        shown += 1
        collapsed = max_depth is not None and r.depth >= max_depth
        branch = parent.add(label(r, count(r) if collapsed else 0))
        if not collapsed:
            for child in children.get(r.id, []):
                add(branch, child)

    tree = Tree("", hide_root=True)
    for root in children.get(None, []):
        add(tree, root)
    # The header is printed above the tree, not as its label: a label is cut at the console's
    # width in a log, and these lines carry the counts and the best's numbers.
    return Group(
        Text(tree_header(search, records, shown), style="bold"), Text(best_line(best, cluster=labels is not None)), tree
    )
