"""``schedsearch.nodes``: the nodes that timed a search, counted and named the same way by
every view."""

from __future__ import annotations

from schedsearch.core import CandidateRecord, MachineInfo, Schedule, Status
from schedsearch.nodes import node_counts, node_labels, several_nodes, timed_on, timed_on_text

A, B, C = "a1" * 28, "b2" * 28, "c3" * 28


def _rec(id: int, node: str = "", host: str = "", built: str | None = None) -> CandidateRecord:
    return CandidateRecord(id=id, search_id=1, parent_id=None, depth=0, schedule=Schedule(), fingerprint=f"fp{id}",
                           status=Status.OK, node=node, built_node=node if built is None else built,
                           machine=MachineInfo(hostname=host) if host else None)


def test_counts_are_per_timing_node_most_first_and_skip_untimed():
    records = [_rec(1, A, "h"), _rec(2, B, "g"), _rec(3, B, "g"), _rec(4, built=C), _rec(5)]
    assert node_counts(records) == {B: 2, A: 1}
    assert list(node_counts(records)) == [B, A]
    assert [(t.label, t.candidates) for t in timed_on(records)] == [("g", 2), ("h", 1)]
    assert timed_on_text(timed_on(records)) == "timed on 2 nodes: g 2 candidates, h 1"


def test_a_host_name_names_a_node_only_when_it_is_that_node_s_alone():
    # two nodes on machines of one host name (containers on a host) are told apart by id
    records = [_rec(1, A, "same"), _rec(2, B, "same"), _rec(3, C, "vm-c"), _rec(4, built=C)]
    assert node_labels(records) == {A: A[:8], B: B[:8], C: "vm-c"}
    # a node that only built (never timed) has no machine of its own: its id
    assert node_labels([_rec(1, A, "h", built=B)]) == {A: "h", B: B[:8]}


def test_one_node_or_none_is_not_several():
    one = [_rec(1, A, "h"), _rec(2, A, "h")]
    assert not several_nodes(timed_on(one)) and timed_on_text(timed_on(one)) == ""
    assert not several_nodes(node_counts([_rec(1)])) and timed_on([_rec(1)]) == []
    assert several_nodes(timed_on([*one, _rec(3, B, "g")]))
