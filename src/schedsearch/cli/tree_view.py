"""``schedsearch tree``: the search tree as text that keeps its numbers at any width.

Each node reads ``#id status time speedup step``: the numbers come before the step text, so
a narrow terminal or a CI log cuts the step, never the time. The path from the root to the
search's best is marked with ``*``; a node whose children are not shown says ``+N`` (its
hidden descendants).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from rich.text import Text
from rich.tree import Tree

from schedsearch.cli.render import STATUS_STYLE, fmt_num, fmt_seconds, step_text
from schedsearch.core import CandidateRecord, SearchRecord, Status

BEST_MARK = "*"


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
    failed = len(records) - ok - pending
    seeds = f", {c.warm_started} warm-started from earlier searches" if c.warm_started else ""
    head = (f"search {search.id}: {len(records)} candidates (the unscheduled proc{seeds} and {new} new of "
            f"{c.generated} rewrites tried; {c.duplicates} duplicate, {c.illegal} illegal): "
            f"{ok} ok, {failed} failed, {pending} not measured")
    if c.reused:
        head += f"; {c.reused} measurements reused from earlier searches"
    if shown < len(records):
        head += f"; showing {shown}"
    return head


def search_tree(search: SearchRecord, records: Sequence[CandidateRecord], *, max_depth: int | None = None,
                sort: TreeSort = TreeSort.ORDER) -> Tree:
    """A rich Tree of the search, down to ``max_depth`` (all of it when None)."""
    by_id = {r.id: r for r in records}
    children: dict[int | None, list[CandidateRecord]] = {}
    for r in records:
        parent = r.parent_id if r.parent_id in by_id else None
        children.setdefault(parent, []).append(r)
    for siblings in children.values():
        siblings.sort(key=_sort_key(sort))

    on_path: set[int] = set()
    node = by_id.get(search.best_candidate_id) if search.best_candidate_id is not None else None
    while node is not None and node.id not in on_path:
        on_path.add(node.id)
        node = by_id.get(node.parent_id) if node.parent_id is not None else None

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
            t.append(f"{fmt_seconds(r.seconds):>9} {fmt_num(r.speedup, 'x'):>7}  ")
        else:
            t.append(" " * 19)
        if hidden:
            t.append(f"+{hidden} ", style="cyan")
        t.append(step_text(r), style="bold" if r.id == search.best_candidate_id else "")
        if r.reused_candidate_id is not None:
            t.append(f"  (measured by search {r.reused_search_id}, #{r.reused_candidate_id})", style="dim")
        if r.id == search.best_candidate_id:
            t.append("  <- best", style="bold yellow")
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

    tree = Tree("")
    for root in children.get(None, []):
        add(tree, root)
    tree.label = Text(tree_header(search, records, shown), style="bold")
    return tree
