"""Shared fixtures: a small mixed data set and the reference forest on the canonical order."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from securetrees.trees import BinningParams, GrowParams, train_forest


def reference(ff: Any, X: np.ndarray, y: np.ndarray, *, n_classes: int | None, criterion: str = "gini",
              max_features_tree: Any = None, max_features: Any = "sqrt", categorical: Any = None) -> Any:
    """``train_forest`` on the rows in the federated run's canonical order, same settings."""
    o = ff.sample_order_
    providers = [next(i for i, cols in enumerate(ff.partition_) if f in cols) for f in range(X.shape[1])]
    forest, _ = train_forest(
        X[o], y[o], n_classes=n_classes, criterion=criterion, n_estimators=ff.n_estimators,
        grow=GrowParams(max_depth=ff.max_depth, min_samples_split=ff.min_samples_split,
                        min_samples_leaf=ff.min_samples_leaf),
        max_features=max_features, max_features_tree=max_features_tree, bootstrap=ff.bootstrap,
        binning=BinningParams(max_bins=ff.max_bins, categorical=categorical), providers=providers,
        random_state=ff.random_state, classes=getattr(ff, "classes_", None), node_keyed_draws=True,
    )
    return forest


@pytest.fixture
def reference_forest() -> Any:
    return reference
