"""Fitting the gradient-boosted trees: LightGBM regression on log(time / root time).

Why LightGBM rather than XGBoost: both are well kept and both fit this problem (a few
thousand rows of ~55 dense features, refitted every few seconds). LightGBM's wheel is a
few MB with no CUDA/NCCL payload (XGBoost 2.x ships ~300 MB), its histogram trees fit
these small tables in tens of milliseconds on one thread, and ``deterministic=True`` with
a fixed seed gives the same model for the same samples, which keeps searches reproducible.

Training uses one thread: the benchmark of a candidate runs on the same small machine and
must not share its core with the trainer more than necessary.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import lightgbm
import numpy as np

from schedsearch.core import FeatureVector, TrainingSample

#: Every LightGBM call of the process uses this many threads. LightGBM keeps its thread
#: count in one process-wide variable that each call sets and then sizes per-thread buffers
#: by: a fit in the model's background thread and a prediction in the search's thread that
#: ask for different counts corrupt each other's buffers (a segmentation fault, reproduced
#: with LightGBM 4 within a minute of concurrent calls). One count for all calls keeps them apart.
THREADS = 1

#: Tree settings for tables of tens to thousands of rows: shallow trees, many of them,
#: leaves of at least a few samples so early models (tens of rows) stay smooth.
PARAMS = {
    "objective": "regression",
    "learning_rate": 0.08,
    "num_leaves": 15,
    "min_data_in_leaf": 4,
    "min_data_in_bin": 1,
    "feature_fraction": 0.9,
    "bagging_fraction": 0.9,
    "bagging_freq": 1,
    "lambda_l2": 1.0,
    "num_threads": THREADS,
    "deterministic": True,
    "force_row_wise": True,
    "verbosity": -1,
}
ROUNDS = 150


#: A prediction's starting point (``fit_gbm``'s ``base``): a log time ratio per vector.
Base = Callable[[FeatureVector], float]


def no_base(_: FeatureVector) -> float:
    """The plain regression: the trees predict the whole log time ratio."""
    return 0.0


@dataclass(frozen=True)
class GbmPredictor:
    """A trained booster, the feature version it understands, and the base it adds to."""

    booster: lightgbm.Booster
    version: str
    trained_on: int
    base: Base = no_base

    def predict(self, features: Sequence[FeatureVector]) -> list[float]:
        """Predicted log(time / root time): the base plus what the trees learned on top of
        it; ``[]`` for vectors of another feature version or length."""
        width = self.booster.num_feature()
        if not features or any(f.version != self.version or len(f.values) != width for f in features):
            return []
        matrix = np.asarray([f.values for f in features], dtype=np.float64)
        predicted = self.booster.predict(matrix, num_threads=THREADS)
        return [float(v) + self.base(f) for v, f in zip(predicted, features, strict=True)]


def fit_gbm(samples: Sequence[TrainingSample], seed: int = 0, base: Base = no_base) -> GbmPredictor:
    """Fit a booster on ``samples`` (all of one feature version, at least two of them).

    With a ``base`` (an analytic estimate) the trees learn the difference between it and
    the measured log time ratio (LightGBM's initial score), so what the estimate already
    explains - work cut by vectors and registers - carries over to workloads and sizes
    the samples do not cover, and the trees only correct it."""
    if len(samples) < 2:
        raise ValueError("fit_gbm needs at least two samples")
    last = samples[-1].features
    rows = [s for s in samples if s.features.version == last.version and len(s.features.values) == len(last.values)]
    version = last.version
    x = np.asarray([s.features.values for s in rows], dtype=np.float64)
    y = np.asarray([s.log_ratio for s in rows], dtype=np.float64)
    params = dict(PARAMS, seed=seed)
    init = np.asarray([base(s.features) for s in rows], dtype=np.float64)
    data = lightgbm.Dataset(
        x, label=y, init_score=init, params={"verbosity": -1, "min_data_in_bin": 1, "num_threads": THREADS}
    )
    booster = lightgbm.train(params, data, num_boost_round=ROUNDS)
    return GbmPredictor(booster, version, len(rows), base)
