"""Plaintext tree machinery shared by the central references and the federated protocols.

numpy only, no cryptography.  Layers, in dependency order: :mod:`binning`,
:mod:`criteria`, :mod:`histogram` (layer histograms and the vectorised split
search), :mod:`tree` (the node data model, partial trees, prediction),
:mod:`forest`, :mod:`partition` (who holds which columns),
:mod:`sampling` (the replayable random draws), :mod:`grow`
(layer-by-layer growth), :mod:`train` (reference trainers), :mod:`persistence`
(versioned JSON), :mod:`estimators` (scikit-learn conventions).  The spec is
``specs/trees.md``.
"""

from __future__ import annotations

from securetrees.trees.binning import BinMapper, quantile_edges, uniform_edges
from securetrees.trees.criteria import (
    Criterion,
    Entropy,
    Gini,
    GradientGain,
    SquaredError,
    eq7_score,
    eq8_leaf_value,
    make_criterion,
)
from securetrees.trees.estimators import (
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from securetrees.trees.forest import BoostedForest, Forest
from securetrees.trees.grow import GrowParams, goes_left_binned, grow_tree
from securetrees.trees.histogram import LayerSplits, best_splits, build_histograms, node_totals
from securetrees.trees.partition import check_partition
from securetrees.trees.persistence import dumps, load, loads, save
from securetrees.trees.sampling import TreeDraws, heap_indices, resolve_max_features, tree_generators
from securetrees.trees.train import (
    BinningParams,
    class_stats,
    regression_stats,
    train_boosted,
    train_forest,
)
from securetrees.trees.tree import Tree, TreeBuilder

__all__ = [
    "BinMapper",
    "BinningParams",
    "BoostedForest",
    "Criterion",
    "Entropy",
    "Forest",
    "Gini",
    "GradientBoostingClassifier",
    "GradientBoostingRegressor",
    "GradientGain",
    "GrowParams",
    "LayerSplits",
    "RandomForestClassifier",
    "RandomForestRegressor",
    "SquaredError",
    "Tree",
    "TreeBuilder",
    "TreeDraws",
    "best_splits",
    "build_histograms",
    "check_partition",
    "class_stats",
    "dumps",
    "eq7_score",
    "eq8_leaf_value",
    "goes_left_binned",
    "grow_tree",
    "heap_indices",
    "load",
    "loads",
    "make_criterion",
    "node_totals",
    "quantile_edges",
    "regression_stats",
    "resolve_max_features",
    "save",
    "train_boosted",
    "train_forest",
    "tree_generators",
    "uniform_edges",
]
