"""Explore recorded searches in Jupyter: trees, tables, plots and diffs.

Works on any ``core.Store`` and on core records only. pandas, matplotlib and networkx
(the ``notebook`` extra) are imported when a feature needs them.
"""

from schedsearch.explore.compare import SearchComparison, compare_searches
from schedsearch.explore.frames import list_searches
from schedsearch.explore.layout import TreeLayout, tree_layout
from schedsearch.explore.tree import SearchTree, TreeNode

__all__ = [
    "SearchComparison",
    "SearchTree",
    "TreeLayout",
    "TreeNode",
    "compare_searches",
    "list_searches",
    "tree_layout",
]
