"""The protocol against the central reference, mode against mode, and the privacy ledger
(spec "Message flow", "Server per layer", "Differential privacy and its accounting")."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from securetrees.protocols.histogram_forest import HistogramForestClassifier
from securetrees.protocols.histogram_forest.schema import fixed_mapper
from securetrees.protocols.histogram_forest.testing import fit_parts
from securetrees.rand import DeterministicRandom
from securetrees.trees.binning import BinMapper
from securetrees.trees.criteria import Gini
from securetrees.trees.grow import GrowParams, grow_tree
from securetrees.trees.tree import Tree

FIELDS_BUT_PROVIDER = ("left", "right", "feature", "threshold", "categorical", "missing_left", "weight", "value")


def onehot(y: np.ndarray, n_classes: int) -> np.ndarray:
    out = np.zeros((y.size, n_classes))
    out[np.arange(y.size), y] = 1.0
    return out


def joined(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    return np.vstack([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def assert_same(a: Tree, b: Tree, fields: tuple[str, ...]) -> None:
    for name in fields:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)


@pytest.mark.parametrize("edges", ["uniform", "auto"])
def test_fixed_bins_tree_equals_central_tree_on_joined_data(parts3: Any, schema: dict[str, Any], edges: str) -> None:
    """Summing aligned count vectors over clients is the central histogram on the joined data (with the
    uniform edges, and with the default quantile edges of the grid round)."""
    model = fit_parts(HistogramForestClassifier(
        n_estimators=1, max_depth=4, n_bins=8, histogram="fixed", bin_edges=edges, sampling="none",
        max_features=None, **schema
    ), parts3)
    X, y = joined(parts3)
    cfg = model.config_
    assert cfg.low is not None and cfg.high is not None and model.bin_mapper_ is not None
    mapper = model.bin_mapper_
    if edges == "uniform":
        assert cfg.grid_cells == 0
        uniform = fixed_mapper(cfg.categories, cfg.low, cfg.high, cfg.n_bins)
        assert all(np.array_equal(a, b) for a, b in zip(mapper.edges, uniform.edges, strict=True))
    else:
        assert cfg.grid_cells == 1024
    central = grow_tree(mapper.transform(X), mapper, onehot(y, 2), Gini(), GrowParams(max_depth=4))
    assert central.n_nodes > 7
    assert_same(model.trees_[0], central, FIELDS_BUT_PROVIDER)


def test_streaming_tree_without_merging_equals_exact_central_tree(parts3: Any) -> None:
    """With b above the number of distinct values no bin merges: the paper's protocol then finds the
    exact central splits (thresholds may differ only inside gaps with no training value)."""
    model = fit_parts(HistogramForestClassifier(
        n_estimators=1, max_depth=4, n_bins=128, histogram="streaming", sampling="none", max_features=None,
        categorical_features=[False, False, True],
    ), parts3)
    X, y = joined(parts3)
    mapper = BinMapper.fit(X, max_bins=128, categorical=[False, False, True])
    central = grow_tree(mapper.transform(X), mapper, onehot(y, 2), Gini(), GrowParams(max_depth=4))
    assert central.n_nodes > 7
    assert_same(model.trees_[0], central, tuple(f for f in FIELDS_BUT_PROVIDER if f != "threshold"))
    np.testing.assert_array_equal(model.trees_[0].apply(X), central.apply(X))


def test_secure_aggregation_grows_the_same_forest_as_plain_fixed_bins(parts3: Any, schema: dict[str, Any]) -> None:
    common = dict(n_estimators=3, max_depth=3, n_bins=6, histogram="fixed", random_state=7, **schema)
    plain = fit_parts(HistogramForestClassifier(**common), parts3)
    secure = fit_parts(HistogramForestClassifier(secure_aggregation=True, **common), parts3,
                       rng=DeterministicRandom("hf/sa"))
    for a, b in zip(plain.trees_, secure.trees_, strict=True):
        assert a.same_as(b)
    X, _ = joined(parts3)
    np.testing.assert_array_equal(plain.predict_proba(X), secure.predict_proba(X))
    # One extra round for the key directory; the masked vectors are as long as the plain ones.
    assert secure.transcript_.rounds == plain.transcript_.rounds + 1


def test_quantile_edges_from_the_private_grid_round(parts3: Any, schema: dict[str, Any]) -> None:
    """The first private round: edges at the grid boundaries where the joined data's cumulative share
    reaches k/b; secure aggregation agrees on the same edges and grows the same forest."""
    common = dict(n_estimators=2, max_depth=3, n_bins=4, histogram="fixed", bin_edges="quantile", grid_cells=20,
                  random_state=5, **schema)
    plain = fit_parts(HistogramForestClassifier(**common), parts3)
    secure = fit_parts(HistogramForestClassifier(secure_aggregation=True, **common), parts3,
                       rng=DeterministicRandom("hf/q"))
    assert all(a.same_as(b) for a, b in zip(plain.trees_, secure.trees_, strict=True))
    X, _ = joined(parts3)
    for f, (lo, hi) in enumerate([(0.0, 10.0), (0.0, 20.0)]):
        boundaries = lo + (hi - lo) * np.arange(1, 20) / 20
        share = np.array([np.mean(X[:, f] <= g) for g in boundaries])
        expected = np.unique([boundaries[np.argmax(share >= q)] for q in (0.25, 0.5, 0.75)])
        used = plain.trees_[0].threshold[plain.trees_[0].feature == f]
        assert set(np.round(used[np.isfinite(used)], 9)) <= set(np.round(expected, 9))
    types = secure.transcript_.types_received("client0")
    assert types["histogram_forest.grid"] == 1 and types["histogram_forest.edges"] == 1


def test_accountant_counts_the_grid_round(parts3: Any, schema: dict[str, Any]) -> None:
    model = fit_parts(HistogramForestClassifier(
        n_estimators=2, max_depth=2, n_bins=4, epsilon=10.0, bin_edges="quantile", grid_cells=16,
        sampling="subsample", random_state=0, **schema,
    ), parts3, rng=DeterministicRandom("hf/grid"))
    grid, *layers = model.privacy_ledger_
    assert (grid.tree, grid.layer, grid.sensitivity, grid.epsilon) == (-1, -1, 2, pytest.approx(1.0))
    assert all(r.epsilon == pytest.approx(9.0 / 4) for r in layers) and len(layers) <= 4
    assert model.client_epsilon_spent_ == pytest.approx([model.epsilon_spent_] * 3)


def test_accountant_total_matches_hand_count(make: Any, schema: dict[str, Any]) -> None:
    """2 trees of depth 3 on data big enough that every layer splits: 2 · 3 releases of ε / 6 each."""
    parts = make(3, 400, seed=3)
    model = fit_parts(HistogramForestClassifier(
        n_estimators=2, max_depth=3, n_bins=6, epsilon=30.0, sampling="subsample", random_state=1, **schema
    ), parts, rng=DeterministicRandom("hf/acct"))
    ledger = model.privacy_ledger_
    assert [(r.tree, r.layer) for r in ledger] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    assert all(r.epsilon == pytest.approx(5.0) and r.sensitivity == 1 * 1 for r in ledger)  # sqrt(3) -> 1 feature
    assert model.epsilon_spent_ == pytest.approx(30.0)
    assert model.client_epsilon_spent_ == pytest.approx([30.0] * 3)
    layer_msgs = [r for r in model.transcript_.view("client0") if r.type_name == "histogram_forest.layer"]
    assert len(layer_msgs) == len(ledger)


def test_accountant_counts_only_layers_actually_released(make: Any, schema: dict[str, Any]) -> None:
    """A tree that stops early spends less than its share; the ledger still matches the layer requests."""
    parts = make(3, 30, seed=4)
    model = fit_parts(HistogramForestClassifier(
        n_estimators=2, max_depth=6, n_bins=4, epsilon=12.0, sampling="bootstrap", max_features=None,
        random_state=2, **schema,
    ), parts, rng=DeterministicRandom("hf/acct2"))
    ledger = model.privacy_ledger_
    layer_msgs = [r for r in model.transcript_.view("client1") if r.type_name == "histogram_forest.layer"]
    assert len(layer_msgs) == len(ledger) <= 12
    assert all(r.sensitivity == 3 * 3 for r in ledger)  # bootstrap cap 3 · all 3 features
    assert model.epsilon_spent_ == pytest.approx(len(ledger) * 12.0 / 12)


def test_multiclass_and_soft_vote(make: Any) -> None:
    parts = make(2, 150, seed=5, n_classes=3)
    model = HistogramForestClassifier(n_estimators=4, max_depth=4, random_state=0, categorical_features=[False,
            False, True])
    fit_parts(model, parts)
    X, y = joined(parts)
    proba = model.predict_proba(X)
    assert proba.shape == (X.shape[0], 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert (model.predict(X) == y).mean() > 0.7
    assert set(np.unique(model.predict(X))) <= {0, 1, 2}


def test_string_labels_round_trip(parts3: Any) -> None:
    named = [(X, np.where(y == 1, "yes", "no")) for X, y in parts3]
    model = fit_parts(HistogramForestClassifier(n_estimators=2, max_depth=3, random_state=0), named)
    assert list(model.classes_) == ["no", "yes"]
    assert set(model.predict(named[0][0])) <= {"no", "yes"}


def test_random_state_reproduces_the_forest(parts3: Any) -> None:
    a = fit_parts(HistogramForestClassifier(n_estimators=3, max_depth=3, random_state=11), parts3)
    b = fit_parts(HistogramForestClassifier(n_estimators=3, max_depth=3, random_state=11), parts3)
    assert all(s.same_as(t) for s, t in zip(a.trees_, b.trees_, strict=True))


def test_input_perturbation_trains_and_reports_its_epsilon(parts3: Any, schema: dict[str, Any]) -> None:
    model = fit_parts(HistogramForestClassifier(
        n_estimators=2, max_depth=3, epsilon=2.0, noise="input", random_state=0, **schema
    ), parts3, rng=DeterministicRandom("hf/input"))
    assert model.epsilon_spent_ == 2.0 and model.privacy_ledger_ == []
    assert model.predict_proba(parts3[0][0]).shape == (120, 2)


def test_ranges_round_when_no_ranges_are_declared(parts3: Any) -> None:
    """Fixed bins without declared ranges: one extra round reveals each client's min and max (spec)."""
    model = HistogramForestClassifier(n_estimators=1, max_depth=2, histogram="fixed", max_features=None,
                                      sampling="none", categorical_features=[False, False, True])
    fit_parts(model, parts3)
    assert model.transcript_.types_received("server")["histogram_forest.ranges_reply"] == 3
    X, _ = joined(parts3)
    cfg = model.config_
    assert cfg.low is None
    thresholds = model.trees_[0].threshold[model.trees_[0].feature == 0]
    lo, hi = X[:, 0].min(), X[:, 0].max()
    assert thresholds.size and np.all((thresholds > lo) & (thresholds < hi))
