"""Accuracy on Adult against scikit-learn with the same trees, depth and max_features.

The random-forest comparison runs both libraries on the same one-hot encoding (the usual
baseline encoding of Adult: numeric columns as they are, missing as its own value), so both
search the same split family with the same per-node feature count.  The GBDT comparison runs
both on the native columns (categorical codes, NaN).  The default run uses 20 trees; the
full-size comparison (100 trees) is marked slow.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.ensemble import RandomForestClassifier as SkForest

from securetrees.datasets import AdultData, load_adult
from securetrees.testing.trees import one_hot
from securetrees.trees import GradientBoostingClassifier, RandomForestClassifier

GAP = 0.005  # 0.5 percentage points


@pytest.fixture(scope="module")
def adult() -> AdultData:
    return load_adult()


def _forest_gap(adult: AdultData, n_trees: int) -> float:
    A, B = one_hot(adult.X_train, adult.X_test, adult.categorical)
    ours = RandomForestClassifier(n_trees, max_depth=10, max_features="sqrt", random_state=0)
    sk = SkForest(n_trees, max_depth=10, max_features="sqrt", n_jobs=1, random_state=0)
    a = ours.fit(A, adult.y_train).score(B, adult.y_test)
    b = sk.fit(A, adult.y_train).score(B, adult.y_test)
    assert b > 0.85  # the baseline is sane
    return float(a - b)


def test_forest_within_half_a_point_of_sklearn(adult: AdultData) -> None:
    assert abs(_forest_gap(adult, 20)) <= GAP


@pytest.mark.slow
def test_forest_within_half_a_point_of_sklearn_full_size(adult: AdultData) -> None:
    assert abs(_forest_gap(adult, 100)) <= GAP


def test_native_categorical_forest_not_worse_than_sklearn_one_hot(adult: AdultData) -> None:
    A, B = one_hot(adult.X_train, adult.X_test, adult.categorical)
    ours = RandomForestClassifier(20, max_depth=10, categorical_features=adult.categorical,
                                  random_state=0).fit(adult.X_train, adult.y_train)
    sk = SkForest(20, max_depth=10, n_jobs=1, random_state=0).fit(A, adult.y_train)
    assert ours.score(adult.X_test, adult.y_test) >= sk.score(B, adult.y_test) - GAP


def test_gbdt_within_half_a_point_of_hist_gradient_boosting(adult: AdultData) -> None:
    kw = {"max_depth": 7, "learning_rate": 0.1}
    ours = GradientBoostingClassifier(50, categorical_features=adult.categorical, **kw)
    sk = HistGradientBoostingClassifier(max_iter=50, categorical_features=adult.categorical,
                                        early_stopping=False, **kw)
    a = ours.fit(adult.X_train, adult.y_train).score(adult.X_test, adult.y_test)
    b = sk.fit(adult.X_train, adult.y_train).score(adult.X_test, adult.y_test)
    assert b > 0.86
    assert abs(a - b) <= GAP
    np.testing.assert_array_equal(ours.classes_, [0, 1])
