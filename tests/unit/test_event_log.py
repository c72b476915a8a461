"""The event log (``run --events``): one JSON line per event but ticks, each flushed as
written, and the rounds asked - second parts named - as the search made them."""

from __future__ import annotations

import io
import json

from schedsearch.app.event_log import EventLog
from schedsearch.core import ExpansionPart, SearchConfig
from schedsearch.search import make_strategy, run_search
from schedsearch.store import InMemoryStore
from schedsearch.testing.fake_executor import FakeClock, FakeExecutor
from schedsearch.testing.fake_tree import FakeTree, fake_root, fake_workload


class _Counted(io.StringIO):
    """A stream that counts flushes: each line must reach the file as it is written."""

    flushes = 0

    def flush(self) -> None:
        self.flushes += 1
        super().flush()


def test_a_search_writes_every_event_but_ticks_and_names_each_rounds_parts() -> None:
    tree = FakeTree(moves=9, branching=6, failure_rate=0.1, seed=2, costly_every=3)
    stream = _Counted()
    log = EventLog(stream)
    seen = []
    clock = FakeClock()
    ex = FakeExecutor(tree, clock=clock, eval_seconds=0.7, expand_seconds=2.0)
    cfg = SearchConfig(max_seconds=None, max_candidates=40, seed=1)
    store = InMemoryStore()

    def observe(event) -> None:
        seen.append(event)
        log(event)

    outcome = run_search(fake_workload(), fake_root(tree.moves), make_strategy(cfg), ex, store, cfg,
                         on_event=observe, clock=clock)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert any(e.kind.value == "tick" for e in seen)  # the fake clock's waits made ticks ...
    assert [e.kind.value for e in seen if e.kind.value != "tick"] == [line["kind"] for line in lines]  # ... left out
    assert stream.flushes == len(lines)
    asked = [line["message"] for line in lines if line["kind"] == "asked"]
    assert len(asked) == len(ex.expand_calls)
    by_fp = {r.fingerprint: r for r in store.candidates(outcome.search_id)}
    for message, call in zip(asked, ex.expand_calls, strict=True):
        named = message.split(": expanding ", 1)[1].split(", ")
        assert [int(n.split()[0][1:]) for n in named] == [by_fp[fp].id for fp in call]
    second = {by_fp[fp].id for fp, part in ex.parts_asked if part is ExpansionPart.DEFERRED}
    named_second = {int(n.split()[0][1:]) for m in asked for n in m.split(": expanding ", 1)[1].split(", ")
                    if n.endswith("(its costly rewrites)")}
    assert second and second == named_second
    evaluated = [line for line in lines if line["kind"] == "evaluated"]
    assert evaluated and all(line["record"]["step"].startswith("split m") for line in evaluated)
    assert {line["record"]["status"] for line in evaluated} >= {"ok"}
