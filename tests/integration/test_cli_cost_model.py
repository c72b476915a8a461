"""``--cost-model`` through the CLI for real: a first search fills the database, a second
one starts with a model trained on it; its predictions, accuracy and measured_at show up
in ``run --json``, ``show --json`` and ``tree --json``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from schedsearch.model import LearnedCostModel
from schedsearch.store import open_store
from schedsearch.model.features import FEATURE_NAMES, FEATURE_VERSION
from tests.conftest import EXAMPLES, run_cli


@pytest.mark.slow
def test_cost_model_through_the_cli(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    base = ("run", str(EXAMPLES / "matmul.py"), "--proc", "matmul_i8", "--workers", "0", "--budget", "240",
            "--db", str(db), "--json")
    first = run_cli(*base, "--cost-model", "off", "--max-candidates", "20", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    out1 = json.loads(first.stdout)
    assert out1["cost_model"] == {"mode": "off", "spearman": None, "pairs": 0, "window": None, "trained_on": 0,
                                  "span": None, "concordance": None, "distinct_pairs": 0, "settled_after": 0,
                                  "settled_spearman": None, "settled_pairs": 0, "settled_span": None,
                                  "settled_repeat": None}

    # The recorded measurements carry real features and train a real model.
    store = open_store(str(db), create=False)
    try:
        machine = store.get_search(out1["search_id"]).machine
        samples = store.training_samples(machine.fingerprint, FEATURE_VERSION)
    finally:
        store.close()
    assert len(samples) == 20 and all(len(s.features.values) == len(FEATURE_NAMES) for s in samples)
    assert LearnedCostModel(samples, background=False).predict([s.features for s in samples[:3]]) != []

    # Measured anew (no reuse, no warm start): the model's predictions meet fresh measurements.
    second = run_cli(*base, "--cost-model", "prune", "--max-candidates", "12", "--remeasure", "--no-warm-start",
                     cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    out2 = json.loads(second.stdout)
    sid = str(out2["search_id"])
    model = out2["cost_model"]
    assert model["mode"] == "prune" and model["trained_on"] >= 20 and model["pairs"] == 11
    assert model["spearman"] is not None and -1 <= model["spearman"] <= 1
    assert model["span"] is not None and model["span"] >= 1.0
    assert model["concordance"] is None or 0 <= model["concordance"] <= 1
    assert (model["concordance"] is None) == (model["distinct_pairs"] == 0)
    # 12 measurements: none is past the settling count yet
    assert model["settled_after"] == 200 and model["settled_pairs"] == 0 and model["settled_spearman"] is None
    assert json.loads(run_cli("show", sid, "--db", str(db), "--json").stdout)["cost_model"] == model
    shown = run_cli("show", sid, "--db", str(db))
    assert "rank correlation" in shown.stdout and "span" in shown.stdout

    nodes = json.loads(run_cli("tree", sid, "--db", str(db), "--json").stdout)
    measured = [n for n in nodes if n["status"] != "pending"]
    assert len(measured) == 12
    times = [n["measured_at"] for n in measured]
    assert all(t is not None and 0 <= t <= out2["elapsed_seconds"] for t in times)
    # In the search's own seconds; the root first. (Not in id order: a new best is recorded
    # once its second measurement is in, after children stored later than it.)
    assert times[0] == min(times) and len(set(times)) == len(times)
    children = [n for n in measured if n["depth"] == 1]
    # Predicted before measuring by the model trained on the first search.
    assert children and all(n["predicted_speedup"] is not None for n in children)
