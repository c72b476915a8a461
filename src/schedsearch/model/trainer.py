"""Retraining in a background thread: the search loop never waits for a model.

``observe`` only appends samples and, when enough new ones arrived and no training is
running, starts one on a snapshot; ``current`` returns the last model that finished. The
fit function is a parameter so tests can give a fake (slow, blocking, counting) one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Protocol

from schedsearch.core import FeatureVector, TrainingSample


class Predictor(Protocol):
    """A trained model."""

    @property
    def trained_on(self) -> int: ...

    def predict(self, features: Sequence[FeatureVector]) -> list[float]: ...


class BackgroundTrainer:
    """Keeps the samples, refits in a thread, hands out the newest finished model.

    A fit starts when at least ``min_samples`` are known and ``retrain_every`` arrived
    since the last fit started. With ``background=False`` fits run inline in ``observe``
    (reproducible searches, simple tests). A fit that raises leaves the previous model in
    place; the error is kept in ``last_error``.
    """

    def __init__(
        self,
        fit: Callable[[Sequence[TrainingSample]], Predictor],
        *,
        min_samples: int = 16,
        retrain_every: int = 16,
        max_samples: int = 20000,
        background: bool = True,
    ) -> None:
        self._fit = fit
        self._min = max(2, min_samples)
        self._every = max(1, retrain_every)
        self._max = max_samples
        self._background = background
        self._lock = threading.Lock()
        self._samples: list[TrainingSample] = []
        self._fitted_upto = 0  # samples seen when the last fit started
        self._model: Predictor | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self.fits_started = 0
        self.last_error: str = ""

    def observe(self, samples: Sequence[TrainingSample]) -> None:
        """Add samples; maybe start a fit. Returns at once in background mode."""
        with self._lock:
            self._samples.extend(samples)
            if len(self._samples) > self._max:
                del self._samples[: len(self._samples) - self._max]
        self._maybe_fit()

    def current(self) -> Predictor | None:
        """The newest finished model (None before the first fit ends)."""
        with self._lock:
            return self._model

    def busy(self) -> bool:
        """True while a fit is running."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def wait(self, timeout: float | None = None) -> None:
        """Block until the running fit (if any) ends. For tests and shutdown only."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Start no more fits; give a running one ``timeout`` seconds to finish."""
        self._closed = True
        self.wait(timeout)

    def _maybe_fit(self) -> None:
        with self._lock:
            total = len(self._samples)
            due = total >= self._min and (self._fitted_upto == 0 or total - self._fitted_upto >= self._every)
            if self._closed or not due or self.busy():
                return
            snapshot = list(self._samples)
            self._fitted_upto = total
            self.fits_started += 1
        if self._background:
            self._thread = threading.Thread(target=self._run, args=(snapshot,), name="cost-model-fit", daemon=True)
            self._thread.start()
        else:
            self._run(snapshot)

    def _run(self, snapshot: list[TrainingSample]) -> None:
        try:
            model = self._fit(snapshot)
        except Exception as exc:  # noqa: BLE001 - a failed fit keeps the old model; the search goes on
            self.last_error = f"{type(exc).__name__}: {exc}"
            return
        with self._lock:
            self._model = model
