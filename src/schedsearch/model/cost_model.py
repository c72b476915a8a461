"""``LearnedCostModel``: the ``core.CostModel`` the CLI gives a search."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from schedsearch.core import FeatureVector, TrainingSample
from schedsearch.model.gbm import fit_gbm
from schedsearch.model.trainer import BackgroundTrainer, Predictor


class LearnedCostModel:
    """Gradient-boosted trees over candidate features, retrained in the background.

    ``history`` (earlier measurements on this machine, any workload and size) is learned
    first, so a model can answer from the search's first expansion on; every measurement
    the search makes is added through ``observe``. ``predict`` answers with the last
    finished model and never waits for one.
    """

    def __init__(
        self,
        history: Sequence[TrainingSample] = (),
        *,
        seed: int = 0,
        background: bool = True,
        min_samples: int = 16,
        retrain_every: int = 16,
        fit: Callable[[Sequence[TrainingSample]], Predictor] | None = None,
        estimate: Callable[[FeatureVector], float | None] | None = None,
    ) -> None:
        """``fit`` replaces the LightGBM fit (tests give slow or failing ones). ``estimate``
        is the analytic key ``estimate()`` answers with (the features' own, given by whoever
        knows their names: the model does not)."""
        self._estimate = estimate
        self._trainer = BackgroundTrainer(
            fit if fit is not None else functools.partial(fit_gbm, seed=seed),
            min_samples=min_samples,
            retrain_every=retrain_every,
            background=background,
        )
        self.history = len(history)
        if history:
            self._trainer.observe(history)

    @property
    def trainer(self) -> BackgroundTrainer:
        return self._trainer

    def predict(self, features: Sequence[FeatureVector]) -> list[float]:
        """Predicted log(time / root time) per vector; ``[]`` while no model is trained."""
        model = self._trainer.current()
        return model.predict(features) if model is not None and features else []

    def estimate(self, features: Sequence[FeatureVector]) -> list[float]:
        """The analytic ordering key per vector (lower: less work); ``[]`` without one, or
        when any vector has none (another feature version)."""
        if self._estimate is None or not features:
            return []
        keys = [self._estimate(f) for f in features]
        return [k for k in keys if k is not None] if all(k is not None for k in keys) else []

    def observe(self, samples: Sequence[TrainingSample]) -> None:
        """Learn measured candidates (a refit starts in the background when due)."""
        self._trainer.observe(samples)

    def trained_on(self) -> int:
        """Samples the model now answering was trained on (0: none yet)."""
        model = self._trainer.current()
        return model.trained_on if model is not None else 0

    def close(self) -> None:
        """Start no more fits; let a running one finish briefly."""
        self._trainer.close()
