"""DP that says when it is useless (issue 27 part 4; ``specs/histogram_forest.md``, "When DP leaves
nothing to learn"): the estimate from public parameters, the warning before training, the suggestion,
and the example in the error for missing feature ranges.  The noise comes from a DeterministicRandom,
so every outcome here is fixed."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from securetrees.errors import ParameterError
from securetrees.protocols.histogram_forest import (
    DPUsefulnessWarning,
    HistogramForestClassifier,
    signal_to_noise,
    suggest_forest,
)
from securetrees.rand import DeterministicRandom


def _data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    g = np.random.default_rng(seed)  # test data only
    X = g.uniform(0.0, 1.0, size=(n, 2))
    return X, (X[:, 0] > 0.5).astype(np.int64)


def _dp(**kw: object) -> HistogramForestClassifier:
    return HistogramForestClassifier(**{"epsilon": 1.0, "classes": [0, 1], "feature_ranges": [(0.0, 1.0), (0.0, 1.0)],
                                        "random_state": 0, **kw})  # type: ignore[arg-type]


def test_the_issues_setting_is_far_below_one() -> None:
    """ε = 1, 50 trees of depth 10, ~2,000 rows (the issue's chance-level run): noise swamps the root."""
    assert signal_to_noise(1.0, 2000, n_trees=50, max_depth=10, features_per_node=3) < 0.05
    assert signal_to_noise(1.0, 2000, n_trees=1, max_depth=3, n_bins=8, sampling="none") > 1.0


def test_warning_fires_on_a_useless_setting_and_not_on_a_useful_one() -> None:
    X, y = _data(300)
    with pytest.warns(DPUsefulnessWarning, match=r"near chance; suggest_forest gives n_estimators=\d+, max_depth=\d+"):
        _dp(n_estimators=10, max_depth=3).fit(X, y, rng=DeterministicRandom("useless"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", DPUsefulnessWarning)
        _dp(n_estimators=1, max_depth=2, n_bins=8, sampling="none", max_features=1).fit(
            X, y, rng=DeterministicRandom("useful"))


def test_the_suggested_forest_beats_chance() -> None:
    X, y = _data(900)
    X_test, y_test = _data(400, seed=1)
    shape = suggest_forest(2.0, 900, n_bins=8, sampling="none", features_per_node=1)
    assert shape["max_depth"] >= 2
    model = _dp(epsilon=2.0, n_bins=8, sampling="none", max_features=1, **shape)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DPUsefulnessWarning)
        model.fit(X, y, rng=DeterministicRandom("suggested"))
    assert model.score(X_test, y_test) > 0.75


def test_suggest_forest_refuses_a_budget_nothing_fits() -> None:
    with pytest.raises(ParameterError, match="even one tree of depth 1 is decided by the noise"):
        suggest_forest(0.01, 50)
    with pytest.raises(ParameterError):
        suggest_forest(1.0, 0)


def test_missing_ranges_error_shows_an_example() -> None:
    X, y = _data(30)
    with pytest.raises(ParameterError, match=r"feature_ranges=\[\(0\.0, 100\.0\), \(0\.0, 100\.0\)\]"):
        HistogramForestClassifier(2, 2, epsilon=1.0, classes=[0, 1]).fit(X, y)
