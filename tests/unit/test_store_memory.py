"""The store contract against the in-memory twin."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from schedsearch.store import InMemoryStore, open_store
from schedsearch.testing.store_contract import StoreContract, make_candidate, make_config, make_machine, make_workload


class TestInMemoryStore(StoreContract):
    @pytest.fixture
    def store(self) -> Iterator[InMemoryStore]:
        s = InMemoryStore()
        yield s
        s.close()

    @pytest.fixture
    def second(self, store: InMemoryStore) -> InMemoryStore:
        return store.twin()


@pytest.mark.parametrize("name", ["memory", ":memory:"])
def test_open_store_memory_names(name: str) -> None:
    store = open_store(name)
    assert isinstance(store, InMemoryStore)
    sid = store.create_search(make_workload(), make_config(), make_machine())
    assert store.add_candidate(sid, make_candidate("root")).id == 1


def test_close_forgets_everything() -> None:
    store = InMemoryStore()
    store.create_search(make_workload(), make_config(), make_machine())
    store.close()
    assert store.list_searches() == []
