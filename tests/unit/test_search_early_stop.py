"""``SearchConfig.early_stop``: a search ends once that many candidates in a row brought no
new best beyond the timing noise (run_search over the simulated executor, no exo/cc/ray)."""

from __future__ import annotations

from dataclasses import dataclass

from schedsearch.core import CandidateRecord, EventKind, SearchConfig, SearchEvent, SearchStatus, Status
from schedsearch.numbers import Ending, ending, within_noise
from schedsearch.search import make_strategy, run_search
from schedsearch.store import InMemoryStore
from schedsearch.testing.fake_executor import FakeExecutor
from schedsearch.testing.fake_tree import FakeTree, fake_inherited, fake_root, fake_workload


def config(**kw) -> SearchConfig:
    kw.setdefault("max_seconds", None)
    kw.setdefault("max_candidates", 400)
    return SearchConfig(**kw)


def search(cfg: SearchConfig, tree: FakeTree | None = None, store: InMemoryStore | None = None, **kw):
    store = store if store is not None else InMemoryStore()
    events: list[SearchEvent] = []
    if kw.get("search_id") is not None and "inherited" not in kw:  # a resume rebuilds the stored rows it builds
        kw["inherited"] = fake_inherited(store, kw["search_id"], cfg)
    outcome = run_search(fake_workload(), fake_root(), make_strategy(cfg), FakeExecutor(tree or FakeTree(moves=9)),
                         store, cfg, events.append, **kw)
    return outcome, store, events


def streak(evaluated: list[CandidateRecord]) -> tuple[int, int]:
    """(the measurements since the best last moved beyond noise, the new bests among them)
    recomputed from the evaluated records in the order they were announced."""
    since = ties = 0
    best: CandidateRecord | None = None
    start = None
    for r in evaluated:
        if r.status is not Status.OK or r.seconds is None:
            since += 1
            continue
        if best is None or r.seconds < best.seconds:
            best = r
            if start is None or within_noise(start, r.timing) is not True:
                start, since, ties = r.timing, 0, 0
                continue
            ties += 1
        since += 1
    return since, ties


def test_a_search_ends_once_n_candidates_in_a_row_bring_no_new_best() -> None:
    cfg = config(early_stop=6)
    outcome, store, events = search(cfg)
    assert outcome.status is SearchStatus.COMPLETED
    search_row = store.get_search(outcome.search_id)
    assert ending(search_row) is Ending.STOPPED_IMPROVING
    evaluated = [e.record for e in events if e.kind is EventKind.EVALUATED and e.record is not None]
    since, _ = streak(evaluated)
    assert outcome.counters.since_best == since == search_row.counters.since_best
    # It stops at the first poll that reaches 6: measurements already in flight are kept.
    assert 6 <= since < 6 + 2 * cfg.workers
    assert outcome.counters.evaluated < cfg.max_candidates
    # Without it the same search goes on measuring.
    longer, _, _ = search(config())
    assert longer.counters.evaluated > outcome.counters.evaluated


@dataclass(frozen=True)
class CreepingTree(FakeTree):
    """Every node one level deeper is 0.1% faster than the level above: a new best at each
    level, each within the fakes' 2% timing spread of the one before (the root is twice as
    slow: its children are a real step)."""

    def seconds(self, label: str) -> float:
        if not label:
            return 2 * self.base_seconds
        return self.base_seconds * (1 - 0.001 * len(label.split("+")))


def test_near_ties_that_take_the_lead_within_noise_do_not_reset_the_count() -> None:
    tree = CreepingTree(moves=9, failure_rate=0.0)
    outcome, store, events = search(config(early_stop=8), tree)
    assert ending(store.get_search(outcome.search_id)) is Ending.STOPPED_IMPROVING
    evaluated = [e.record for e in events if e.kind is EventKind.EVALUATED and e.record is not None]
    since, ties = streak(evaluated)
    assert since == outcome.counters.since_best >= 8
    assert ties >= 1, "a new best within noise came during the run of measurements it did not end"
    news = [e for e in events if e.kind is EventKind.NEW_BEST]
    assert len(news) >= 1 + ties  # the real step, then the ties


def test_a_resumed_search_that_stopped_improving_searches_on() -> None:
    store = InMemoryStore()
    first, _, _ = search(config(early_stop=5, max_candidates=60), store=store)
    assert ending(store.get_search(first.search_id)) is Ending.STOPPED_IMPROVING
    measured = first.counters.measured
    # Resumed with more candidates: the run of measurements starts again from the best so
    # far, so it measures at least five more instead of stopping at once.
    again, _, _ = search(config(early_stop=5, max_candidates=measured + 30), store=store, search_id=first.search_id)
    assert again.status is SearchStatus.COMPLETED
    assert again.counters.measured >= measured + 5


def test_without_early_stop_the_ending_is_the_budget_or_the_limit() -> None:
    outcome, store, _ = search(config(max_candidates=25))
    assert ending(store.get_search(outcome.search_id)) is Ending.CANDIDATE_LIMIT


def test_a_resume_stores_the_limits_it_runs_with_but_not_its_own_remeasure() -> None:
    store = InMemoryStore()
    first, _, _ = search(config(early_stop=5, max_candidates=60), store=store)
    resumed = config(early_stop=3, max_candidates=first.counters.measured + 30, remeasure=True)
    again, _, _ = search(resumed, store=store, search_id=first.search_id)
    stored = store.get_search(again.search_id)
    assert (stored.config.early_stop, stored.config.max_candidates) == (3, resumed.max_candidates)
    assert stored.config.remeasure is False  # a resume's --remeasure is for that run alone
    assert ending(stored) is Ending.STOPPED_IMPROVING and 3 <= stored.counters.since_best < 5
