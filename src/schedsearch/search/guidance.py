"""``Guidance``: what the search loop does with a cost model, kept out of the loop itself.

It orders a round's new children for measuring (``ranking.measuring_order``), decides
which of them a short budget skips in ``prune`` mode, feeds ``ok`` measurements to the
model, and scores the predictions it made against what was then measured.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Sequence
import math
from dataclasses import dataclass, field

from schedsearch.core import Candidate, CandidateRecord, CostModel, ModelAccuracy, Status, TrainingSample
from schedsearch.search import ranking


@dataclass(frozen=True)
class Ordering:
    """How a round's new children are measured."""

    children: list[Candidate]  # to measure, in this order
    predicted: dict[str, float]  # the model's prediction by fingerprint ({} before it trained)
    skipped: list[Candidate]  # left out by ``prune``
    ranked: bool  # ordered by the model (its predictions or its estimate), not as proposed
    # The key each child was ordered by, as a natural log of its expected time (up to a
    # constant): the prediction, or the work estimate taken as proportional to time.
    keys: dict[str, float] = field(default_factory=dict)


class Guidance:
    """The cost model's part in one run of a search (one instance per run)."""

    def __init__(self, model: CostModel, seed: int, *, prune: bool, workload_key: str = "") -> None:
        self.model = model
        self.prune = prune
        self.workload_key = workload_key
        # Its own stream, so exploration draws do not shift the strategy's.
        self._rng = random.Random(f"measuring order {seed}")
        # (predicted, measured) log time ratios of the latest measured children.
        self._scored: deque[tuple[float, float]] = deque(maxlen=ranking.ACCURACY_WINDOW)

    def order(
        self,
        children: Sequence[Candidate],
        *,
        seconds_left: float | None,
        seconds_per_candidate: float | None,
        candidates_left: int | None,
        prune: bool = True,
    ) -> Ordering:
        """The children to measure, in order (see ``Ordering``).

        Predicted-fastest first once the model has trained. Before that, least work first
        by the model's analytic estimate (nothing is recorded as a prediction then). Proposal
        order when it has neither (or a child has no features). Pruning needs ``prune`` and
        a short budget (``ranking.budget_is_short``); it then keeps
        ``ranking.kept_after_pruning`` of the ordered children (random exploration picks
        included, when they are early enough).
        """
        if not children or any(c.features is None for c in children):
            return Ordering(list(children), {}, [], ranked=False)
        vectors = [c.features for c in children]
        predictions = self.model.predict(vectors)  # type: ignore[arg-type]
        predicted: dict[str, float] = {}
        if len(predictions) == len(children):
            keys = predictions
            predicted = {c.fingerprint: p for c, p in zip(children, predictions, strict=True)}
        else:
            # log2 of the work, as the natural log of a time proportional to it
            keys = [k * math.log(2) for k in self.model.estimate(vectors)]  # type: ignore[arg-type]
            if len(keys) != len(children):
                return Ordering(list(children), {}, [], ranked=False)
        ordered = [children[i] for i in ranking.measuring_order(keys, self._rng)]
        by_fp = {c.fingerprint: k for c, k in zip(children, keys, strict=True)}
        short = ranking.budget_is_short(
            len(ordered), seconds_left=seconds_left, seconds_per_candidate=seconds_per_candidate,
            candidates_left=candidates_left,
        )
        if not (self.prune and prune and short):
            return Ordering(ordered, predicted, [], ranked=True, keys=by_fp)
        keep = ranking.kept_after_pruning(len(ordered))
        return Ordering(ordered[:keep], predicted, ordered[keep:], ranked=True, keys=by_fp)

    def learn(self, record: CandidateRecord) -> None:
        """Give the model an ``ok`` measurement; score the prediction it had made for it."""
        measured = ranking.measured_log_ratio(record)
        if record.status is not Status.OK or measured is None:
            return
        if record.predicted is not None:
            self._scored.append((record.predicted, measured))
        if record.features is not None:
            self.model.observe([TrainingSample(record.features, measured, self.workload_key)])

    def accuracy(self) -> ModelAccuracy:
        """Rank correlation of the latest predictions with their measurements."""
        predicted = [p for p, _ in self._scored]
        measured = [m for _, m in self._scored]
        return ModelAccuracy(
            spearman=ranking.spearman(predicted, measured), pairs=len(self._scored),
            window=ranking.ACCURACY_WINDOW, trained_on=self.model.trained_on(),
        )
