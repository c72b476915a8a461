"""The learned cost model: features -> predicted time relative to the root.

The only package that imports the gradient-boosting library (LightGBM). ``search`` sees
it only through ``core.CostModel``; the CLI wires it to the store's earlier measurements.

``features`` (with ``c_text``, which reads a kernel's C) names what the model learns from:
standard library and ``core`` only, so the processes that make candidates compute their
features without loading LightGBM. The model's own classes are imported on first use, for
the same reason: importing ``schedsearch.model.features`` runs this file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

#: Public names and the module that defines each one.
_LAZY = {
    "LearnedCostModel": "schedsearch.model.cost_model",
    "GbmPredictor": "schedsearch.model.gbm",
    "fit_gbm": "schedsearch.model.gbm",
    "BackgroundTrainer": "schedsearch.model.trainer",
    "Predictor": "schedsearch.model.trainer",
}

__all__ = ["BackgroundTrainer", "GbmPredictor", "LearnedCostModel", "Predictor", "fit_gbm"]

if TYPE_CHECKING:
    from schedsearch.model.cost_model import LearnedCostModel
    from schedsearch.model.gbm import GbmPredictor, fit_gbm
    from schedsearch.model.trainer import BackgroundTrainer, Predictor


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'schedsearch.model' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
