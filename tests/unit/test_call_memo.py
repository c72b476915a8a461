"""CallMemo: Exo calls made twice on the same proc during one expansion are looked up."""

from __future__ import annotations

from pathlib import Path

import pytest

from schedsearch.core import ExpandOptions, Rewrite, RewriteKind
from schedsearch.transforms import Expander, load_workload, root_candidate
from schedsearch.transforms.call_memo import CallMemo
from schedsearch.transforms.calls import Loop, Nest, _resolve
from schedsearch.transforms.codegen import kernel_c
from schedsearch.transforms.replay import try_apply
from schedsearch.transforms.rules import propose_all

MATMUL = Path(__file__).resolve().parents[2] / "examples" / "matmul.py"


@pytest.fixture(scope="module")
def swapped():
    """SGEMM 64 with ``i`` and ``j`` swapped: its proposals hold a plain ``reorder j i`` and
    a pack of A with ``interchange``, which starts with the very same reorder."""
    workload = load_workload(str(MATMUL), "sgemm", {"M": 64, "N": 64, "K": 64})
    expander = Expander(workload, ExpandOptions())
    child = next(c for c in expander.expand(root_candidate(workload)).children
                 if c.schedule.steps[-1].kind is RewriteKind.REORDER and c.schedule.steps[-1].target == "i j")
    proc = expander.proc_for(child.schedule)
    rewrites = propose_all(proc, ExpandOptions())
    reorder = next(r for r in rewrites if r.kind is RewriteKind.REORDER and r.target == "j i")
    pack = next(r for r in rewrites if r.kind is RewriteKind.PACK and r.arg("interchange"))
    return proc, reorder, pack


def test_a_loop_named_two_ways_is_one_key(swapped) -> None:
    proc, _, _ = swapped
    memo = CallMemo()
    by_nest = memo.key(proc, "reorder_loops", [_resolve(proc, Nest("j i"))], {})
    by_loop = memo.key(proc, "reorder_loops", [_resolve(proc, Loop("j #0"))], {})
    other = memo.key(proc, "reorder_loops", [_resolve(proc, Nest("i k"))], {})
    assert by_nest is not None and by_nest == by_loop
    assert other != by_nest


def test_a_shared_first_call_is_made_once_and_changes_nothing(swapped) -> None:
    proc, reorder, pack = swapped
    memo = CallMemo()
    with_memo = [try_apply(proc, r, memo) for r in (reorder, pack)]
    assert memo.hits == 1  # the pack's reorder was the plain reorder's
    plain = [try_apply(proc, r) for r in (reorder, pack)]
    assert all(p is not None for p in with_memo)
    assert [kernel_c(p) for p in with_memo] == [kernel_c(p) for p in plain]


def test_a_rejected_call_is_rejected_again_from_the_memo(swapped) -> None:
    proc, _, _ = swapped
    memo = CallMemo()
    bad = Rewrite(RewriteKind.SPLIT, "j #0", (("factor", 7), ("inner", "ji"), ("outer", "jo"), ("tail", "perfect")))
    assert try_apply(proc, bad, memo) is None
    assert try_apply(proc, bad, memo) is None
    assert memo.hits == 1


def test_the_memo_keeps_no_more_than_its_limit(swapped) -> None:
    proc, reorder, pack = swapped
    memo = CallMemo(limit=1)
    try_apply(proc, pack, memo)  # three calls: only the first is kept
    try_apply(proc, reorder, memo)
    assert memo.hits == 1
    try_apply(proc, pack, memo)
    assert memo.hits == 2  # its reorder again; the rest is made anew


def test_unkeyable_arguments_are_not_remembered(swapped) -> None:
    proc, _, _ = swapped
    assert CallMemo().key(proc, "simplify", [{"a": 1}], {}) is None
