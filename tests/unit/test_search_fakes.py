"""The simulation runner itself: deterministic, order-insensitive duplicates, protocol shape."""

from __future__ import annotations

from schedsearch.core import Executor, Status
from schedsearch.testing.fake_executor import FakeExecutor
from schedsearch.testing.fake_tree import FakeTree, fake_root, fake_workload, fingerprint_of, label_of


def test_fake_executor_is_an_executor() -> None:
    assert isinstance(FakeExecutor(), Executor)


def test_tree_is_deterministic_and_reports_illegal_and_duplicates() -> None:
    tree = FakeTree(moves=5, branching=3, illegal_per_expand=2)
    a, b = tree.expand(fake_root()), tree.expand(fake_root())
    assert a == b
    assert len(a.children) == 3 and a.illegal == 2 and a.duplicates == 1
    assert all(c.depth == 1 and c.parent == fake_root().fingerprint for c in a.children)


def test_the_same_moves_in_another_order_have_the_same_fingerprint() -> None:
    tree = FakeTree(moves=4, branching=3)
    grandchildren = [g for c in tree.expand(fake_root()).children for g in tree.expand(c).children]
    labels = [label_of(g.schedule) for g in grandchildren]
    assert len(set(labels)) < len(labels)  # e.g. m1+m2 reached from m1 and from m2
    for g in grandchildren:
        assert g.fingerprint == fingerprint_of(label_of(g.schedule))


def test_measurements_follow_overrides_and_record_calls() -> None:
    tree = FakeTree(times={"": 2e-3}, statuses={"m1": Status.TIMEOUT}, remeasure_times={"": 3e-3})
    ex = FakeExecutor(tree)
    root = fake_root()
    (m,) = list(ex.evaluate(fake_workload(), root, [root]))
    assert m.status is Status.OK and m.seconds == 2e-3
    assert ex.remeasure(fake_workload(), root, [root])[0].seconds == 3e-3
    assert tree.status("m1") is Status.TIMEOUT
    assert ex.evaluated == [root.fingerprint] and ex.remeasured == [[root.fingerprint]]
