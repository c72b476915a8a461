"""Which cluster nodes timed a search's candidates, and the short names the views give them.

A candidate measured on a Ray cluster records the node that timed it (``CandidateRecord.node``,
a Ray node id) and that node's machine (``CandidateRecord.machine``, with its host name).
Every view (``show``, ``tree``, the dashboard) reads them through this module, so that all
of them name a node the same way and show nodes only for a search timed on more than one.

Standard library and ``core`` only: every package may use it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sized
from dataclasses import dataclass

from schedsearch.core import CandidateRecord

#: Hex digits of a Ray node id a view shows when the node's host name does not tell it apart.
SHORT_ID = 8


@dataclass(frozen=True, slots=True)
class TimedOn:
    """One node that timed candidates of a search: its id as stored, its short name, and
    how many of the search's candidates it timed (their latest measurement)."""

    node: str
    label: str
    candidates: int


def node_counts(records: Iterable[CandidateRecord]) -> dict[str, int]:
    """Candidates per node that timed them, by stored node id, most first (ties by id).
    Candidates timed outside a cluster, or never timed, are not counted: a search run
    without Ray gives ``{}``."""
    counts = Counter(r.node for r in records if r.node)
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def node_labels(records: Iterable[CandidateRecord]) -> dict[str, str]:
    """A short name for every node that timed or built one of ``records``: the host name of
    the machine that timed there when that names one node only, else the node id's first
    ``SHORT_ID`` hex digits. Every name is distinct from the others' (ids are)."""
    hosts: dict[str, set[str]] = {}
    for r in records:
        for node in (r.node, r.built_node):
            if node:
                hosts.setdefault(node, set())
        if r.node and r.machine is not None and r.machine.hostname:
            hosts[r.node].add(r.machine.hostname)
    owners = Counter(h for names in hosts.values() for h in names)
    labels: dict[str, str] = {}
    for node, names in hosts.items():
        unique = [h for h in names if owners[h] == 1]
        labels[node] = unique[0] if len(names) == 1 and unique else node[:SHORT_ID]
    return labels


def timed_on(records: Iterable[CandidateRecord]) -> list[TimedOn]:
    """The nodes that timed ``records``, most candidates first (empty outside a cluster)."""
    rows = list(records)
    labels = node_labels(rows)
    return [TimedOn(node, labels[node], n) for node, n in node_counts(rows).items()]


def several_nodes(nodes: Sized) -> bool:
    """True when more than one node timed the search (``nodes``: ``timed_on`` or
    ``node_counts``): only then do the views show nodes."""
    return len(nodes) > 1


def timed_on_text(nodes: list[TimedOn]) -> str:
    """``"timed on 2 nodes: vm-head 120 candidates, vm-second 98"`` (empty for one node or none)."""
    if not several_nodes(nodes):
        return ""
    first, *rest = nodes
    parts = [f"{first.label} {first.candidates} candidates", *(f"{n.label} {n.candidates}" for n in rest)]
    return f"timed on {len(nodes)} nodes: " + ", ".join(parts)
