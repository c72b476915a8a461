"""Positions for drawing a search tree, computed without graphviz.

Leaves are spaced one unit apart in depth-first order and every parent sits halfway
between its first and last child, so subtrees never overlap and siblings stay in the
order the search produced them. ``y`` is minus the depth: the root is on top.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TreeLayout:
    """Where each node goes: ``positions[id] = (x, y)``, plus the tree's extent."""

    positions: Mapping[int, tuple[float, float]]
    leaves: int
    depth: int


def tree_layout(parent_of: Mapping[int, int | None]) -> TreeLayout:
    """Lay out a forest given each node's parent (``None`` or an unknown id marks a root).

    The mapping's iteration order is the sibling order. Each node is listed once, so a
    node is visited at most once; nodes on a parent cycle (corrupt data) are never reached
    from a root and are left out.
    """
    children: dict[int, list[int]] = {}
    roots: list[int] = []
    for node, parent in parent_of.items():
        if parent is None or parent not in parent_of or parent == node:
            roots.append(node)
        else:
            children.setdefault(parent, []).append(node)

    xs: dict[int, float] = {}
    depths: dict[int, int] = {}
    next_leaf = 0
    # Iterative post-order: trees from wide searches can be deep enough to make recursion
    # a liability, and the order in which leaves are finished is exactly DFS order.
    stack: list[tuple[int, int, bool]] = [(r, 0, False) for r in reversed(roots)]
    while stack:
        node, depth, finished = stack.pop()
        kids = children.get(node, [])
        if finished:
            if kids:
                xs[node] = (xs[kids[0]] + xs[kids[-1]]) / 2.0
            else:
                xs[node] = float(next_leaf)
                next_leaf += 1
            continue
        depths[node] = depth
        stack.append((node, depth, True))
        stack.extend((kid, depth + 1, False) for kid in reversed(kids))

    positions = {node: (xs[node], -float(depths[node])) for node in parent_of if node in xs}
    return TreeLayout(positions=positions, leaves=next_leaf, depth=max(depths.values(), default=0))
