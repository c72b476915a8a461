"""The learned cost model: LightGBM on recorded (simulated) measurements, and background
training that never makes the search loop wait."""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Sequence

import pytest

from schedsearch.core import CostModelMode, SearchConfig, SearchStatus, TrainingSample
from schedsearch.model import BackgroundTrainer, LearnedCostModel, fit_gbm
from schedsearch.search import make_strategy, run_search
from schedsearch.search.ranking import spearman
from schedsearch.store import InMemoryStore
from schedsearch.testing.fake_executor import FakeClock, FakeExecutor
from schedsearch.testing.fake_tree import FAKE_FEATURES, FakeTree, fake_features, fake_root, fake_workload
from schedsearch.core import Rewrite, RewriteKind, Schedule

TREE = FakeTree(moves=9, branching=6, failure_rate=0.0, features=True, seed=4)


def _sample(moves: Sequence[str]) -> TrainingSample:
    schedule = Schedule(tuple(Rewrite.make(RewriteKind.SPLIT, m) for m in moves))
    label = "+".join(sorted(moves))
    return TrainingSample(fake_features(schedule, TREE.moves), math.log(TREE.seconds(label) / TREE.seconds("")))


def _recorded(max_candidates: int = 260) -> InMemoryStore:
    """A store holding one simulated search of TREE (the recorded data the model learns)."""
    store = InMemoryStore()
    cfg = SearchConfig(max_seconds=None, max_candidates=max_candidates, cost_model=CostModelMode.OFF)
    ex = FakeExecutor(TREE)
    run_search(fake_workload(), fake_root(TREE.moves), make_strategy(cfg), ex, store, cfg)
    return store


def test_trained_on_recorded_measurements_it_ranks_unseen_schedules() -> None:
    store = _recorded()
    history = store.training_samples(FakeExecutor().machine().fingerprint, FAKE_FEATURES)
    assert len(history) >= 200
    model = LearnedCostModel(history, background=False)
    assert model.trained_on() == len(history)
    # Schedules deeper than anything recorded: 5 moves out of 8, none of them seen.
    seen = {s.features.values for s in history}
    unseen = [s for s in (_sample([f"m{(i * k) % 8 + 1}" for k in range(1, 6)]) for i in range(1, 60))
              if s.features.values not in seen]
    assert len(unseen) >= 10
    predicted = model.predict([s.features for s in unseen])
    rho = spearman(predicted, [s.log_ratio for s in unseen])
    assert rho is not None and rho >= 0.7


def test_fitting_is_deterministic() -> None:
    samples = [_sample([f"m{a}", f"m{b}"]) for a in range(1, 9) for b in range(1, 9)]
    first, second = fit_gbm(samples, seed=3), fit_gbm(samples, seed=3)
    probe = [s.features for s in samples[::7]]
    assert first.predict(probe) == second.predict(probe)
    assert first.predict([fake_features(Schedule(), 5)]) == []  # another vector length is refused


def test_no_model_until_enough_samples() -> None:
    model = LearnedCostModel([_sample(["m1"])] * 3, background=False, min_samples=16)
    assert model.predict([_sample(["m2"]).features]) == [] and model.trained_on() == 0


def test_before_training_the_model_predicts_with_its_estimate() -> None:
    probe = [_sample(["m1"]).features, _sample(["m1", "m2"]).features]
    assert LearnedCostModel(background=False).predict(probe) == []  # nothing to go on
    model = LearnedCostModel(background=False, estimate=lambda f: sum(f.values))
    assert model.trained_on() == 0
    assert model.predict(probe) == pytest.approx([math.log(2) * sum(f.values) for f in probe])
    partial = LearnedCostModel(background=False, estimate=lambda f: None if f is probe[1] else 1.0)
    assert partial.predict(probe) == []  # a vector it cannot read: no predictions at all


def test_the_trees_learn_on_top_of_the_estimate_and_carry_it_beyond_the_samples() -> None:
    """Times that follow the estimate times a small schedule effect: trained only on
    moderate estimates, a model built on the estimate ranks far larger ones right; plain
    trees cannot extrapolate past the values they saw."""
    def truth(f) -> float:
        return math.log(2) * f.values[0] + 0.1 * f.values[1]

    def vector(work: float, effect: float):
        return dataclasses.replace(_sample(["m1"]).features, values=(work, effect))

    train = [TrainingSample(vector(w / 4, e), truth(vector(w / 4, e))) for w in range(-8, 9) for e in (0.0, 1.0)]
    probe = [vector(w, 0.0) for w in (-12.0, -9.0, -6.0, 4.0, 7.0)]
    based = LearnedCostModel(train, background=False, estimate=lambda f: f.values[0])
    plain = LearnedCostModel(train, background=False)
    want = [truth(f) for f in probe]
    assert based.predict(probe) == pytest.approx(want, abs=0.3)
    assert spearman(based.predict(probe), want) == pytest.approx(1.0)
    assert max(abs(p - t) for p, t in zip(plain.predict(probe), want)) > 2.0


class _BlockingFit:
    """A fit that takes as long as the test wants (until ``release`` is set)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = threading.Event()
        self.calls = 0

    def __call__(self, samples: Sequence[TrainingSample]):
        self.calls += 1
        self.started.set()
        self.release.wait(30)
        return fit_gbm(samples)


@pytest.mark.serial  # a wall-clock bound
def test_observe_returns_while_a_fit_runs() -> None:
    fit = _BlockingFit()
    trainer = BackgroundTrainer(fit, min_samples=4, retrain_every=4)
    samples = [_sample([f"m{a}"]) for a in range(1, 9)]
    t0 = time.monotonic()
    trainer.observe(samples)
    assert fit.started.wait(5)
    trainer.observe(samples)  # due again, but one fit at a time: nothing new starts
    assert time.monotonic() - t0 < 1.0
    assert trainer.busy() and trainer.current() is None and fit.calls == 1
    fit.release.set()
    trainer.wait(10)
    assert trainer.current() is not None and trainer.current().trained_on == 8


def test_a_failing_fit_keeps_the_search_going() -> None:
    def broken(samples):
        raise RuntimeError("no trees today")

    trainer = BackgroundTrainer(broken, min_samples=2, background=False)
    trainer.observe([_sample(["m1"]), _sample(["m2"])])
    assert trainer.current() is None and "no trees today" in trainer.last_error


def test_training_never_blocks_the_search_loop() -> None:
    """With a fit that never finishes during the search, the search runs at the fake
    clock's pace, measures children in proposal order, and ends normally."""
    fit = _BlockingFit()
    history = [s for a in range(1, 9) for s in (_sample([f"m{a}"]), _sample([f"m{a}", "m1"]))]
    model = LearnedCostModel(history, min_samples=8, retrain_every=8, fit=fit)
    assert fit.started.wait(5)
    clock = FakeClock()
    cfg = SearchConfig(max_seconds=None, max_candidates=40, cost_model=CostModelMode.RANK)
    with_model = FakeExecutor(TREE, clock=clock, eval_seconds=1.0)
    t0 = time.monotonic()
    outcome = run_search(fake_workload(), fake_root(TREE.moves), make_strategy(cfg), with_model, InMemoryStore(),
                         cfg, clock=clock, cost_model=model)
    wall = time.monotonic() - t0
    assert outcome.status is SearchStatus.COMPLETED and outcome.counters.evaluated == 40
    assert model.trainer.busy() and fit.calls == 1  # still fitting on the history
    assert outcome.elapsed == pytest.approx(40.0)  # only the simulated evaluations took time
    assert wall < 10
    plain_cfg = SearchConfig(max_seconds=None, max_candidates=40, cost_model=CostModelMode.OFF)
    plain = FakeExecutor(TREE)
    run_search(fake_workload(), fake_root(TREE.moves), make_strategy(plain_cfg), plain, InMemoryStore(), plain_cfg)
    assert with_model.evaluated[:7] == plain.evaluated[:7]  # the root and its children, proposal order
    fit.release.set()
    model.close()
    assert model.trained_on() == len(history)
