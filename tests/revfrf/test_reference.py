"""Construction (FLE-Expan, FOS-Find) against the central reference ``securetrees.trees.train_forest``,
and every prediction path against the plaintext model (specs/revfrf.md, "Prediction")."""

from __future__ import annotations

import numpy as np
import pytest

from securetrees.protocols.revfrf import RevFRFClassifier
from securetrees.trees import BinningParams, GrowParams, train_forest

from .helpers import PARTITION, assert_same_up_to_gaps, classifier, make_data, regressor


def _providers(partition: list[list[int]], d: int) -> list[int]:
    owner = [0] * d
    for i, cols in enumerate(partition):
        for c in cols:
            owner[c] = i
    return owner


@pytest.mark.parametrize(("n_classes", "max_features"), [(2, "sqrt"), (3, 2), (2, None)])
def test_bins_mode_equals_central_reference(n_classes: int, max_features: object) -> None:
    X, y = make_data(n_classes=n_classes, seed=n_classes)
    clf = classifier(splitter="bins", max_bins=32, code_resolution=None, max_features=max_features, n_estimators=4,
                     max_depth=5)
    clf.set_params(partition=PARTITION).fit(X, y)
    ref, _ = train_forest(
        X, y, n_classes=n_classes, n_estimators=4, criterion="gini", grow=GrowParams(max_depth=5),
        max_features=max_features, bootstrap=True, binning=BinningParams(max_bins=32),  # type: ignore[arg-type]
        providers=_providers(PARTITION, X.shape[1]), random_state=7, classes=np.arange(n_classes),
    )
    fed = clf.plaintext_forest()
    assert len(fed.trees) == len(ref.trees)
    for a, b in zip(fed.trees, ref.trees, strict=True):
        assert a.n_nodes > 1
        assert_same_up_to_gaps(a, b, X)
    np.testing.assert_array_equal(clf.predict(X), ref.predict(X))
    np.testing.assert_allclose(clf.predict_proba(X), ref.predict_proba(X))


def test_bins_mode_regression_equals_central_reference() -> None:
    X, codes = make_data(seed=3)
    y = X[:, 0] * 0.5 + X[:, 1] - codes * 3.0
    reg = regressor(splitter="bins", max_bins=16, code_resolution=None, n_estimators=3, max_depth=4)
    reg.set_params(partition=PARTITION).fit(X, y)
    ref, _ = train_forest(X, y, n_classes=None, n_estimators=3, criterion="squared_error",
                          grow=GrowParams(max_depth=4), max_features="sqrt", binning=BinningParams(max_bins=16),
                          providers=_providers(PARTITION, X.shape[1]), random_state=7)
    for a, b in zip(reg.plaintext_forest().trees, ref.trees, strict=True):
        assert a.n_nodes == b.n_nodes
        assert_same_up_to_gaps(a, b, X)
    np.testing.assert_allclose(reg.predict(X), ref.predict(X), rtol=1e-12)


def test_random_range_candidates_are_spread_over_the_sampled_range(fitted: RevFRFClassifier) -> None:
    """FLE-Expan lines 8-10: every threshold lies inside [min, max] of its column."""
    X, _ = make_data()
    for p in fitted.participants_.values():
        for node in p.own_nodes().values():
            col = X[:, node.column]
            assert col.min() <= node.threshold < col.max()


@pytest.mark.parametrize("method", ["vertical", "test", "encrypted"])
def test_every_prediction_path_matches_the_plaintext_model(fitted: RevFRFClassifier, method: str) -> None:
    X, _ = make_data(seed=11)
    rows = X[:6] if method != "vertical" else X
    plain = fitted.plaintext_forest()
    np.testing.assert_allclose(fitted.predict_proba(rows, method=method), plain.predict_proba(rows))
    np.testing.assert_array_equal(fitted.predict(rows, method=method), plain.predict(rows))


def test_regression_paths_match(data: tuple[np.ndarray, np.ndarray]) -> None:
    X, codes = data
    y = X[:, 1] - 2.5 * codes
    reg = regressor().set_params(partition=PARTITION).fit(X, y)
    plain = reg.plaintext_forest().predict(X[:5])
    for method in ("vertical", "test", "encrypted"):
        np.testing.assert_allclose(reg.predict(X[:5], method=method), plain)


def test_hard_voting_is_the_majority_of_tree_votes(data: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = data
    clf = classifier(voting="hard", n_estimators=5).set_params(partition=PARTITION).fit(X, y)
    votes = np.stack([t.leaf_values(X).argmax(axis=1) for t in clf.plaintext_forest().trees])
    share = np.stack([(votes == k).mean(axis=0) for k in range(2)], axis=1)
    np.testing.assert_allclose(clf.predict_proba(X), share)


def test_depth_and_stopping_rules(data: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = data
    clf = classifier(max_depth=2, min_samples_leaf=20).set_params(partition=PARTITION).fit(X, y)
    for t in clf.plaintext_forest().trees:
        assert t.max_depth <= 2
        assert t.weight[t.is_leaf].min() >= 20


def test_depth_is_not_capped_by_the_number_of_features() -> None:
    """Erratum 2: features are drawn per node with reuse, so depth can exceed |F|."""
    X, y = make_data(n=400, seed=5)
    clf = classifier(max_depth=12, n_estimators=2).set_params(partition=[[c] for c in range(6)]).fit(X, y)
    assert max(t.max_depth for t in clf.plaintext_forest().trees) > X.shape[1]


def test_layer_per_round(fitted: RevFRFClassifier) -> None:
    """Two rounds per layer for the whole forest (expand, then split upload)."""
    depth = max(t.max_depth for t in fitted.plaintext_forest().trees)
    fit_rounds = fitted.transcript_.rounds
    assert fit_rounds <= 2 * depth + 2
