"""Lossless, exactly: the federated forest equals the central reference forest
(``specs/federated_forest.md``, departure 7), and both prediction methods agree."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from securetrees.protocols.federated_forest import FederatedForestClassifier, FederatedForestRegressor
from securetrees.protocols.federated_forest.testing import mixed_data, small_key_options

PARTITION = [[0, 3, 4], [1, 2, 5]]


def _same(ff: Any, ref: Any, X: np.ndarray) -> None:
    complete = ff.complete_forest()
    assert len(complete.trees) == len(ref.trees)
    for a, b in zip(complete.trees, ref.trees, strict=True):
        assert a.same_as(b)
    one = ff.predict_proba(X) if hasattr(ff, "predict_proba") else ff.predict(X)
    classical = (ff.predict_proba(X, method="classical") if hasattr(ff, "predict_proba")
                 else ff.predict(X, method="classical"))
    assert np.array_equal(one, classical)
    want = ref.predict_proba(X) if hasattr(ff, "predict_proba") else ref.predict(X)
    assert np.array_equal(one, want)


@pytest.mark.parametrize("mode", ["shared", "encrypted"])
@pytest.mark.parametrize("n_classes", [2, 3])
def test_classifier_equals_reference(mode: str, n_classes: int, reference_forest: Any) -> None:
    X, y, cat = mixed_data(240, seed=n_classes, n_classes=n_classes)
    ff = FederatedForestClassifier(4, max_depth=4, random_state=11, label_protection=mode, categorical_features=cat,
                                   **small_key_options())
    ff.set_params(partition=PARTITION).fit(X, y)
    ref = reference_forest(ff, X, y, n_classes=n_classes, categorical=cat)
    _same(ff, ref, X)
    assert np.array_equal(ff.predict(X), ref.predict(X))


@pytest.mark.parametrize("mode", ["shared", "encrypted"])
def test_per_tree_feature_sampling_three_clients(mode: str, reference_forest: Any) -> None:
    """The paper's per-tree feature choice (Algorithms 2/6), three clients, the label holder last."""
    X, y, cat = mixed_data(200, seed=7)
    ff = FederatedForestClassifier(3, max_depth=3, max_features=4, feature_sampling="tree", random_state=2,
                                   label_protection=mode, label_holder=2, categorical_features=cat, criterion="entropy",
                                   **small_key_options())
    ff.set_params(partition=[[5, 0], [4], [1, 2, 3]]).fit(X, y)
    ref = reference_forest(ff, X, y, n_classes=2, criterion="entropy", max_features=None, max_features_tree=4,
                           categorical=cat)
    _same(ff, ref, X)


def test_featureless_label_holder(reference_forest: Any) -> None:
    """A label holder without features models the master holding the labels."""
    X, y, cat = mixed_data(150, seed=3)
    ff = FederatedForestClassifier(2, max_depth=3, random_state=4, categorical_features=cat, label_holder=2,
                                   **small_key_options())
    ff.set_params(partition=[[0, 1, 2], [3, 4, 5], []]).fit(X, y)
    _same(ff, reference_forest(ff, X, y, n_classes=2, categorical=cat), X)


@pytest.mark.parametrize("mode", ["shared", "encrypted"])
def test_regressor_equals_reference(mode: str, reference_forest: Any) -> None:
    """Dyadic targets (multiples of 1/8): the fixed-point statistics are exact, so equality is."""
    g = np.random.default_rng(5)
    X = g.normal(size=(180, 4)).round(2)
    X[g.random(X.shape) < 0.05] = np.nan
    y = np.round((np.nan_to_num(X[:, 0]) * 3 + np.nan_to_num(X[:, 2]) ** 2) * 8) / 8
    ff = FederatedForestRegressor(3, max_depth=4, random_state=8, label_protection=mode, label_holder=1,
                                  frac_bits=8, **small_key_options())
    ff.set_params(partition=[[0, 1], [2, 3]]).fit(X, y)
    _same(ff, reference_forest(ff, X, y, n_classes=None, criterion="squared_error"), X)


def test_one_round_prediction_uses_one_round() -> None:
    """One round per forest whatever the depth and the number of trees (from the transcript);
    the classical method needs a round per internal node reached."""
    X, y, cat = mixed_data(200, seed=9)
    rounds = {}
    for n_trees, depth in [(1, 2), (3, 5)]:
        ff = FederatedForestClassifier(n_trees, max_depth=depth, random_state=1, label_protection="shared",
                                       categorical_features=cat)
        ff.set_params(partition=PARTITION).fit(X, y)
        ff.predict(X[:50])  # aligns ids; measure a second call's prediction step alone
        for c, cols in zip(ff.clients_, ff.partition_, strict=True):
            c.load_test(X[:50][:, cols], [f"q{i}" for i in range(50)])
        ff.master_.align_test()
        tr = ff.transcript_
        mark = tr.mark()
        ff.master_.leaf_of_one_round()
        one = tr.since(mark).rounds
        mark = tr.mark()
        ff.master_.leaf_of_classical()
        rounds[(n_trees, depth)] = (one, tr.since(mark).rounds)
    assert rounds[(1, 2)][0] == rounds[(3, 5)][0] == 1
    assert rounds[(3, 5)][1] > rounds[(1, 2)][1] >= 1
