"""``LearnedCostModel``: the ``core.CostModel`` the CLI gives a search."""

from __future__ import annotations

import functools
import math
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
        is an analytic estimate of log2(time / root time) from a vector (given by whoever
        knows the features' names: the model does not); the trees learn the difference,
        and before they have trained the model predicts with it alone."""
        self._estimate = estimate
        self._trainer = BackgroundTrainer(
            fit if fit is not None else functools.partial(fit_gbm, seed=seed, base=self._base),
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
        """Predicted log(time / root time) per vector. Before a model is trained: the
        analytic estimate alone, or ``[]`` without one (or for a vector it cannot read)."""
        if not features:
            return []
        model = self._trainer.current()
        if model is not None:
            return model.predict(features)
        if self._estimate is None:
            return []
        estimates = [self._estimate(f) for f in features]
        if any(e is None for e in estimates):
            return []
        return [math.log(2) * e for e in estimates]  # type: ignore[operator]

    def _base(self, features: FeatureVector) -> float:
        """The estimate as a natural-log time ratio, the trees' starting point (0 without one)."""
        estimate = self._estimate(features) if self._estimate is not None else None
        return math.log(2) * estimate if estimate is not None else 0.0

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
