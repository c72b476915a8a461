"""A stand-in cost model for tests: ``FakeCostModel`` predicts with any rule a test gives it
and records what it was told; ``oracle`` is the perfect rule for a ``FakeTree(features=True)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from schedsearch.core import FeatureVector, TrainingSample
from schedsearch.testing.fake_tree import FakeTree


class FakeCostModel:
    """``core.CostModel`` predicting with ``rule(features)``; records every call.

    ``ready`` says whether a model "exists" yet (``predict`` returns ``[]`` until then);
    ``observed`` holds every sample it was given, ``predicted`` every batch it answered.
    """

    def __init__(self, rule: Callable[[FeatureVector], float], *, ready: bool = True) -> None:
        self.rule = rule
        self.ready = ready
        self.observed: list[TrainingSample] = []
        self.predicted: list[list[float]] = []
        self.closed = False

    def predict(self, features: Sequence[FeatureVector]) -> list[float]:
        if not self.ready:
            return []
        out = [self.rule(f) for f in features]
        self.predicted.append(out)
        return out

    def observe(self, samples: Sequence[TrainingSample]) -> None:
        self.observed.extend(samples)

    def trained_on(self) -> int:
        return len(self.observed) if self.ready else 0

    def close(self) -> None:
        self.closed = True


def oracle(tree: FakeTree) -> Callable[[FeatureVector], float]:
    """A perfect rule for a ``FakeTree(features=True)``: the true log(time / root time)."""
    import math

    def rule(features: FeatureVector) -> float:
        label = "+".join(sorted(f"m{i + 1}" for i, n in enumerate(features.values[:-1]) for _ in range(int(n))))
        return math.log(tree.seconds(label) / tree.seconds(""))

    return rule
