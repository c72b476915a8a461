"""``Guidance``: what the search loop does with a cost model, kept out of the loop itself.

It orders a round's new children for measuring (``ranking.measuring_order``), decides
which of them a short budget skips in ``prune`` mode, feeds ``ok`` measurements to the
model, and scores the predictions it made against what was then measured.
"""

from __future__ import annotations

import random
import statistics
from collections import deque
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from schedsearch.core import (
    Candidate,
    CandidateCostModel,
    CandidateRecord,
    CostModel,
    ModelAccuracy,
    Status,
    Timing,
    TrainingSample,
)
from schedsearch.search import ranking

#: Scored predictions needed before the model's typical error is told (``typical_error``).
ERROR_PAIRS = 20


@dataclass(frozen=True)
class Ordering:
    """How a round's new children are measured."""

    children: list[Candidate]  # to measure, in this order
    predicted: dict[str, float]  # the model's prediction by fingerprint ({} before it trained)
    skipped: list[Candidate]  # left out by ``prune``


class Guidance:
    """The cost model's part in one run of a search (one instance per run)."""

    def __init__(self, model: CostModel, seed: int, *, prune: bool, workload_key: str = "", apart: float = 0.0) -> None:
        self.model = model
        self.prune = prune
        self.apart = apart  # children predicted alike: one of each first (``ranking.measuring_order``)
        self.workload_key = workload_key
        # Its own stream, so exploration draws do not shift the strategy's.
        self._rng = random.Random(f"measuring order {seed}")
        # (predicted, measured) log time ratios of the latest measured children, and their timings.
        self._scored: deque[tuple[float, float, Timing]] = deque(maxlen=ranking.ACCURACY_WINDOW)
        # Every (predicted, measured, timing) after the first ``SETTLED_AFTER`` measurements.
        self._learned = 0
        self._settled: list[tuple[float, float, Timing]] = []

    def order(
        self,
        children: Sequence[Candidate],
        *,
        seconds_left: float | None,
        seconds_per_candidate: float | None,
        candidates_left: int | None,
        prune: bool = True,
        stored: Collection[str] = (),
    ) -> Ordering:
        """The children to measure, in order (see ``Ordering``).

        Predicted-fastest first; proposal order while the model has no predictions to give
        (or a child has no features). Pruning needs ``prune`` and
        a short budget (``ranking.budget_is_short``); it then keeps
        ``ranking.kept_after_pruning`` of the ordered children (random exploration picks
        included, when they are early enough). Children whose fingerprint is in ``stored``
        (queued earlier, already recorded as pending) are never skipped: beyond the cut they
        keep their place at the back.
        """
        predictions = self.predictions(children)
        if not predictions:
            return Ordering(list(children), {}, [])
        kinds = [c.schedule.steps[-1].kind.value if c.schedule.steps else "" for c in children]
        order = ranking.measuring_order(predictions, self._rng, apart=self.apart, kinds=kinds)
        ordered = [children[i] for i in order]
        predicted = {c.fingerprint: p for c, p in zip(children, predictions, strict=True)}
        short = ranking.budget_is_short(
            len(ordered),
            seconds_left=seconds_left,
            seconds_per_candidate=seconds_per_candidate,
            candidates_left=candidates_left,
        )
        if not (self.prune and prune and short):
            return Ordering(ordered, predicted, [])
        keep = ranking.kept_after_pruning(len(ordered))
        tail = ordered[keep:]
        kept = [c for c in tail if c.fingerprint in stored]
        skipped = [c for c in tail if c.fingerprint not in stored]
        return Ordering(ordered[:keep] + kept, predicted, skipped)

    def predictions(self, candidates: Sequence[Candidate]) -> list[float]:
        """The model's predictions (log time / root time) for ``candidates``, in order, or
        ``[]`` when it has none to give or a candidate has no features."""
        if not candidates or any(c.features is None for c in candidates):
            return []
        if isinstance(self.model, CandidateCostModel):
            predictions = self.model.predict_candidates(candidates)
        else:
            predictions = self.model.predict([c.features for c in candidates])  # type: ignore[misc]
        return list(predictions) if len(predictions) == len(candidates) else []

    def typical_error(self) -> float | None:
        """The median distance between the latest predictions and what was then measured
        (log time ratios): how far off the model usually is. None before it has
        ``ERROR_PAIRS`` such pairs to tell."""
        if len(self._scored) < ERROR_PAIRS:
            return None
        return statistics.median(abs(p - m) for p, m, _ in self._scored)

    def learn(self, record: CandidateRecord) -> None:
        """Give the model an ``ok`` measurement; score the prediction it had made for it."""
        measured = ranking.measured_log_ratio(record)
        if record.status is not Status.OK or measured is None:
            return
        if record.predicted is not None and record.timing is not None:
            self._scored.append((record.predicted, measured, record.timing))
            if self._learned >= ranking.SETTLED_AFTER:
                self._settled.append((record.predicted, measured, record.timing))
        self._learned += 1
        if record.features is not None:
            self.model.observe([TrainingSample(record.features, measured, self.workload_key)])

    def accuracy(self) -> ModelAccuracy:
        """Rank correlation of the latest predictions with their measurements, and of every
        prediction since the search's ``SETTLED_AFTER``-th measurement."""
        predicted = [p for p, _, _ in self._scored]
        measured = [m for _, m, _ in self._scored]
        timings = [t for _, _, t in self._scored]
        share, distinct = ranking.concordance(predicted, timings)
        return ModelAccuracy(
            spearman=ranking.spearman(predicted, measured),
            pairs=len(self._scored),
            window=ranking.ACCURACY_WINDOW,
            trained_on=self.model.trained_on(),
            span=ranking.span([t.median for t in timings]),
            concordance=share,
            distinct_pairs=distinct,
            settled_after=ranking.SETTLED_AFTER,
            settled_spearman=ranking.spearman([p for p, _, _ in self._settled], [m for _, m, _ in self._settled]),
            settled_pairs=len(self._settled),
            settled_span=ranking.span([t.median for _, _, t in self._settled]),
            settled_repeat=ranking.repeatability([t for _, _, t in self._settled]),
        )
