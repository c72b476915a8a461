"""The learned cost model: features -> predicted time relative to the root.

The only package that imports the gradient-boosting library (LightGBM). ``search`` sees
it only through ``core.CostModel``; the CLI wires it to the store's earlier measurements.
"""

from schedsearch.model.cost_model import LearnedCostModel
from schedsearch.model.gbm import GbmPredictor, fit_gbm
from schedsearch.model.trainer import BackgroundTrainer, Predictor

__all__ = ["BackgroundTrainer", "GbmPredictor", "LearnedCostModel", "Predictor", "fit_gbm"]
