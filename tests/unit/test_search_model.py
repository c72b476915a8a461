"""The cost model in the search, on fakes: measuring order, seeded exploration, pruning,
accuracy, strategies ranking with predictions, and measured_at."""

from __future__ import annotations

import dataclasses
import math
import random

import pytest

from schedsearch.core import CandidateRecord, CostModelMode, JobKind, SearchConfig, Status, StrategyKind, Timing
from schedsearch.search import BestFirst, make_strategy, run_search
from schedsearch.search.ranking import (
    budget_is_short, concordance, kept_after_pruning, measuring_order, repeatability, span, spearman,
)
from schedsearch.store import InMemoryStore
from schedsearch.testing.fake_executor import FakeClock, FakeExecutor
from schedsearch.testing.fake_model import FakeCostModel, oracle
from schedsearch.testing.fake_tree import FakeTree, fake_root, fake_workload, label_of

TREE = FakeTree(moves=9, branching=6, failure_rate=0.0, features=True, seed=2)


def _search(mode: CostModelMode, model=None, *, tree: FakeTree = TREE, seed: int = 0, clock=None, **kw):
    cfg = SearchConfig(max_seconds=kw.pop("max_seconds", None), max_candidates=kw.pop("max_candidates", 40),
                       cost_model=mode, seed=seed, **kw)
    ex = FakeExecutor(tree, clock=clock, eval_seconds=0.5 if clock else 0.0)
    store = InMemoryStore()
    extra = {"clock": clock} if clock else {}
    outcome = run_search(fake_workload(), fake_root(tree.moves), make_strategy(cfg), ex, store, cfg,
                         cost_model=model, **extra)
    return outcome, store, ex


def test_measuring_order_is_by_prediction_and_seeded() -> None:
    predictions = [0.5, -1.0, 0.0, 2.0, -0.5, 1.0] * 5
    assert measuring_order(predictions, random.Random(1), explore=0.0) == sorted(
        range(30), key=lambda i: (predictions[i], i))
    first = measuring_order(predictions, random.Random(7))
    assert first == measuring_order(predictions, random.Random(7))  # same seed, same order
    assert sorted(first) == list(range(30))
    assert any(measuring_order(predictions, random.Random(s)) != first for s in range(8, 12))


def test_children_are_measured_predicted_fastest_first() -> None:
    model = FakeCostModel(oracle(TREE))
    _, store, ex = _search(CostModelMode.RANK, model, max_candidates=7)
    children = [fp for fp in ex.evaluated[1:]]  # the root's six children
    records = {r.fingerprint: r for r in store.candidates(1)}
    predicted = [records[fp].predicted for fp in children]
    assert None not in predicted
    # A perfect model and 10% exploration: mostly ascending; the first is the best guess or a random pick.
    inversions = sum(a > b for a, b in zip(predicted, predicted[1:]))
    assert inversions <= 1
    truth = [math.log(TREE.seconds(label_of(records[fp].schedule)) / TREE.seconds("")) for fp in children]
    assert predicted == pytest.approx(truth)


class CandidateModel(FakeCostModel):
    """A ``core.CandidateCostModel``: it reads each child's schedule, not its features."""

    def __init__(self, tree: FakeTree) -> None:
        super().__init__(lambda f: 0.0)
        self.tree = tree
        self.candidates: list[str] = []

    def predict_candidates(self, candidates) -> list[float]:
        self.candidates += [c.fingerprint for c in candidates]
        return [-math.log(self.tree.seconds("") / self.tree.seconds(label_of(c.schedule))) for c in candidates]


def test_a_model_that_reads_candidates_is_asked_with_them() -> None:
    model = CandidateModel(TREE)
    _, store, ex = _search(CostModelMode.RANK, model, max_candidates=7)
    assert model.predicted == []  # never asked with features alone
    children = ex.evaluated[1:]
    assert set(children) <= set(model.candidates)
    records = {r.fingerprint: r for r in store.candidates(1)}
    truth = [math.log(TREE.seconds(label_of(records[fp].schedule)) / TREE.seconds("")) for fp in children]
    assert [records[fp].predicted for fp in children] == pytest.approx(truth)


def test_off_measures_in_proposal_order_and_never_asks_the_model() -> None:
    model = FakeCostModel(oracle(TREE))
    _, store, ex = _search(CostModelMode.OFF, model)
    _, _, plain = _search(CostModelMode.OFF, None)
    assert ex.evaluated == plain.evaluated
    assert model.predicted == [] and model.observed == []
    assert all(r.predicted is None for r in store.candidates(1))


def test_a_search_with_the_model_is_reproducible() -> None:
    runs = [_search(CostModelMode.RANK, FakeCostModel(oracle(TREE)), seed=5, max_candidates=60)[2].evaluated
            for _ in range(2)]
    assert runs[0] == runs[1]
    other = _search(CostModelMode.RANK, FakeCostModel(oracle(TREE)), seed=6, max_candidates=60)[2].evaluated
    assert other != runs[0]  # the seed drives the exploration picks


def test_the_model_learns_every_ok_measurement_and_accuracy_is_recorded() -> None:
    model = FakeCostModel(oracle(TREE))
    outcome, store, _ = _search(CostModelMode.RANK, model, max_candidates=40)
    assert len(model.observed) == outcome.counters.ok == 40
    assert model.observed[0].log_ratio == 0.0  # the root, relative to itself
    accuracy = store.get_search(outcome.search_id).model_accuracy
    assert accuracy is not None and accuracy.pairs == 39 and accuracy.trained_on == 40
    assert accuracy.spearman == pytest.approx(1.0)
    # The fake's timings (±1%) are told apart wherever their times differ by more than that.
    assert accuracy.concordance == pytest.approx(1.0) and accuracy.distinct_pairs > 100
    assert accuracy.span is not None and accuracy.span > 1.0


def test_every_prediction_after_the_settling_count_is_scored(monkeypatch: pytest.MonkeyPatch) -> None:
    from schedsearch.search import ranking

    monkeypatch.setattr(ranking, "SETTLED_AFTER", 25)
    truth = oracle(TREE)
    outcome, store, _ = _search(CostModelMode.RANK, FakeCostModel(truth), max_candidates=40)
    accuracy = store.get_search(outcome.search_id).model_accuracy
    # 40 measurements: the 26th to the 40th were predicted after the first 25
    assert accuracy.settled_after == 25 and accuracy.settled_pairs == 15
    assert accuracy.settled_spearman == pytest.approx(1.0) and accuracy.settled_span > 1.0
    # The fake's timings spread ±1% around times further apart: they would rank themselves again.
    assert accuracy.settled_repeat is not None and accuracy.settled_repeat > 0.9
    poor = _search(CostModelMode.RANK, FakeCostModel(lambda f: -truth(f)), max_candidates=40)
    assert poor[1].get_search(poor[0].search_id).model_accuracy.settled_spearman == pytest.approx(-1.0)
    monkeypatch.setattr(ranking, "SETTLED_AFTER", 40)
    short = _search(CostModelMode.RANK, FakeCostModel(truth), max_candidates=40)
    unsettled = short[1].get_search(short[0].search_id).model_accuracy
    assert unsettled.settled_pairs == 0 and unsettled.settled_spearman is None
    assert unsettled.settled_repeat is None


def test_a_poor_model_scores_poorly() -> None:
    truth = oracle(TREE)
    outcome, store, _ = _search(CostModelMode.RANK, FakeCostModel(lambda f: -truth(f)), max_candidates=40)
    accuracy = store.get_search(outcome.search_id).model_accuracy
    assert accuracy.spearman == pytest.approx(-1.0)
    assert accuracy.concordance == pytest.approx(0.0)


def test_an_untrained_model_changes_nothing() -> None:
    _, store, ex = _search(CostModelMode.PRUNE, FakeCostModel(oracle(TREE), ready=False), max_candidates=20)
    _, _, plain = _search(CostModelMode.OFF, None, max_candidates=20)
    assert ex.evaluated == plain.evaluated
    assert store.get_search(1).counters.pruned == 0


def test_before_training_a_round_is_ordered_by_the_models_estimate() -> None:
    """A learned model that has not trained yet predicts with its analytic estimate: the
    root's children are measured least work first, and those predictions are recorded."""
    from schedsearch.model import LearnedCostModel

    truth = oracle(TREE)

    def model():
        return LearnedCostModel(background=False, min_samples=10_000, estimate=lambda f: truth(f) / math.log(2))

    _, store, ex = _search(CostModelMode.RANK, model(), max_candidates=7)
    _, _, plain = _search(CostModelMode.OFF, None, max_candidates=7)
    records = {r.fingerprint: r for r in store.candidates(1)}
    keys = [truth(records[fp].features) for fp in ex.evaluated[1:]]
    assert ex.evaluated[1:] != plain.evaluated[1:]  # not proposal order
    inversions = sum(a > b for a, b in zip(keys, keys[1:]))
    assert inversions <= 1  # ascending but for at most one exploration pick
    assert [records[fp].predicted for fp in ex.evaluated[1:]] == pytest.approx(keys)
    assert _search(CostModelMode.RANK, model(), max_candidates=7)[2].evaluated == ex.evaluated


def test_prune_skips_the_predicted_slower_half_when_the_budget_is_short() -> None:
    # 10 candidates left after the root and a first round of 6: the next round's 12 is "short".
    outcome, store, ex = _search(CostModelMode.PRUNE, FakeCostModel(oracle(TREE)), max_candidates=16,
                                 expand_batch=2)
    c = outcome.counters
    assert c.pruned > 0
    stored = store.candidates(outcome.search_id)
    # Pruned children are not stored; every rewrite tried is a duplicate, illegal, or new.
    fresh = c.generated - c.duplicates - c.illegal
    assert len(stored) == 1 + fresh - c.pruned
    ranked = _search(CostModelMode.RANK, FakeCostModel(oracle(TREE)), max_candidates=16, expand_batch=2)[0]
    assert ranked.counters.pruned == 0
    assert outcome.best.seconds <= ranked.best.seconds * 1.0001


def test_budget_is_short_rules() -> None:
    assert budget_is_short(10, seconds_left=None, seconds_per_candidate=None, candidates_left=9)
    assert not budget_is_short(10, seconds_left=None, seconds_per_candidate=None, candidates_left=10)
    assert budget_is_short(10, seconds_left=19.0, seconds_per_candidate=2.0, candidates_left=None)
    assert not budget_is_short(10, seconds_left=21.0, seconds_per_candidate=2.0, candidates_left=None)
    assert not budget_is_short(10, seconds_left=1.0, seconds_per_candidate=None, candidates_left=None)
    assert (kept_after_pruning(10), kept_after_pruning(1), kept_after_pruning(7)) == (5, 1, 4)


def test_measured_at_is_the_searchs_elapsed_time() -> None:
    clock = FakeClock(1000.0)
    _, store, _ = _search(CostModelMode.RANK, FakeCostModel(oracle(TREE)), clock=clock, max_candidates=8)
    measured = [r.measured_at for r in store.candidates(1) if r.status is not Status.PENDING]
    assert measured == [0.5 * (i + 1) for i in range(8)]


def _record(rid: int, seconds: float, predicted: float | None) -> CandidateRecord:
    return CandidateRecord(
        id=rid, search_id=1, parent_id=None, depth=1, schedule=fake_root().schedule, fingerprint=str(rid),
        status=Status.OK, timing=Timing(seconds, seconds, seconds, seconds), speedup=1.0 / seconds,
        predicted=predicted,
    )


def test_best_first_breaks_ties_with_predictions_and_lets_measurements_decide_the_rest() -> None:
    # 1 is measured 1% faster than 2 (within noise), but the model expected 1 to be as slow
    # as the root and 2 to be 4x faster.
    lucky, solid = _record(1, 0.495, math.log(1.0)), _record(2, 0.50, math.log(0.25))
    s = BestFirst(12, explore_every=0, predictions=True)
    for r in (lucky, solid):
        s.tell(r)
    assert [r.id for r in s.ask(2)] == [2, 1]
    # a clear measured win still wins, whatever was predicted
    s2 = BestFirst(12, explore_every=0, predictions=True)
    for r in (lucky, solid, _record(3, 0.40, math.log(1.0))):
        s2.tell(r)
    assert s2.ask(1)[0].id == 3
    # apart by more than the noise, the prediction does not count
    s3 = BestFirst(12, explore_every=0, predictions=True)
    for r in (_record(4, 0.47, math.log(1.0)), solid):
        s3.tell(r)
    assert s3.ask(1)[0].id == 4


def test_beam_ranks_by_measurement() -> None:
    s = make_strategy(SearchConfig(strategy=StrategyKind.BEAM, beam_width=1, cost_model=CostModelMode.RANK))
    s.tell(_record(1, 0.49, math.log(1.0)))
    s.tell(_record(2, 0.50, math.log(0.25)))
    assert [r.id for r in s.ask(2)] == [1]


def test_make_strategy_uses_predictions_unless_off() -> None:
    lucky, solid = _record(1, 0.495, 0.0), _record(2, 0.50, math.log(0.25))
    for mode, first in ((CostModelMode.OFF, 1), (CostModelMode.RANK, 2)):
        s = make_strategy(SearchConfig(strategy=StrategyKind.BEST_FIRST, cost_model=mode))
        s.tell(lucky)
        s.tell(solid)
        assert s.ask(1)[0].id == first


def _timing(median: float, spread: float = 0.02) -> Timing:
    return Timing(median=median, min=median * (1 - spread), q1=median * (1 - spread / 2), q3=median * (1 + spread / 2))


def test_concordance_counts_only_pairs_the_measurements_tell_apart() -> None:
    # 1.00 and 1.01 overlap (±1% each): that pair is noise and not scored either way.
    timings = [_timing(1.0), _timing(1.01), _timing(2.0), _timing(4.0)]
    assert concordance([0.6, 0.5, 1, 2], timings) == (1.0, 5)  # the 1.00/1.01 pair is ordered wrong, unscored
    share, pairs = concordance([3, 2, 1, 0], timings)
    assert pairs == 5 and share == pytest.approx(0.0)
    assert concordance([0, 0, 1, 1], timings)[0] == pytest.approx(4.5 / 5)  # the tied 2.0/4.0 pair counts half
    assert concordance([0, 1], [_timing(1.0), _timing(1.005)]) == (None, 0)


def test_repeatability_is_how_well_the_times_would_rank_themselves_again() -> None:
    apart = [_timing(1.0 + i) for i in range(40)]  # ±1% around times a whole unit apart
    assert repeatability(apart) == pytest.approx(1.0, abs=0.01)
    close = [_timing(1.0 + 0.001 * i, spread=0.2) for i in range(40)]  # ±10% around times 0.1% apart
    assert abs(repeatability(close)) < 0.3
    between = [_timing(1.0 + 0.02 * i, spread=0.2) for i in range(40)]
    assert abs(repeatability(close)) < repeatability(between) < 1.0 - 0.01
    assert repeatability(between) == repeatability(list(between))  # seeded: the same answer
    assert repeatability(between) != repeatability(between, seed=1)
    exact = [Timing(median=1.0 + i, min=1.0 + i, q1=1.0 + i, q3=1.0 + i) for i in range(5)]
    assert repeatability(exact) == pytest.approx(1.0)  # no spread: they rank themselves exactly
    assert repeatability(apart[:2]) is None
    # A long search's many settled times: a sample of them, evenly spaced, answers the same.
    assert repeatability([_timing(1.0 + i) for i in range(5000)]) == pytest.approx(1.0, abs=0.01)


def test_span_is_the_90th_over_the_10th_percentile() -> None:
    assert span([1.0] * 9 + [10.0]) == pytest.approx(1.0)
    assert span([1.0, 2.0, 4.0]) == pytest.approx(4.0)
    assert span([1.0, 2.0]) is None


def test_spearman() -> None:
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 1, 2, 3], [1, 2, 3, 4]) == pytest.approx(0.9486833)
    assert spearman([1, 2], [1, 2]) is None and spearman([1, 1, 1], [1, 2, 3]) is None
    assert dataclasses.is_dataclass(_record(1, 1.0, None))


def _ranked(shuffle_seed: int | None, **kw):
    cfg = SearchConfig(max_seconds=None, max_candidates=kw.pop("max_candidates", 60), cost_model=CostModelMode.RANK,
                       seed=5, **kw)
    ex = FakeExecutor(TREE, shuffle_seed=shuffle_seed)
    store = InMemoryStore()
    outcome = run_search(fake_workload(), fake_root(TREE.moves), make_strategy(cfg), ex, store, cfg,
                         cost_model=FakeCostModel(oracle(TREE)))
    return outcome, store, ex


def test_a_ranked_round_asks_for_the_next_parents_once_its_first_children_are_measured() -> None:
    _, store, ex = _ranked(None, expand_batch=1)
    rows = {r.fingerprint: r for r in store.candidates(1)}
    # The root's 6 children: the next parent is asked for after the first 4 in measuring
    # order (one in-flight cap of 2 x 2 workers), not after all 6 ...
    assert ex.asked_after[1] == 1 + 4
    # ... and it is the fastest of those 4: the next round grows from this one.
    first_four = [rows[f] for f in ex.evaluated[1:5]]
    assert rows[ex.expand_calls[1][0]].seconds == min(r.seconds for r in first_four)
    # The next round (that parent's 6 children) asks after its own first 4 too.
    assert ex.asked_after[2] == 1 + 6 + 4


def test_a_round_in_proposal_order_whose_ask_finds_no_parent_asks_again_after_its_first_children() -> None:
    _, _, ex = _search(CostModelMode.OFF, None, max_candidates=30)
    # Nothing is measured but the root when its children start: the ask finds no parent.
    # It is made again once 4 of the 6 are measured, instead of after all of them.
    assert ex.asked_after[1] == 1 + 4


@pytest.mark.parametrize("mode", [CostModelMode.RANK, CostModelMode.OFF])
def test_early_asks_keep_a_search_reproducible_whatever_the_completion_order(mode: CostModelMode) -> None:
    runs = []
    for shuffle in (1, 2):
        cfg = SearchConfig(max_seconds=None, max_candidates=60, cost_model=mode, seed=5)
        ex = FakeExecutor(TREE, shuffle_seed=shuffle)
        store = InMemoryStore()
        model = FakeCostModel(oracle(TREE)) if mode is CostModelMode.RANK else None
        outcome = run_search(fake_workload(), fake_root(TREE.moves), make_strategy(cfg), ex, store, cfg,
                             cost_model=model)
        runs.append((outcome, store, ex))
    (a, store_a, ex_a), (b, store_b, ex_b) = runs
    assert ex_a.evaluated != ex_b.evaluated  # completion order really differed
    assert ex_a.expand_calls == ex_b.expand_calls  # the same asks, round by round
    ids_a = [(r.id, r.fingerprint) for r in store_a.candidates(a.search_id) if r.status is not Status.PENDING]
    ids_b = [(r.id, r.fingerprint) for r in store_b.candidates(b.search_id) if r.status is not Status.PENDING]
    assert ids_a == ids_b


def test_beam_search_is_asked_only_once_a_round_is_completely_measured() -> None:
    # A beam level is chosen once, from everything measured at the level above.
    _, _, ex = _search(CostModelMode.RANK, FakeCostModel(oracle(TREE)), strategy=StrategyKind.BEAM, max_candidates=30)
    assert ex.asked_after[1] == 1 + 6  # after all of the root's 6 children


def _tree_with_also_rans() -> FakeTree:
    """TREE, but four of the root's six children are 100x slower than the root (also-rans a
    good model sees coming) and the other two 10x faster, as are their own children."""
    root_children = [label_of(c.schedule) for c in TREE.expand(fake_root(TREE.moves)).children]
    times = {label: 0.1 for label in root_children[2:]}
    for label in root_children[:2]:
        times[label] = 1e-4
    return dataclasses.replace(TREE, times=times)


@pytest.mark.parametrize("shuffle", [None, 1, 2])
def test_a_ranked_search_measures_a_likely_winners_children_before_the_also_rans_it_held_back(shuffle) -> None:
    tree = _tree_with_also_rans()
    cfg = SearchConfig(max_seconds=None, max_candidates=40, cost_model=CostModelMode.RANK, seed=5, expand_batch=1)
    ex = FakeExecutor(tree, shuffle_seed=shuffle)
    store = InMemoryStore()
    outcome = run_search(fake_workload(), fake_root(tree.moves), make_strategy(cfg), ex, store, cfg,
                         cost_model=FakeCostModel(oracle(tree)))
    rows = {r.fingerprint: r for r in store.candidates(outcome.search_id)}
    slow = [fp for fp, r in rows.items() if r.depth == 1 and tree.seconds(label_of(r.schedule)) > 0.01]
    assert len(slow) == 4
    order = ex.evaluated  # completion order
    deeper = [i for i, fp in enumerate(order) if rows[fp].depth >= 2]
    held = [i for i, fp in enumerate(order) if fp in slow]
    # The two winners' children (and theirs) come first; the also-rans were held back
    # while the winners were expanded, and then queued behind their children - but for
    # exploration draws (a tenth of the order), which pass the gate once a round is in.
    assert deeper and min(deeper) < min(held, default=len(order))
    assert sum(1 for i in deeper if i < min(held, default=len(order))) >= 5
    assert sum(1 for i in held if i < deeper[9]) <= 2


def test_a_merging_search_is_reproducible_whatever_the_completion_order() -> None:
    tree = _tree_with_also_rans()
    runs = []
    for shuffle in (1, 2, 3):
        cfg = SearchConfig(max_seconds=None, max_candidates=50, cost_model=CostModelMode.RANK, seed=5)
        ex = FakeExecutor(tree, shuffle_seed=shuffle)
        store = InMemoryStore()
        outcome = run_search(fake_workload(), fake_root(tree.moves), make_strategy(cfg), ex, store, cfg,
                             cost_model=FakeCostModel(oracle(tree)))
        runs.append(([(r.id, r.fingerprint) for r in store.candidates(outcome.search_id)
                      if r.status is not Status.PENDING], ex.expand_calls, ex.evaluated))
    assert runs[0][2] != runs[1][2]  # completion order really differed
    assert runs[0][:2] == runs[1][:2] == runs[2][:2]


def test_in_proposal_order_a_round_is_measured_whole_before_the_next() -> None:
    tree = _tree_with_also_rans()
    cfg = SearchConfig(max_seconds=None, max_candidates=20, cost_model=CostModelMode.OFF, seed=5, expand_batch=1)
    ex = FakeExecutor(tree)
    store = InMemoryStore()
    outcome = run_search(fake_workload(), fake_root(tree.moves), make_strategy(cfg), ex, store, cfg)
    rows = {r.fingerprint: r for r in store.candidates(outcome.search_id)}
    depths = [rows[fp].depth for fp in ex.evaluated]
    assert depths[:7] == [0] + [1] * 6  # no model, no judgement: the root's round first, whole


def test_prune_never_skips_children_already_queued() -> None:
    """A short budget prunes the predicted-slower half of the new children only: those
    queued before (stored as pending) keep a place at the back, however slow predicted."""
    from schedsearch.core import FeatureVector
    from schedsearch.search.guidance import Guidance

    kids = [dataclasses.replace(fake_root(), fingerprint=f"c{i}", features=FeatureVector("t", (float(i),)))
            for i in range(8)]
    guide = Guidance(FakeCostModel(lambda f: f.values[0]), seed=1, prune=True)
    stored = {"c6", "c7"}  # the two predicted slowest were queued before
    ordering = guide.order(kids, seconds_left=None, seconds_per_candidate=None, candidates_left=3, stored=stored)
    kept = [c.fingerprint for c in ordering.children]
    skipped = {c.fingerprint for c in ordering.skipped}
    assert skipped and not (skipped & stored)
    assert len(kept) == 8 - len(skipped) and set(kept) | skipped == {c.fingerprint for c in kids}
    # The same order without ``stored`` (the same seed: the same exploration draws) skips
    # them too; with it they come last, after every child the cut kept.
    again = Guidance(FakeCostModel(lambda f: f.values[0]), seed=1, prune=True)
    plain = again.order(kids, seconds_left=None, seconds_per_candidate=None, candidates_left=3)
    rescued = {c.fingerprint for c in plain.skipped} - skipped
    assert rescued and rescued <= stored
    assert set(kept[len(kept) - len(rescued):]) == rescued
    assert [c.fingerprint for c in plain.children] == kept[:len(kept) - len(rescued)]


def test_children_predicted_alike_are_measured_one_of_each_group_first() -> None:
    from schedsearch.search.ranking import ALIKE, alike_groups
    # A dozen splits predicted within a percent of each other, then an unroll 30% slower
    # by prediction, then the slow ones: the unroll comes second, not after the dozen.
    predictions = [-1.0, -0.995, -0.993, -0.99, -0.99, -0.7, -0.69, 1.2]
    assert alike_groups(sorted(predictions), ALIKE) == [0, 1, 2, 3, 4, 0, 1, 0]
    order = measuring_order(predictions, random.Random(3), explore=0.0, apart=ALIKE)
    assert order == [0, 5, 7, 1, 6, 2, 3, 4]
    # Without ``apart`` the order is by prediction alone.
    assert measuring_order(predictions, random.Random(3), explore=0.0) == [0, 1, 2, 3, 4, 5, 6, 7]
    # Seeded: the same draws with the same seed.
    assert measuring_order(predictions, random.Random(9), apart=ALIKE) == \
        measuring_order(predictions, random.Random(9), apart=ALIKE)


#: Twelve children per node, each within 0.7-1.3x of its parent: every one a likely winner.
LEADS_TREE = FakeTree(moves=14, branching=12, failure_rate=0.0, features=True, seed=3)


def _leading(leads: bool, shuffle: int | None = None):
    cfg = SearchConfig(max_seconds=None, max_candidates=40, cost_model=CostModelMode.RANK,
                       seed=5, model_leads=leads)
    ex = FakeExecutor(LEADS_TREE, shuffle_seed=shuffle)
    store = InMemoryStore()
    outcome = run_search(fake_workload(), fake_root(LEADS_TREE.moves), make_strategy(cfg), ex, store, cfg,
                         cost_model=FakeCostModel(oracle(LEADS_TREE)))
    rows = {r.fingerprint: r for r in store.candidates(outcome.search_id)}
    return rows, ex


def test_a_leading_model_expands_one_parent_a_round_and_merges_as_soon_as_it_is_ready() -> None:
    rows, ex = _leading(True)
    assert ex.expand_calls and all(len(parents) == 1 for parents in ex.expand_calls)
    depths = [rows[fp].depth for fp in ex.evaluated]
    # The root's 12 children: the ask after the first 4 (one in-flight cap of 2 x 2 workers);
    # while the next round is expanded only an also-ran already built goes, one at a time, as
    # the runner would idle; then that round's children come first, and the rest of the
    # root's wait behind them.
    first_deeper = depths.index(2)
    assert depths[0] == 0 and depths[1:5] == [1] * 4 and first_deeper <= 6
    assert set(depths[5:first_deeper]) <= {1} and 1 in depths[first_deeper:]
    # Without the lead every likely winner of the round is measured before the next round
    # merges, and a round expands two parents.
    rows, ex = _leading(False)
    depths = [rows[fp].depth for fp in ex.evaluated]
    assert depths[1:13] == [1] * 12
    assert max(len(parents) for parents in ex.expand_calls) == 2


def test_a_leading_model_keeps_a_search_reproducible_for_the_same_completion_order() -> None:
    """How many also-rans a leading search measures while its next round is expanded depends
    on how long the expansion takes (``Pipeline._runner_idle``): the same seed gives the
    same search when the work completes in the same order."""
    for shuffle in (1, 2):
        runs = []
        for _ in range(2):
            rows, ex = _leading(True, shuffle)
            runs.append((sorted((r.id, fp) for fp, r in rows.items() if r.status is not Status.PENDING),
                         ex.expand_calls, ex.evaluated))
        assert runs[0] == runs[1]


def _idle_fill(tree: FakeTree = LEADS_TREE) -> tuple[list[str], dict[str, CandidateRecord], int]:
    """A leading search on a fake clock whose jobs run side by side (measurements 0.1 s, expansions
    6 s): the fingerprints in measuring order, the rows by fingerprint, and the most
    evaluations submitted after an expansion still in flight that were in flight at once."""
    clock = FakeClock(100.0)
    cfg = SearchConfig(max_seconds=None, max_candidates=40, cost_model=CostModelMode.RANK,
                       seed=5, model_leads=True)
    most = 0

    class Watching(FakeExecutor):
        def poll(self, timeout: float):
            nonlocal most
            kinds = [j.kind for j in self._flight]
            if JobKind.EXPAND in kinds:
                most = max(most, kinds[kinds.index(JobKind.EXPAND):].count(JobKind.EVALUATE))
            return super().poll(timeout)

    ex = Watching(tree, clock=clock, eval_seconds=0.1, expand_seconds=6.0, shuffle_seed=4)
    store = InMemoryStore()
    outcome = run_search(fake_workload(), fake_root(tree.moves), make_strategy(cfg), ex, store, cfg,
                         clock=clock, cost_model=FakeCostModel(oracle(tree)))
    rows = {r.fingerprint: r for r in store.candidates(outcome.search_id)}
    return ex.evaluated, rows, most


def test_a_leading_model_measures_its_also_rans_one_at_a_time_while_nothing_else_can_be() -> None:
    """While a leading search's next round is expanded and nothing is being measured, the
    also-rans behind its gate are measured one at a time: the runner's time is otherwise lost
    (their builds are made already, with gcc's notes). Here the root's 12 children are all
    measured before the second round's 6-second expansion is in."""
    evaluated, rows, most = _idle_fill()
    depths = [rows[fp].depth for fp in evaluated]
    assert depths[0] == 0 and depths[1:13] == [1] * 12 and depths[13] == 2
    assert most == 1


def test_a_leading_model_leaves_an_also_ran_whose_build_is_not_made_for_its_turn() -> None:
    """An also-ran whose kernel was not built for the notes (its build outlasted their wait)
    is not measured while the next round is expanded: it would be built then, beside the
    expansion. It waits for its turn in the merged queue."""
    root = fake_root(LEADS_TREE.moves)
    kids = LEADS_TREE.expand(root).children
    slowest = max((label_of(c.schedule) for c in kids), key=LEADS_TREE.seconds)
    tree = dataclasses.replace(LEADS_TREE, unbuilt=frozenset({slowest}))
    evaluated, rows, _ = _idle_fill(tree)
    unbuilt = next((i for i, fp in enumerate(evaluated) if rows[fp].depth == 1
                    and label_of(rows[fp].schedule) == slowest), len(evaluated))
    first_deeper = next(i for i, fp in enumerate(evaluated) if rows[fp].depth == 2)
    assert [rows[fp].depth for fp in evaluated[1:12]] == [1] * 11  # the built ones, as before
    assert first_deeper == 12 and unbuilt > first_deeper


def _asked_before_the_root_was_in(leads: bool, stream_leads: int = 0, shards: int = 4) -> bool:
    """Whether a search asked for its second round before the root's streamed expansion
    was all in."""
    from schedsearch.core import EventKind

    clock = FakeClock(100.0)
    cfg = SearchConfig(max_seconds=None, max_candidates=30, cost_model=CostModelMode.RANK,
                       seed=5, model_leads=leads)
    ex = FakeExecutor(LEADS_TREE, clock=clock, eval_seconds=0.1, expand_seconds=6.0, stream_shards=shards,
                      stream_leads=stream_leads)
    events = []
    run_search(fake_workload(), fake_root(LEADS_TREE.moves), make_strategy(cfg), ex, InMemoryStore(), cfg,
               events.append, clock=clock, cost_model=FakeCostModel(oracle(LEADS_TREE)))
    root_fp = fake_root(LEADS_TREE.moves).fingerprint
    root_in = next(e.elapsed for e in events if e.kind is EventKind.EXPANDED and e.record.fingerprint == root_fp)
    second_ask = [e.elapsed for e in events if e.kind is EventKind.ASKED][1]
    root_job = ex.shards_sent[0][0]
    root_shards = [final for job, final in ex.shards_sent if job == root_job]
    assert root_shards == [False] * (shards - 1) + [True]  # the root streamed
    return second_ask < root_in


def test_a_leading_model_plans_the_next_round_once_the_roots_streamed_shards_are_all_in() -> None:
    """It ranks a node's children as a whole: with no shard that leads with a heavy rewrite
    alone, the next round is asked for once the root's last shard is in, not from the first
    shard per worker (whose best need not be the round's; conv1d_mc on Zen 3 grew from the
    first shards' tiles). Without the lead the next round is asked while the root's shards
    still come in."""
    assert not _asked_before_the_root_was_in(True)
    assert _asked_before_the_root_was_in(False)


def test_a_leading_model_plans_the_next_round_once_every_leading_shard_is_in() -> None:
    """Shards that each hold one heavy rewrite alone (register tiles) come first; once all
    of them are in, a leading model plans its next round from them while the cheap rest of
    the root is still expanded. Four leading shards of eight: asked before the root is in;
    the same eight shards with none leading: asked only once the root is in."""
    assert _asked_before_the_root_was_in(True, stream_leads=4, shards=8)
    assert not _asked_before_the_root_was_in(True, stream_leads=0, shards=8)


def _third_ask_before_the_second_round_was_in(leads: bool, shards: int = 4) -> bool:
    """Whether a search asked for its third round before the second round's parent (a child
    of the root) was all expanded; every expansion of a leading search streams."""
    from schedsearch.core import EventKind

    clock = FakeClock(100.0)
    cfg = SearchConfig(max_seconds=None, max_candidates=60, cost_model=CostModelMode.RANK,
                       seed=5, model_leads=leads)
    sent = []

    class Recording(FakeExecutor):
        def submit(self, workload, reference, jobs):
            sent.extend(j for j in jobs if j.kind is JobKind.EXPAND)
            super().submit(workload, reference, jobs)

    ex = Recording(LEADS_TREE, clock=clock, eval_seconds=0.1, expand_seconds=6.0, stream_shards=shards)
    events = []
    run_search(fake_workload(), fake_root(LEADS_TREE.moves), make_strategy(cfg), ex, InMemoryStore(), cfg,
               events.append, clock=clock, cost_model=FakeCostModel(oracle(LEADS_TREE)))
    if leads:
        assert sent and all(j.stream for j in sent)
    asks = [e.elapsed for e in events if e.kind is EventKind.ASKED]
    second_parent = sent[1].candidates[0].fingerprint
    second_in = next(e.elapsed for e in events
                     if e.kind is EventKind.EXPANDED and e.record.fingerprint == second_parent)
    return asks[2] < second_in


def test_a_leading_model_plans_from_half_of_a_deeper_parents_shards() -> None:
    """Below the root, a leading model plans its next round once half of a parent's
    streamed shards are in: the rewrites are dealt to the shards in turn, and the rest of the
    builds overlap the next expansion. The root's are waited for whole (above)."""
    assert _third_ask_before_the_second_round_was_in(True)


def test_only_a_leading_model_asks_for_every_heavy_rewrite_first() -> None:
    """A streamed expansion asks for every register tile first (``Job.all_heavy_first``)
    when the model leads - it goes on once they are all in - and not otherwise, where the
    cheap children measured as they come keep the builders busy."""
    seen = []

    class Recording(FakeExecutor):
        def submit(self, workload, reference, jobs):
            seen.extend(j for j in jobs if j.kind is JobKind.EXPAND)
            super().submit(workload, reference, jobs)

    for leads in (True, False):
        seen.clear()
        cfg = SearchConfig(max_seconds=None, max_candidates=30, cost_model=CostModelMode.RANK,
                           seed=5, model_leads=leads)
        run_search(fake_workload(), fake_root(LEADS_TREE.moves), make_strategy(cfg),
                   Recording(LEADS_TREE, stream_shards=4), InMemoryStore(), cfg,
                   cost_model=FakeCostModel(oracle(LEADS_TREE)))
        streamed = [j for j in seen if j.stream]
        assert streamed and all(j.all_heavy_first is leads for j in streamed)
        assert not any(j.all_heavy_first for j in seen if not j.stream)


def test_a_run_of_one_kind_does_not_hold_back_the_other_kinds() -> None:
    from schedsearch.search.ranking import ALIKE, kind_handicaps
    # Eight splits 3% apart (each its own group), a pack predicted 1% slower than the
    # fifth split, and a slow reorder.
    predictions = [-1.00, -0.97, -0.94, -0.91, -0.88, -0.85, -0.82, -0.79, -0.87, -0.5]
    kinds = ["split"] * 8 + ["pack", "reorder"]
    assert kind_handicaps(predictions, kinds, 0.1) == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.0, 0.0])
    # Grouped across kinds, the pack is second in the fifth split's group: it waits behind
    # every group's first, the slow reorder's included.
    plain = measuring_order(predictions, random.Random(3), explore=0.0, apart=ALIKE)
    assert plain == [0, 1, 2, 3, 4, 5, 6, 7, 9, 8]
    # By kind, each split counts ALIKE slower per faster split: the pack comes fourth.
    order = measuring_order(predictions, random.Random(3), explore=0.0, apart=ALIKE, kinds=kinds)
    assert order == [0, 1, 2, 8, 3, 4, 5, 6, 7, 9]
    # Near-ties within a kind still wait for one of each group (an unroll after one split).
    ties = [-1.0, -0.995, -0.993, -0.99, -0.7]
    assert measuring_order(ties, random.Random(3), explore=0.0, apart=ALIKE,
                           kinds=["split"] * 4 + ["unroll"]) == [0, 4, 1, 2, 3]
    # Without ``apart`` the kinds change nothing.
    assert measuring_order(predictions, random.Random(3), explore=0.0, kinds=kinds) == sorted(
        range(10), key=lambda i: predictions[i])


def test_a_leading_guide_orders_by_each_childs_last_rewrite_kind() -> None:
    from schedsearch.core import FeatureVector, Rewrite, RewriteKind, Schedule
    from schedsearch.search.guidance import Guidance
    from schedsearch.search.ranking import ALIKE

    def kid(i: int, kind: RewriteKind, predicted: float):
        steps = (Rewrite.make(RewriteKind.REGISTER_TILE, "i j"), Rewrite.make(kind, "k"))
        return dataclasses.replace(fake_root(), fingerprint=f"c{i}", schedule=Schedule(steps),
                                   features=FeatureVector("t", (predicted,)))

    kids = [kid(i, RewriteKind.SPLIT, -1.0 + 0.03 * i) for i in range(8)] + [kid(8, RewriteKind.PACK, -0.87)]
    order = [c.fingerprint for c in Guidance(FakeCostModel(lambda f: f.values[0]), seed=1, prune=False,
                                             apart=ALIKE).order(kids, seconds_left=None, seconds_per_candidate=None,
                                                                candidates_left=None).children]
    assert order.index("c8") < order.index("c4")  # the pack before the fifth split
    plain = Guidance(FakeCostModel(lambda f: f.values[0]), seed=1, prune=False)  # the model does not lead
    assert [c.fingerprint for c in plain.order(kids, seconds_left=None, seconds_per_candidate=None,
                                               candidates_left=None).children].index("c8") > 4
