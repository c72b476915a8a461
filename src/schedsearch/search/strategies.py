"""Pick the search strategy a ``SearchConfig`` names."""

from __future__ import annotations

from schedsearch.core import CostModelMode, SearchConfig, SearchStrategy, StrategyKind
from schedsearch.search.beam import Beam
from schedsearch.search.best_first import BestFirst
from schedsearch.search.frontier import rank_key
from schedsearch.search.random_walk import RandomFrontier


def make_strategy(config: SearchConfig) -> SearchStrategy:
    """The strategy of ``config.strategy``, seeded with ``config.seed``; unless the cost
    model is off, best-first breaks ties between measured nodes with its predictions."""
    if config.strategy is StrategyKind.BEST_FIRST:
        return BestFirst(
            config.max_depth, config.seed, key=rank_key, predictions=config.cost_model is not CostModelMode.OFF
        )
    if config.strategy is StrategyKind.BEAM:
        return Beam(config.beam_width, config.max_depth, key=rank_key)
    if config.strategy is StrategyKind.RANDOM:
        return RandomFrontier(config.max_depth, config.seed)
    raise ValueError(f"unknown strategy {config.strategy!r}")
