"""The search tree as nested nodes, cut to a number of nodes a page can hold.

A search of thousands of candidates is too big to read as one list and too slow to send as
one page, so a view shows at most ``budget`` nodes of a (sub)tree: the path to the best
always, then the shallowest nodes first (breadth first, siblings in search order), so that
what is shown is an overview rather than one deep corner. A node whose descendants are not
all shown counts the hidden ones; the page links them to the subtree rooted there.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from schedsearch.core import CandidateRecord, Rewrite
from schedsearch.dashboard import fmt
from schedsearch.numbers import step

#: Nodes one tree view shows at most.
TREE_BUDGET = 500


@dataclass(frozen=True, slots=True)
class NodeView:
    """One candidate in the tree: its numbers as text, its last step, its shown children,
    and how many of its descendants are left out (``hidden``)."""

    id: int
    depth: int
    status: str
    time: str
    speedup: str
    gain: str
    noise: bool  # the step's gain over the parent is within the two timings' noise
    step: str
    on_path: bool  # on the path from the root to the best
    best: bool
    hidden: int  # descendants not shown: those under its children that are not shown
    children: tuple[NodeView, ...]


@dataclass(frozen=True, slots=True)
class TreeView:
    """A (sub)tree of a search as shown: ``shown`` of the subtree's ``total`` nodes, and the
    ids from the search's root down to the subtree's root (empty for the whole tree)."""

    search_id: int
    root: NodeView | None
    shown: int
    total: int
    ancestors: tuple[int, ...]


def last_step(record: CandidateRecord, describe: Callable[[Rewrite], str]) -> str:
    """The rewrite that made ``record`` ("(unscheduled)" for the root)."""
    steps = record.schedule.steps
    return describe(steps[-1]) if steps else "(unscheduled)"


def best_path(by_id: Mapping[int, CandidateRecord], best_id: int | None) -> list[int]:
    """Ids from the root to ``best_id``, root first (empty when there is no best)."""
    path: list[int] = []
    node = by_id.get(best_id) if best_id is not None else None
    while node is not None:
        path.append(node.id)
        node = by_id.get(node.parent_id) if node.parent_id is not None else None
    return path[::-1]


def build_tree(
    search_id: int,
    records: Sequence[CandidateRecord],
    *,
    best_id: int | None,
    describe: Callable[[Rewrite], str],
    root_id: int | None = None,
    budget: int = TREE_BUDGET,
) -> TreeView:
    """The tree of ``records`` under ``root_id`` (the search's root when None) with at most
    ``budget`` nodes (more only when the path to the best is longer). Raises KeyError when
    ``root_id`` is not one of ``records``."""
    by_id = {r.id: r for r in records}
    children: dict[int, list[CandidateRecord]] = {}
    roots: list[CandidateRecord] = []
    for r in records:  # insertion order: siblings come out in search order
        if r.parent_id is not None and r.parent_id in by_id:
            children.setdefault(r.parent_id, []).append(r)
        else:
            roots.append(r)
    if root_id is None:
        if not roots:
            return TreeView(search_id, None, 0, 0, ())
        root = roots[0]
    else:
        root = by_id[root_id]
    path = best_path(by_id, best_id)
    ancestors = tuple(best_path(by_id, root.id)[:-1])
    sizes = _subtree_sizes(root.id, children)
    shown = {root.id}
    in_subtree = path[path.index(root.id) :] if root.id in path else []
    shown.update(in_subtree)
    queue = deque([root.id])
    while queue and len(shown) < budget:
        for child in children.get(queue.popleft(), ()):
            if len(shown) >= budget:
                break
            shown.add(child.id)
            queue.append(child.id)
    on_path = set(path)

    def node(r: CandidateRecord, parent: CandidateRecord | None) -> NodeView:
        kept = tuple(node(c, r) for c in children.get(r.id, ()) if c.id in shown)
        s = step(r, parent)
        return NodeView(
            id=r.id,
            depth=r.depth,
            status=r.status.value,
            time=fmt.timed(r.seconds, r.timing.spread if r.timing is not None else None),
            speedup=fmt.num(r.speedup, "x"),
            gain=fmt.num(s.gain, "x") if s.gain is not None else "",
            noise=bool(s.within_noise),
            step=last_step(r, describe),
            on_path=r.id in on_path,
            best=r.id == best_id,
            children=kept,
            # What is shown is closed upwards, so every hidden node lies under a hidden child.
            hidden=sum(sizes[c.id] for c in children.get(r.id, ()) if c.id not in shown),
        )

    parent = by_id.get(root.parent_id) if root.parent_id is not None else None
    return TreeView(search_id, node(root, parent), len(shown), sizes[root.id], ancestors)


def _subtree_sizes(root_id: int, children: Mapping[int, list[CandidateRecord]]) -> dict[int, int]:
    """Nodes in each subtree under ``root_id`` (itself included), without recursion: a
    schedule can be deeper than Python's stack is willing to go."""
    order: list[int] = []
    stack = [root_id]
    while stack:
        nid = stack.pop()
        order.append(nid)
        stack.extend(c.id for c in children.get(nid, ()))
    sizes: dict[int, int] = {}
    for nid in reversed(order):
        sizes[nid] = 1 + sum(sizes[c.id] for c in children.get(nid, ()))
    return sizes
