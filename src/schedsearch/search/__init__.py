"""Search strategies and the search loop. Imports only ``schedsearch.core`` and ``errors``."""

from schedsearch.search.beam import Beam
from schedsearch.search.best_first import BestFirst
from schedsearch.search.frontier import Frontier, expandable, rank_key
from schedsearch.search.inherited import Inherited, rebuild_inherited
from schedsearch.search.loop import run_search
from schedsearch.search.outcome import SearchOutcome
from schedsearch.search.random_walk import RandomFrontier
from schedsearch.search.strategies import make_strategy

__all__ = [
    "Beam",
    "BestFirst",
    "Frontier",
    "Inherited",
    "RandomFrontier",
    "SearchOutcome",
    "expandable",
    "make_strategy",
    "rank_key",
    "rebuild_inherited",
    "run_search",
]
