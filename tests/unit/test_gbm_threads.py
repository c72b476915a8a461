"""A fit in a background thread beside predictions in the search's thread (as
``BackgroundTrainer`` runs them) must not corrupt LightGBM's memory. Run in a child
process, so that a segmentation fault fails this test instead of ending the test run."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

PROGRAM = textwrap.dedent('''
    import threading, time
    import numpy as np
    from schedsearch.core import FeatureVector, TrainingSample
    from schedsearch.model import fit_gbm

    rng = np.random.default_rng(0)
    def samples(n):
        return [TrainingSample(FeatureVector("v", tuple(rng.standard_normal(60))), float(rng.standard_normal()))
                for _ in range(n)]
    model = fit_gbm(samples(500))
    stop, fits = threading.Event(), [0]
    def fitting():
        while not stop.is_set():
            fit_gbm(samples(1500)); fits[0] += 1
    t = threading.Thread(target=fitting); t.start()
    end, predictions = time.monotonic() + SECONDS, 0
    while time.monotonic() < end:
        model.predict([FeatureVector("v", tuple(rng.standard_normal(60))) for _ in range(int(rng.integers(1, 64)))])
        predictions += 1
    stop.set(); t.join()
    print(fits[0], predictions)
''')


@pytest.mark.slow
def test_fits_beside_predictions_do_not_crash() -> None:
    run = subprocess.run([sys.executable, "-c", PROGRAM.replace("SECONDS", "30")], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, f"exit {run.returncode}: {run.stderr[-2000:]}"
    fits, predictions = map(int, run.stdout.split())
    assert fits >= 5 and predictions >= 1000  # the two really overlapped
