"""HistogramForestRegressor (spec "Regression"): the pooled central reference, secure aggregation, accuracy
against scikit-learn, the ring capacity check and the typed refusals."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from sklearn.datasets import make_friedman1
from sklearn.ensemble import RandomForestRegressor

import securetrees.protocols.histogram_forest.client as client_mod
import securetrees.protocols.histogram_forest.regressor as regressor_mod
import securetrees.protocols.histogram_forest.server as server_mod
from securetrees.errors import EncodingOverflowError, NotFittedError, ParameterError, ProtocolError
from securetrees.protocols.histogram_forest import Client, ForestConfig, HistogramForestRegressor, Server
from securetrees.protocols.histogram_forest.messages import LayerRequest, SetupRequest
from securetrees.protocols.histogram_forest.ring import RING, check_capacity, encode_targets
from securetrees.protocols.histogram_forest.testing import fit_parts
from securetrees.rand import DeterministicRandom
from securetrees.runtime import InProcessNetwork
from securetrees.trees.criteria import SquaredError
from securetrees.trees.grow import GrowParams, grow_tree

Parts = list[tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]]
STRUCTURE = ("left", "right", "feature", "threshold", "categorical", "missing_left", "weight")
RANGES = [(0.0, 10.0), (0.0, 20.0), None]
Y_RANGE = (-5.0, 25.0)


def make_parts(n_clients: int, rows: int, *, seed: int = 0) -> Parts:
    """Two numeric features, one categorical with 4 codes (3 % missing); a piecewise target plus noise."""
    gen = np.random.default_rng(seed)  # test data only
    parts: Parts = []
    for _ in range(n_clients):
        a = np.round(gen.uniform(0, 10, rows), 1)
        b = gen.integers(0, 21, rows).astype(np.float64)
        c = gen.integers(0, 4, rows).astype(np.float64)
        y = 2.0 * a + np.where(b > 12, 3.0, 0.0) + np.where(c == 2, -2.0, 0.0) + gen.normal(0, 0.5, rows)
        X = np.column_stack([a, b, c])
        X[gen.random(rows) < 0.03, 2] = np.nan
        parts.append((X, np.clip(y, *Y_RANGE)))
    return parts


def joined(parts: Parts) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    return np.vstack([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def declared(**kw: Any) -> HistogramForestRegressor:
    params: dict[str, Any] = dict(categorical_features=[False, False, True], categories=[0, 0, 4],
                                  feature_ranges=RANGES, y_range=Y_RANGE)
    params.update(kw)
    return HistogramForestRegressor(**params)


@pytest.mark.parametrize("edges", ["uniform", "auto"])
def test_plain_tree_equals_the_central_tree_on_the_pooled_encoded_targets(edges: str) -> None:
    """Summing (Σw, Σw·t1, Σw·t2) over clients is the central histogram of the pooled data: the tree is the
    central squared-error tree on the encoded targets, node for node; leaf values are its means mapped
    back to the target range."""
    parts = make_parts(3, 120)
    model = fit_parts(declared(n_estimators=1, max_depth=4, n_bins=8, bin_edges=edges, sampling="none",
                     max_features=None), parts)
    X, y = joined(parts)
    mapper = model.bin_mapper_
    assert mapper is not None
    bits = model.config_.y_bits
    t = encode_targets(y, *Y_RANGE, bits) * 2.0**-bits
    stats = np.column_stack([np.ones(y.size), t])
    central = grow_tree(mapper.transform(X), mapper, stats, SquaredError(), GrowParams(max_depth=4))
    tree = model.trees_[0]
    assert central.n_nodes > 9
    for name in STRUCTURE:
        np.testing.assert_array_equal(getattr(tree, name), getattr(central, name), err_msg=name)
    lo, hi = Y_RANGE
    np.testing.assert_allclose(tree.value, lo + (hi - lo) * central.value, rtol=0, atol=1e-9)


def test_fixed_point_error_of_the_leaves_is_within_half_a_step() -> None:
    """Against a float reference on the raw targets: the same splits, and each leaf mean within
    (high - low) · 2^-(bits+1) (one rounding per row, averaged)."""
    parts = make_parts(3, 120, seed=1)
    model = fit_parts(declared(n_estimators=1, max_depth=4, n_bins=8, sampling="none", max_features=None,
                     y_bits=20), parts)
    X, y = joined(parts)
    mapper = model.bin_mapper_
    assert mapper is not None
    raw = grow_tree(mapper.transform(X), mapper, np.column_stack([np.ones(y.size), y, y * y]), SquaredError(),
                    GrowParams(max_depth=4))
    tree = model.trees_[0]
    for name in STRUCTURE:
        np.testing.assert_array_equal(getattr(tree, name), getattr(raw, name), err_msg=name)
    step = (Y_RANGE[1] - Y_RANGE[0]) * 2.0**-20
    err = np.abs(tree.value - raw.value).max()
    assert 0 < err <= step / 2 + 1e-12


def test_secure_aggregation_grows_the_same_forest_as_plaintext() -> None:
    """Bootstrap, feature draws and the default quantile edges: the masked sums decode to the plain sums."""
    parts = make_parts(4, 100, seed=2)
    common: dict[str, Any] = dict(n_estimators=3, max_depth=4, random_state=7, max_features=2)
    plain = fit_parts(declared(**common), parts)
    secure = fit_parts(declared(secure_aggregation=True, **common), parts, rng=DeterministicRandom("hfr/sa"))
    assert all(a.same_as(b) for a, b in zip(plain.trees_, secure.trees_, strict=True))
    X, _ = joined(parts)
    np.testing.assert_array_equal(plain.predict(X), secure.predict(X))
    assert secure.transcript_.rounds == plain.transcript_.rounds + 1
    assert secure.config_.grid_cells == 1024  # the default edges are the grid round's


def test_r2_close_to_scikit_learn_random_forest() -> None:
    """Friedman #1 (10 features, 5 informative), 5 clients: R² of the federated forest within 0.02 of
    scikit-learn's RandomForestRegressor with the same trees, depth and features per split (seeded data
    and forests: deterministic)."""
    X, y = make_friedman1(n_samples=4000, noise=1.0, random_state=0)
    Xtr, ytr, Xte, yte = X[:3000], y[:3000], X[3000:], y[3000:]
    parts = [(Xtr[i::5], ytr[i::5]) for i in range(5)]
    ours = fit_parts(HistogramForestRegressor(n_estimators=10, max_depth=6, random_state=0), parts).score(Xte, yte)
    ref = RandomForestRegressor(n_estimators=10, max_depth=6, random_state=0).fit(Xtr, ytr).score(Xte, yte)
    assert ref > 0.75
    assert ours >= ref - 0.02


def test_inferred_target_range_and_constant_targets() -> None:
    parts = make_parts(2, 60, seed=3)
    model = fit_parts(HistogramForestRegressor(n_estimators=2, max_depth=3, random_state=0), parts)
    _, y = joined(parts)
    assert model.y_range_ == (float(y.min()), float(y.max()))
    flat = [(X, np.full(X.shape[0], 4.0)) for X, _ in parts]
    const = fit_parts(HistogramForestRegressor(n_estimators=2, max_depth=3, random_state=0), flat)
    np.testing.assert_allclose(const.predict(parts[0][0]), 4.0)
    assert all(t.n_nodes == 1 for t in const.trees_)  # a pure root is never split
    assert const.score(parts[0][0], np.full(60, 4.0)) == 1.0


# -- the ring capacity ---------------------------------------------------------------------------------


def test_check_capacity_boundary() -> None:
    check_capacity(2**31 - 1, 1, 32)  # (2^31 - 1) · 2^32 < 2^63
    with pytest.raises(EncodingOverflowError):
        check_capacity(2**31, 1, 32)  # exactly 2^63
    check_capacity(2**30 // 3, 3, 32)
    with pytest.raises(EncodingOverflowError):
        check_capacity(2**30, 4, 31)  # 2^63 again
    with pytest.raises(ParameterError):
        check_capacity(1, 0, 32)


def test_facade_refuses_a_precision_the_ring_cannot_hold() -> None:
    parts = make_parts(3, 40)
    with pytest.raises(EncodingOverflowError):
        fit_parts(declared(y_bits=60), parts)  # 40 rows · 3 clients · 2^60 >= 2^63


def test_a_client_refuses_a_setup_whose_sums_can_overflow() -> None:
    X, y = make_parts(1, 40)[0]
    client = Client("c", InProcessNetwork(), X, y, task="regression")
    with pytest.raises(EncodingOverflowError):
        client.on_setup("server", regression_setup(y_bits=60, n_clients=3))


def test_planted_missing_capacity_check_wraps_the_sums(monkeypatch: pytest.MonkeyPatch) -> None:
    """Companion: without the check the same run wraps around 2^64 and the server decodes a wrong root
    mean, which is what the typed refusal prevents (with the check and 32 bits the root mean is exact).
    Two bins of about 60 rows each: every cell's Σ t1 exceeds 2^63 at 60 bits."""
    parts = make_parts(3, 40)
    _, y = joined(parts)
    common: dict[str, Any] = dict(n_estimators=1, max_depth=1, n_bins=2, sampling="none", secure_aggregation=True)
    fine = fit_parts(declared(y_bits=32, **common), parts, rng=DeterministicRandom("hfr/wrap"))
    assert float(fine.trees_[0].value[0, 0]) == pytest.approx(float(y.mean()), abs=1e-8)
    for module in (client_mod, regressor_mod, server_mod):
        monkeypatch.setattr(module, "check_capacity", lambda rows, parties, bits: None)
    wrapped = fit_parts(declared(y_bits=60, **common), parts, rng=DeterministicRandom("hfr/wrap"))
    assert abs(float(wrapped.trees_[0].value[0, 0]) - float(y.mean())) > 1.0
    assert RING.add(RING.zeros(1) + np.uint64(2**63), np.array([2**63], dtype=np.uint64))[0] == 0


# -- typed refusals --------------------------------------------------------------------------------------


def regression_setup(**kw: Any) -> SetupRequest:
    params: dict[str, Any] = dict(
        session=bytes(16), n_features=3, categories=(0, 0, 4), n_classes=0, n_trees=1, histogram="fixed",
        n_bins=4, low=np.array([0.0, 0.0, np.nan]), high=np.array([10.0, 20.0, np.nan]), sampling="none",
        subsample_fraction=0.5, max_multiplicity=1, features_per_node=3, max_depth=2, grid_cells=0, epsilon=None,
        input_epsilon=None, secure=False, task="regression", y_low=Y_RANGE[0], y_high=Y_RANGE[1], y_bits=32,
        n_clients=3,
    )
    params.update(kw)
    return SetupRequest(**params)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        (dict(epsilon=1.0), "differential privacy is not implemented"),
        (dict(epsilon=1.0, secure_aggregation=True), "differential privacy is not implemented"),
        (dict(histogram="streaming"), "streaming"),
        (dict(criterion="gini"), "criterion"),
        (dict(y_bits=61), "y_bits"),
        (dict(y_bits=True), "y_bits"),
        (dict(y_range=(3.0, 3.0)), "low < high"),
        (dict(y_range=(0.0, float("inf"))), "low < high"),
        (dict(y_range=(0.0, 1.0)), "outside the declared y_range"),
        (dict(y_range="ab"), "pair"),
        (dict(bin_edges="median"), "bin_edges"),
        (dict(secure_aggregation=True, n_bins=1), "n_bins"),
    ],
)
def test_bad_parameters_are_typed_errors(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(ParameterError, match=message):
        fit_parts(declared(**kw), make_parts(3, 30))


@pytest.mark.parametrize(
    "bad_y", [np.array([1.0, np.nan, 2.0]), np.array([1.0, np.inf, 2.0]), np.array(["a", "b", "c"])]
)
def test_bad_targets_are_typed_errors(bad_y: npt.NDArray[Any]) -> None:
    X = np.zeros((3, 3))
    with pytest.raises(ParameterError):
        fit_parts(HistogramForestRegressor(), [(X, bad_y)])
    with pytest.raises(ParameterError):
        Client("c", InProcessNetwork(), X, bad_y, task="regression")


def test_prediction_errors() -> None:
    with pytest.raises(NotFittedError):
        HistogramForestRegressor().predict(np.zeros((1, 3)))
    model = fit_parts(declared(n_estimators=1, max_depth=2), make_parts(2, 30))
    with pytest.raises(ParameterError):
        model.predict(np.zeros((2, 5)))
    with pytest.raises(ParameterError):
        model.predict(np.zeros((2, 2)))
    with pytest.raises(ParameterError):
        model.score(np.zeros((2, 3)), np.zeros(3))


def test_client_refusals() -> None:
    X, y = make_parts(1, 30)[0]
    reg = Client("c", InProcessNetwork(), X, y, task="regression")
    with pytest.raises(ProtocolError, match="differential privacy"):
        reg.on_setup("server", regression_setup(epsilon=1.0))
    with pytest.raises(ProtocolError, match="declared range"):
        Client("d", InProcessNetwork(), X, y + 100.0, task="regression").on_setup("server", regression_setup())
    with pytest.raises(ProtocolError, match="fixed bins"):
        Client("e", InProcessNetwork(), X, y, task="regression").on_setup(
            "server", regression_setup(histogram="streaming"))
    labels = Client("f", InProcessNetwork(), X, (y > 10).astype(np.int64))
    with pytest.raises(ProtocolError, match="classification data"):
        labels.on_setup("server", regression_setup())
    with pytest.raises(ParameterError):
        Client("g", InProcessNetwork(), X, y, task="ranking")
    with pytest.raises(ParameterError):
        regression_setup(n_classes=2)
    with pytest.raises(ParameterError):
        regression_setup(n_clients=0)


def test_server_refuses_regression_with_dp_or_streaming() -> None:
    base: dict[str, Any] = dict(n_features=3, categories=(0, 0, 4), n_classes=0, n_trees=1, max_depth=2, n_bins=4,
                                histogram="fixed", features_per_node=3, criterion="squared_error",
                                task="regression", y_low=0.0, y_high=1.0, y_bits=32)
    for change in (dict(epsilon=1.0), dict(histogram="streaming"), dict(criterion="gini")):
        with pytest.raises(ParameterError):
            Server("s", InProcessNetwork(), ["a", "b", "c"], ForestConfig(**{**base, **change}))


def test_regression_layer_reply_is_the_exact_integer_histogram() -> None:
    """One client, root layer, no sampling: the reply holds (count, Σt1, Σt2) per (feature, bin) as int64."""
    X, y = make_parts(1, 50, seed=4)[0]
    client = Client("c", InProcessNetwork(), X, y, task="regression")
    client.on_setup("server", regression_setup(n_clients=1))
    e_i, e_f, e_b = np.empty(0, np.int64), np.empty(0, np.float64), np.empty(0, bool)
    reply = client.on_layer("server", LayerRequest(
        step=0, tree=0, layer=0, split_feature=e_i, split_threshold=e_f, split_categorical=e_b,
        split_missing_left=e_b, keep=np.zeros(1, np.int64), features=np.array([[True, False, True]])))
    counts = np.asarray(reply.counts).reshape(2, -1, 3)  # (pairs, slots + 1, stats)
    t = encode_targets(y, *Y_RANGE, 32)
    for pair in counts:
        np.testing.assert_array_equal(pair.sum(axis=0), [50, t[:, 0].sum(), t[:, 1].sum()])
    missing = np.isnan(X[:, 2])
    np.testing.assert_array_equal(counts[1, -1], [missing.sum(), t[missing, 0].sum(), t[missing, 1].sum()])
