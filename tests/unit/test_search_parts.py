"""Two-part expansions on fakes: a parent's costly rewrites wait until the search picks it
again, its children are all measured, it is marked expanded only after both parts, and the
same seed still gives the same search whatever order the work completes in."""

from __future__ import annotations

import dataclasses

import pytest

from schedsearch.core import Candidate, CostModelMode, ExpansionPart, SearchConfig, Status
from schedsearch.search import make_strategy, run_search
from schedsearch.store import InMemoryStore
from schedsearch.testing.fake_executor import FakeExecutor
from schedsearch.testing.fake_model import FakeCostModel, oracle
from schedsearch.testing.fake_tree import FakeTree, fake_root, fake_workload, label_of

TREE = FakeTree(moves=9, branching=6, failure_rate=0.0, features=True, seed=2, costly_every=3)


def _search(tree: FakeTree = TREE, shuffle: int | None = None, **kw):
    cfg = SearchConfig(max_seconds=None, max_candidates=kw.pop("max_candidates", 60), seed=5, **kw)
    ex = FakeExecutor(tree, shuffle_seed=shuffle)
    store = InMemoryStore()
    model = FakeCostModel(oracle(tree)) if cfg.cost_model is not CostModelMode.OFF else None
    outcome = run_search(fake_workload(), fake_root(tree.moves), make_strategy(cfg), ex, store, cfg, cost_model=model)
    return outcome, store, ex


@pytest.mark.parametrize("mode", [CostModelMode.RANK, CostModelMode.OFF])
def test_a_parents_costly_rewrites_come_in_its_second_expansion(mode: CostModelMode) -> None:
    outcome, store, ex = _search(cost_model=mode)
    asked = ex.parts_asked
    firsts = [fp for fp, part in asked if part is ExpansionPart.FIRST]
    seconds = [fp for fp, part in asked if part is ExpansionPart.DEFERRED]
    assert seconds, "no parent was picked again for its costly rewrites"
    assert ExpansionPart.ALL not in {part for _, part in asked}
    assert len(set(firsts)) == len(firsts) and len(set(seconds)) == len(seconds)  # each part once
    for fp in seconds:  # always after the first part
        assert asked.index((fp, ExpansionPart.FIRST)) < asked.index((fp, ExpansionPart.DEFERRED))
    rows = store.candidates(outcome.search_id)
    by_id = {r.id: r for r in rows}
    for r in rows:
        if r.parent_id is None:
            continue
        move = r.schedule.steps[-1].target  # the rewrite applied to its parent (labels are sorted)
        if TREE.costly(move):  # a costly child exists only where its parent's second part was asked
            assert by_id[r.parent_id].fingerprint in seconds


def _left_costly(r) -> bool:
    """Whether the first part of the stored candidate ``r`` left costly rewrites for a second."""
    parent = Candidate(schedule=r.schedule, c_source=r.c_source, fingerprint=r.fingerprint, proc_text="", depth=r.depth)
    return TREE.expand(parent, ExpansionPart.FIRST).deferred > 0


def test_a_parent_is_marked_expanded_only_once_its_second_part_is_measured() -> None:
    outcome, store, ex = _search(max_candidates=80)
    rows = {r.fingerprint: r for r in store.candidates(outcome.search_id)}
    seconds = {fp for fp, part in ex.parts_asked if part is ExpansionPart.DEFERRED}
    expanded = {fp for fp, r in rows.items() if r.expanded}

    def left_costly(fp: str) -> bool:  # its first part left costly rewrites for a second one
        return _left_costly(rows[fp])

    waiting = {fp for fp, part in ex.parts_asked if part is ExpansionPart.FIRST and left_costly(fp)} - seconds
    assert waiting and not (expanded & waiting)  # the costly part is still to come: a resume does it
    assert expanded & seconds
    assert all(fp in seconds or not left_costly(fp) for fp in expanded)


def test_without_costly_rewrites_a_parent_is_expanded_once() -> None:
    tree = dataclasses.replace(TREE, costly_every=0)
    outcome, store, ex = _search(tree)
    assert {part for _, part in ex.parts_asked} == {ExpansionPart.FIRST}
    fps = [fp for fp, _ in ex.parts_asked]
    assert len(fps) == len(set(fps))
    assert any(r.expanded for r in store.candidates(outcome.search_id))


def test_defer_costly_off_expands_every_parent_whole() -> None:
    outcome, store, ex = _search(defer_costly=False)
    assert {part for _, part in ex.parts_asked} == {ExpansionPart.ALL}
    rows = store.candidates(outcome.search_id)
    assert any(TREE.costly(label_of(r.schedule).split("+")[-1]) for r in rows if r.depth == 1)


def test_a_leading_model_expands_its_pick_whole() -> None:
    """A leading model's one parent a round comes with its costly rewrites: its children of
    both parts are measured from the first round it is expanded in."""
    outcome, store, ex = _search(cost_model=CostModelMode.RANK, model_leads=True)
    assert {part for _, part in ex.parts_asked} == {ExpansionPart.ALL}
    fps = [fp for fp, _ in ex.parts_asked]
    assert len(fps) == len(set(fps))  # each parent once
    rows = store.candidates(outcome.search_id)
    assert any(TREE.costly(label_of(r.schedule).split("+")[-1]) for r in rows if r.depth == 1)
    # The same options without a leading model defer them.
    assert ExpansionPart.DEFERRED in {part for _, part in _search(cost_model=CostModelMode.RANK)[2].parts_asked}


@pytest.mark.parametrize("mode", [CostModelMode.RANK, CostModelMode.OFF])
def test_two_part_searches_are_reproducible_whatever_the_completion_order(mode: CostModelMode) -> None:
    runs = []
    for shuffle in (1, 2, 3):
        outcome, store, ex = _search(shuffle=shuffle, cost_model=mode)
        runs.append(([(r.id, r.fingerprint) for r in store.candidates(outcome.search_id)
                      if r.status is not Status.PENDING], ex.parts_asked, ex.evaluated))
    assert runs[0][2] != runs[1][2]  # completion order really differed
    assert any(part is ExpansionPart.DEFERRED for _, part in runs[0][1])
    assert runs[0][:2] == runs[1][:2] == runs[2][:2]


@pytest.mark.parametrize("flag,expected", [((), True), (("--no-defer-costly",), False), (("--defer-costly",), True)])
def test_the_run_command_and_tune_pass_defer_costly_on(monkeypatch, tmp_path, flag, expected) -> None:
    from click.testing import CliRunner

    from schedsearch.app.settings import SearchSettings
    from schedsearch.cli import commands_run
    from schedsearch.cli.main import cli

    seen = {}
    monkeypatch.setattr(commands_run, "run_command", lambda *a, **kw: seen.update(kw))
    workload = tmp_path / "k.py"
    workload.write_text("")
    result = CliRunner().invoke(cli, ["run", str(workload), *flag])
    assert result.exit_code == 0, result.output
    assert seen["defer_costly"] is expected
    settings = SearchSettings(defer_costly=expected, target="scalar")
    assert settings.config().defer_costly is expected
