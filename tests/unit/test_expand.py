"""Expansion of candidates and the path the search must be able to find for SGEMM."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from schedsearch.core import (
    KERNEL_SYMBOL,
    Candidate,
    ExpandOptions,
    Expansion,
    ExpansionPart,
    Rewrite,
    RewriteKind,
    Schedule,
    sha256_text,
)
from schedsearch.transforms.expand import DEFER_FROM_STATEMENTS, dealt, in_part, proc_statements
from schedsearch.transforms.rules import rule_for
from schedsearch.transforms import (
    proc_text,
    Expander,
    build_proc,
    kernel_c,
    load_workload,
    propose,
    root_candidate,
    try_apply,
)

ROOT = Path(__file__).resolve().parents[2]
MATMUL = ROOT / "examples" / "matmul.py"

SIMPLIFY = Rewrite.make(RewriteKind.SIMPLIFY, "proc")


def tile(fa: int, fb: int) -> Rewrite:
    return Rewrite.make(RewriteKind.TILE, "i #0", inner="j #0", fa=fa, fb=fb, ao="io", ai="ii", bo="jo", bi="ji")


def stage(fa: int, fb: int) -> Rewrite:
    window = f"C[{fa} * io:{fa} * io + {fa}, {fb} * jo:{fb} * jo + {fb}]"
    return Rewrite.make(RewriteKind.STAGE_MEM, "k #0", buffer="C", name="C_stage", window=window)


HOIST_K = Rewrite.make(RewriteKind.HOIST, "k #0", levels=2)
UNROLL_II = Rewrite.make(RewriteKind.UNROLL, "ii #0")
#: The schedule that makes SGEMM fast with AVX-512 (8x32 register tile of C).
PATH_8X32 = (tile(8, 32), HOIST_K, stage(8, 32), UNROLL_II)
#: The best such schedule with AVX2 only: 8x8 tile, rows innermost (one vector per row).
PATH_8X8 = (tile(8, 8), HOIST_K, Rewrite.make(RewriteKind.REORDER, "ii ji"), stage(8, 8), UNROLL_II)


@pytest.fixture(scope="module")
def small():
    return load_workload(MATMUL, "sgemm", {"M": 64, "N": 64, "K": 64})


def test_root_candidate(small):
    root = root_candidate(small)
    assert root.schedule == Schedule()
    assert root.depth == 0 and root.parent is None
    assert f"void {KERNEL_SYMBOL}(" in root.c_source
    assert root.fingerprint == sha256_text(root.c_source)
    assert "for k in seq(0, 64)" in root.proc_text


def test_expand_root_gives_distinct_legal_children(small):
    root = root_candidate(small)
    expansion = Expander(small).expand(root)
    assert expansion.error == ""
    assert expansion.parent == root.fingerprint
    assert expansion.attempted == len(propose(build_proc(small), ExpandOptions()))
    assert len(expansion.children) == expansion.attempted - expansion.illegal - expansion.duplicates
    assert len(expansion.children) >= 20
    prints = [c.fingerprint for c in expansion.children]
    assert len(set(prints)) == len(prints) and root.fingerprint not in prints
    for child in expansion.children:
        assert child.parent == root.fingerprint and child.depth == 1 and len(child.schedule) == 1
        assert child.fingerprint == sha256_text(child.c_source)
    for child in expansion.children[::10]:  # replaying from scratch gives the same C
        assert kernel_c(build_proc(small, child.schedule)) == child.c_source


def test_duplicates_of_the_parent_are_dropped_and_counted(small):
    expander = Expander(small)
    root = root_candidate(small)
    simplified = next(c for c in expander.expand(root).children if c.schedule.steps == (SIMPLIFY,))
    expansion = expander.expand(simplified)
    # simplifying again gives the parent's own C: dropped, counted as a duplicate
    assert expansion.duplicates >= 1
    assert all(c.schedule.steps[-1] != SIMPLIFY for c in expansion.children)
    assert all(c.depth == 2 and c.parent == simplified.fingerprint for c in expansion.children)


def test_expander_caches_procs_by_schedule(small):
    expander = Expander(small)
    child = expander.expand(root_candidate(small)).children[0]
    assert expander.proc_for(child.schedule) is expander.proc_for(child.schedule)
    assert proc_text(expander.proc_for(child.schedule)) == child.proc_text


def test_bad_parent_is_reported_not_raised(small):
    bad = Candidate(
        schedule=Schedule((Rewrite.make(RewriteKind.UNROLL, "nosuchloop #0"),)),
        c_source="",
        fingerprint="f" * 64,
        proc_text="",
    )
    expansion = Expander(small).expand(bad)
    assert expansion.children == ()
    assert "step 0" in expansion.error and "nosuchloop" in expansion.error


def test_fresh_expander_pickles(small):
    # Ray ships the expander (or its arguments) to workers: only plain records inside.
    again = pickle.loads(pickle.dumps(Expander(small, ExpandOptions(max_unroll=8))))
    assert again.workload == small and again.options.max_unroll == 8


@pytest.mark.parametrize("path", [PATH_8X32, PATH_8X8], ids=["8x32", "8x8"])
def test_fast_sgemm_schedule_is_reachable_step_by_step(path):
    workload = load_workload(MATMUL, "sgemm", {"M": 512, "N": 512, "K": 512})
    proc = build_proc(workload)
    for step in path:
        assert step in propose(proc, ExpandOptions()), step.describe()
        proc = try_apply(proc, step)
        assert proc is not None, step.describe()
    assert kernel_c(proc) == kernel_c(build_proc(workload, Schedule(path)))
    text = " ".join(str(proc).split())
    fa, fb = path[0].arg("fa"), path[0].arg("fb")
    assert f"C_stage: f32[{fa}, {fb}] @ DRAM_STACK" in text
    assert "for k in seq(0, 512)" in text
    # the innermost loop runs over contiguous columns of the staged tile and of B
    c = kernel_c(proc)
    assert f"float C_stage[{fa} * {fb}];" in c
    assert f"B[k * 512 + ji + {fb} * jo]" in c


@pytest.mark.slow
def test_expander_generates_the_fast_path(small):
    expander = Expander(small)
    parent = root_candidate(small)
    for step in PATH_8X8:
        children = {c.schedule.steps[-1]: c for c in expander.expand(parent).children}
        assert step in children, step.describe()
        parent = children[step]
    assert parent.depth == len(PATH_8X8)
    assert "float C_stage[8 * 8];" in parent.c_source


@pytest.mark.parametrize("shards,lead", [(2, 0), (3, 0), (3, 1), (6, 2)])
def test_shards_of_one_expansion_merge_into_the_unsharded_one(small, shards, lead):
    root = root_candidate(small)
    # a node whose rewrites include duplicates across shards: two reorders of a tiled nest
    # can give the same C as a split elsewhere
    parent = Expander(small).expand(root).children[0]
    alone = Expander(small).expand(parent)
    parts = [Expander(small).expand(parent, shard, shards, lead) for shard in range(shards)]
    assert all(len(part.children) < len(alone.children) for part in parts)
    merged = Expansion.merge(parts)
    assert [c.fingerprint for c in merged.children] == [c.fingerprint for c in alone.children]
    assert merged.order == alone.order
    assert (merged.attempted, merged.illegal, merged.duplicates) == (alone.attempted, alone.illegal, alone.duplicates)


def test_one_expander_proposes_once_for_all_the_shards_of_a_parent_it_is_dealt(small, monkeypatch):
    """A worker dealt several shards of one parent proposes its rewrites once: each shard
    used to propose them all again, 20 times for a leading model's expansion. What the
    shards give together is still the unsharded expansion."""
    import schedsearch.transforms.expand as expand_module

    real = expand_module.propose
    calls: list[int] = []

    def counted(proc, options=ExpandOptions()):
        calls.append(1)
        return real(proc, options)

    monkeypatch.setattr(expand_module, "propose", counted)
    root = root_candidate(small)
    worker = Expander(small)
    parent = worker.expand(root).children[0]
    assert len(calls) == 1
    parts = [worker.expand(parent, shard, 4, 1) for shard in range(4)]
    assert len(calls) == 2  # the root's, then the parent's once
    worker.expand(parent, 0, 4, 1, ExpansionPart.FIRST)  # another part of a kept parent: no new proposal
    assert len(calls) == 2
    alone = Expander(small).expand(parent)
    assert [c.fingerprint for c in Expansion.merge(parts).children] == [c.fingerprint for c in alone.children]


def test_each_shard_says_how_many_shards_lead_and_whether_it_is_one(small, monkeypatch):
    """A sharded expansion's shards each say how many shards hold one heavy rewrite alone
    (``Expansion.leads``) and whether they are one (``leading``); merged, the count stays.
    Splits stand in for register tiles here (heavy for this test): they cost little."""
    import types

    import schedsearch.transforms.expand as expand_module

    real = expand_module.rule_for

    def rule_for(kind):
        rule = real(kind)
        return types.SimpleNamespace(heavy=kind is RewriteKind.SPLIT, deferred=rule.deferred)

    monkeypatch.setattr(expand_module, "rule_for", rule_for)
    root = root_candidate(small)
    parts = [Expander(small).expand(root, shard, 6, lead=2) for shard in range(6)]
    assert [p.leads for p in parts] == [2] * 6
    assert [p.leading for p in parts] == [True, True, False, False, False, False]
    assert all(len(p.children) == 1 and p.children[0].schedule.steps[-1].kind is RewriteKind.SPLIT
               for p in parts[:2])
    assert Expansion.merge(parts).leads == 2
    plain = [Expander(small).expand(root, shard, 3) for shard in range(3)]
    assert [(p.leads, p.leading) for p in plain] == [(0, False)] * 3


def _kinds(*kinds: RewriteKind) -> list[Rewrite]:
    return [Rewrite(kind, f"i #{n}", ()) for n, kind in enumerate(kinds)]


def test_shards_are_dealt_round_robin_without_leading_shards():
    rewrites = _kinds(*[RewriteKind.SPLIT] * 7)
    assert [dealt(rewrites, s, 3) for s in range(3)] == [[0, 3, 6], [1, 4], [2, 5]]


def test_leading_shards_hold_one_heavy_rewrite_each_in_proposal_order():
    S, T = RewriteKind.SPLIT, RewriteKind.REGISTER_TILE
    rewrites = _kinds(S, S, T, S, T, T, S, T, S)  # tiles at 2, 4, 5, 7
    parts = [dealt(rewrites, s, 6, lead=2) for s in range(6)]
    assert parts[:2] == [[2], [4]]  # the first two tiles, alone
    assert sorted(p for part in parts for p in part) == list(range(len(rewrites)))  # each once
    assert max(map(len, parts[2:])) - min(map(len, parts[2:])) <= 1  # the rest evenly
    # fewer heavy rewrites than leading shards: only as many lead, the rest share the others
    few = _kinds(T, S, S, S)
    assert [dealt(few, s, 3, lead=2) for s in range(3)] == [[0], [1, 3], [2]]
    # none heavy, or no shard left over for the rest: plain dealing
    assert [dealt(_kinds(S, S, S), s, 2, lead=1) for s in range(2)] == [[0, 2], [1]]
    assert [dealt(_kinds(T, T, S), s, 2, lead=2) for s in range(2)] == [[0, 2], [1]]


def test_an_expansion_says_how_many_steps_it_replayed(small):
    expander = Expander(small)
    child = expander.expand(root_candidate(small)).children[0]
    grandchild = expander.expand(child).children[0]
    assert expander.expand(child).replayed == 0  # made here: its proc is cached
    fresh = Expander(small)
    assert fresh.expand(grandchild).replayed == 2  # rebuilt from the source, both steps
    assert fresh.expand(grandchild).replayed == 0
    parts = [Expander(small).expand(grandchild, shard, 2) for shard in range(2)]
    assert Expansion.merge(parts).replayed == 4


def test_a_large_parents_rewrites_split_into_a_cheap_and_a_costly_part():
    R, P, S, H, U = RewriteKind.REORDER, RewriteKind.PACK, RewriteKind.SPLIT, RewriteKind.HOIST, RewriteKind.UNROLL
    rewrites = _kinds(S, R, P, S, H, U)
    first = in_part(rewrites, ExpansionPart.FIRST, large=True)
    later = in_part(rewrites, ExpansionPart.DEFERRED, large=True)
    assert first == [0, 3, 5] and later == [1, 2, 4]
    assert in_part(rewrites, ExpansionPart.ALL, large=True) == list(range(6))
    # a small parent is expanded whole in its first part, and has no second one
    assert in_part(rewrites, ExpansionPart.FIRST, large=False) == list(range(6))
    assert in_part(rewrites, ExpansionPart.DEFERRED, large=False) == []
    # dealt shares out only the part's rewrites
    assert sorted(p for s in range(2) for p in dealt(rewrites, s, 2, pool=later)) == later


def test_proc_statements_counts_body_lines_only(small):
    text = proc_text(build_proc(small, Schedule()))
    assert proc_statements(text) == 4  # three loops and the update
    assert proc_statements("def f(x: f32):\n    assert N >= 1\n    pass\n") == 1


@pytest.mark.slow
def test_the_two_parts_of_a_large_parents_expansion_give_what_one_expansion_gives(small):
    expander, root = Expander(small), root_candidate(small)
    first_of_root = expander.expand(root, part=ExpansionPart.FIRST)
    assert first_of_root.deferred == 0  # the unscheduled proc is small: one part has it all
    assert [c.fingerprint for c in first_of_root.children] == [c.fingerprint for c in expander.expand(root).children]
    large = [c for c in first_of_root.children if proc_statements(c.proc_text) >= DEFER_FROM_STATEMENTS]
    tiled = min(large, key=lambda c: proc_statements(c.proc_text))  # an unrolled nest, the cheapest
    whole = expander.expand(tiled)
    first = expander.expand(tiled, part=ExpansionPart.FIRST)
    later = expander.expand(tiled, part=ExpansionPart.DEFERRED)
    assert first.deferred > 0 and later.attempted == first.deferred
    assert first.attempted + later.attempted == whole.attempted
    assert all(not rule_for(c.schedule.steps[-1].kind).deferred for c in first.children)
    assert later.children and all(rule_for(c.schedule.steps[-1].kind).deferred for c in later.children)
    assert {c.fingerprint for c in first.children} | {c.fingerprint for c in later.children} == \
        {c.fingerprint for c in whole.children}
