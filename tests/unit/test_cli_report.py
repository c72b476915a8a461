"""``schedsearch run`` reports a search before it releases the workers: shutting a private
Ray cluster down takes seconds, and the user should not wait for it to read the results."""

from __future__ import annotations

import pytest

from schedsearch.app import SearchRunner, SearchSession
from schedsearch.cli import commands_run
from schedsearch.core import SearchConfig, SearchStatus
from schedsearch.store import InMemoryStore
from schedsearch.testing.fakes import FakeExecutor, FakeTree, fake_root, fake_workload


class _Released(FakeExecutor):
    """A fake executor that notes when it is released."""

    def __init__(self, tree: FakeTree, order: list[str]) -> None:
        super().__init__(tree)
        self._order = order

    def close(self) -> None:
        self._order.append("workers released")


def _session(order: list[str], monkeypatch: pytest.MonkeyPatch) -> SearchSession:
    tree = FakeTree(moves=6, branching=4, seed=3)
    config = SearchConfig(max_seconds=None, max_candidates=12, seed=0, warm_start=False)
    session = SearchSession(fake_workload(), fake_root(tree.moves), config, InMemoryStore())
    monkeypatch.setattr(session, "runner", lambda address=None: SearchRunner(session, _Released(tree, order), None))
    return session


def test_the_summary_and_the_json_come_before_the_workers_are_released(monkeypatch, capsys) -> None:
    order: list[str] = []
    session = _session(order, monkeypatch)
    report = commands_run._report

    def noted(*args, **kwargs) -> None:
        report(*args, **kwargs)
        order.append("reported")

    monkeypatch.setattr(commands_run, "_report", noted)
    commands_run._drive(session, None, None, as_json=True)
    assert order == ["reported", "workers released"]
    out, err = capsys.readouterr()
    assert '"search_id"' in out and "completed" in err
    assert session.store.get_search(session.search_id).status is SearchStatus.COMPLETED
