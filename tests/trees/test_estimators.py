"""Estimator conventions and bad input: each rejection raises its one typed error."""

from __future__ import annotations

import numpy as np
import pytest

from securetrees.errors import NotFittedError, ParameterError
from securetrees.trees import (
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
    TreeDraws,
    resolve_max_features,
    tree_generators,
)

ESTIMATORS = [RandomForestClassifier, RandomForestRegressor, GradientBoostingClassifier,
              GradientBoostingRegressor]
X = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 1.0], [3.0, 0.0]])
Y = np.array([0, 0, 1, 1])


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_params_stored_as_given(cls: type) -> None:
    est = cls(7, max_depth=3, random_state=5)
    params = est.get_params()
    assert (params["n_estimators"], params["max_depth"], params["random_state"]) == (7, 3, 5)
    assert est.set_params(max_depth=2).max_depth == 2
    assert not hasattr(est, "model_")
    with pytest.raises(ParameterError):
        est.set_params(depth=3)


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_not_fitted(cls: type) -> None:
    with pytest.raises(NotFittedError):
        cls(2).predict(X)


@pytest.mark.parametrize("cls", ESTIMATORS)
@pytest.mark.parametrize(
    ("Xb", "yb"),
    [
        (X, np.array([0.0, np.nan, 1.0, 1.0])),  # NaN label
        (np.empty((0, 2)), np.empty(0)),  # empty data
        (X, Y[:3]),  # mismatched shapes
        (X[:, 0], Y),  # 1-D X
        (np.where(X == 3.0, np.inf, X), Y),  # infinite feature
    ],
    ids=["nan-label", "empty", "mismatch", "1d", "inf"],
)
def test_bad_training_input(cls: type, Xb: np.ndarray, yb: np.ndarray) -> None:
    with pytest.raises(ParameterError):
        cls(2).fit(Xb, yb)


@pytest.mark.parametrize("cls", [RandomForestClassifier, GradientBoostingClassifier])
def test_continuous_labels_rejected_string_labels_kept(cls: type) -> None:
    with pytest.raises(ParameterError, match="Unknown label type"):
        cls(2).fit(X, np.array([0.5, 1.5, 0.5, 1.5]))
    est = cls(2, max_depth=2).fit(X, np.array(["a", "b", "a", "b"]))
    assert list(est.classes_) == ["a", "b"] and set(est.predict(X)) <= {"a", "b"}


@pytest.mark.parametrize("cls", [RandomForestRegressor, GradientBoostingRegressor])
def test_string_targets_rejected(cls: type) -> None:
    with pytest.raises(ParameterError):
        cls(2).fit(X, np.array(["a", "b", "a", "b"]))


@pytest.mark.parametrize("cls", [RandomForestClassifier, GradientBoostingClassifier])
def test_single_class_rejected(cls: type) -> None:
    with pytest.raises(ParameterError):
        cls(2).fit(X, np.zeros(4))


@pytest.mark.parametrize("cls", ESTIMATORS)
def test_prediction_checks_width(cls: type) -> None:
    est = cls(2, max_depth=2).fit(X, Y)
    with pytest.raises(ParameterError):
        est.predict(np.zeros((2, 3)))


@pytest.mark.parametrize(
    "kwargs",
    [{"criterion": "mse"}, {"max_features": 0}, {"max_features": 1.5}, {"max_features": "half"},
     {"max_depth": -1}, {"min_samples_leaf": 0}, {"random_state": -3}, {"random_state": 1.5},
     {"n_estimators": 0}, {"max_features_tree": 3}, {"categorical_features": [5]},
     {"categorical_features": [True]}, {"binning": "kmeans"}],
)
def test_bad_forest_parameters(kwargs: dict[str, object]) -> None:
    with pytest.raises(ParameterError):
        RandomForestClassifier(**{"n_estimators": 2, **kwargs}).fit(X, Y)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs",
    [{"learning_rate": 0.0}, {"reg_lambda": -1.0}, {"base_score": "mean"}, {"n_estimators": 0}],
)
def test_bad_boosting_parameters(kwargs: dict[str, object]) -> None:
    with pytest.raises(ParameterError):
        GradientBoostingClassifier(**kwargs).fit(X, Y)  # type: ignore[arg-type]


def test_regressors_have_no_probabilities() -> None:
    with pytest.raises(AttributeError):  # scikit-learn's convention: regressors have no predict_proba
        RandomForestRegressor(2).fit(X, Y.astype(float)).predict_proba(X)  # type: ignore[attr-defined]
    with pytest.raises(ParameterError):
        RandomForestRegressor(2, criterion="gini").fit(X, Y.astype(float))


def test_resolve_max_features() -> None:
    assert [resolve_max_features(s, 14) for s in (None, "sqrt", "log2", 5, 0.5, 0.01)] == [
        14, 3, 3, 5, 7, 1]
    with pytest.raises(ParameterError):
        resolve_max_features(True, 14)


def test_draw_order_is_the_documented_one() -> None:
    """specs/trees.md "Random-draw order", replayed with raw numpy calls."""
    rng_a = tree_generators(42, 3)[1]
    draws = TreeDraws(rng_a, 10, 6, bootstrap=True, max_features_tree=4, max_features=2)
    per_node = [draws.node_features() for _ in range(3)]
    child = np.random.SeedSequence(42).spawn(3)[1]
    rng_b = np.random.Generator(np.random.PCG64(child))
    boot = rng_b.integers(0, 10, size=10)
    np.testing.assert_array_equal(draws.sample_weight, np.bincount(boot, minlength=10))
    tree_feats = np.sort(rng_b.choice(6, size=4, replace=False))
    np.testing.assert_array_equal(draws.tree_features, tree_feats)
    for got in per_node:
        np.testing.assert_array_equal(got, np.sort(rng_b.choice(tree_feats, size=2, replace=False)))
    with pytest.raises(ParameterError):
        TreeDraws(rng_b, 0, 6)
    with pytest.raises(ParameterError):
        tree_generators(1, 0)
