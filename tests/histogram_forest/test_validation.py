"""Bad input to the facade and out-of-order or malformed messages to the roles: each raises one typed error."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from securetrees.errors import DecodeError, NotFittedError, ParameterError, ProtocolError, UnexpectedMessage
from securetrees.protocols.histogram_forest import Client, HistogramForestClassifier
from securetrees.protocols.histogram_forest.messages import (
    EdgesNotice,
    GridRequest,
    KeysRequest,
    LayerRequest,
    RangesRequest,
    SetupRequest,
)
from securetrees.protocols.histogram_forest.testing import fit_parts
from securetrees.runtime import InProcessNetwork, decode, encode


def test_clients_with_different_feature_sets(parts3: Any) -> None:
    parts = [*parts3[:2], (parts3[2][0][:, :2], parts3[2][1])]
    with pytest.raises(ParameterError, match="different feature sets"):
        fit_parts(HistogramForestClassifier(), parts)


def test_empty_client(parts3: Any) -> None:
    parts = [*parts3[:2], (np.empty((0, 3)), np.empty(0, dtype=np.int64))]
    with pytest.raises(ParameterError, match="empty"):
        fit_parts(HistogramForestClassifier(), parts)
    with pytest.raises(ParameterError):
        fit_parts(HistogramForestClassifier(), [])


@pytest.mark.parametrize("epsilon", [0.0, -1.0, float("nan"), float("inf")])
def test_non_positive_epsilon(parts3: Any, schema: dict[str, Any], epsilon: float) -> None:
    with pytest.raises(ParameterError, match="epsilon"):
        fit_parts(HistogramForestClassifier(epsilon=epsilon, **schema), parts3)


def test_nan_labels_and_infinite_features(parts3: Any) -> None:
    X, y = parts3[0]
    with pytest.raises(ParameterError, match="NaN"):
        fit_parts(HistogramForestClassifier(), [(X, np.where(y == 1, np.nan, 0.0)), *parts3[1:]])
    X_inf = X.copy()
    X_inf[0, 0] = np.inf
    with pytest.raises(ParameterError, match="infinite"):
        fit_parts(HistogramForestClassifier(), [(X_inf, y), *parts3[1:]])


def test_nan_features_are_missing_values_not_errors(parts3: Any) -> None:
    """NaN in X means "missing" (its own histogram slot, tried on both sides of each split)."""
    assert np.isnan(parts3[0][0]).any()
    model = fit_parts(HistogramForestClassifier(n_estimators=2, max_depth=3, random_state=0), parts3)
    assert np.isfinite(model.predict_proba(parts3[0][0])).all()


def test_refused_combinations(parts3: Any, schema: dict[str, Any]) -> None:
    with pytest.raises(ParameterError, match="at least 3"):
        fit_parts(HistogramForestClassifier(secure_aggregation=True, **schema), parts3[:2])
    with pytest.raises(ParameterError, match="streaming"):
        fit_parts(HistogramForestClassifier(epsilon=1.0, histogram="streaming", **schema), parts3)
    with pytest.raises(ParameterError, match="streaming"):
        fit_parts(HistogramForestClassifier(secure_aggregation=True, histogram="streaming", **schema), parts3)
    declared: dict[str, Any] = dict(categorical_features=[False, False, True], categories=[0, 0, 4], classes=[0, 1])
    with pytest.raises(ParameterError, match="feature_ranges"):
        fit_parts(HistogramForestClassifier(epsilon=1.0, **declared), parts3)
    with pytest.raises(ParameterError):
        fit_parts(HistogramForestClassifier(epsilon=1.0, feature_ranges=[(0.0, 10.0), (5.0, 5.0), None],
                                            **declared), parts3)
    for bad in (dict(n_bins=1), dict(max_depth=0), dict(n_estimators=True), dict(noise="output"),
                dict(criterion="mse"), dict(histogram="quantile"), dict(sampling="poisson")):
        with pytest.raises(ParameterError):
            fit_parts(HistogramForestClassifier(**bad), parts3)  # type: ignore[arg-type]


def test_labels_of_a_single_class_and_bad_categories(parts3: Any) -> None:
    with pytest.raises(ParameterError, match="two classes"):
        fit_parts(HistogramForestClassifier(), [(X, np.zeros_like(y)) for X, y in parts3])
    X, y = parts3[0]
    bad = X.copy()
    bad[0, 2] = 1.5
    with pytest.raises(ParameterError, match="integer codes"):
        fit_parts(HistogramForestClassifier(categorical_features=[False, False, True]), [(bad, y)])


def test_predict_before_fit_and_with_wrong_width(parts3: Any) -> None:
    with pytest.raises(NotFittedError):
        HistogramForestClassifier().predict(parts3[0][0])
    model = fit_parts(HistogramForestClassifier(n_estimators=1, max_depth=2), parts3)
    with pytest.raises(ParameterError):
        model.predict(parts3[0][0][:, :2])


# -- the client role on its own --------------------------------------------------------------

def setup_msg(**changes: Any) -> SetupRequest:
    fields: dict[str, Any] = dict(
        session=bytes(16), n_features=3, categories=(0, 0, 4), n_classes=2, n_trees=2, histogram="fixed",
        n_bins=4, low=np.array([0.0, 0.0, np.nan]), high=np.array([10.0, 20.0, np.nan]), sampling="none",
        subsample_fraction=1.0, max_multiplicity=1, features_per_node=2, max_depth=3, grid_cells=0, epsilon=None,
        input_epsilon=None, secure=False,
    )
    fields.update(changes)
    return SetupRequest(**fields)


def layer_msg(step: int, tree: int = 0, features: list[list[bool]] | None = None) -> LayerRequest:
    e_i, e_f, e_b = np.empty(0, np.int64), np.empty(0, np.float64), np.empty(0, bool)
    return LayerRequest(
        step=step, tree=tree, layer=0, split_feature=e_i, split_threshold=e_f, split_categorical=e_b,
        split_missing_left=e_b, keep=np.zeros(1, np.int64),
        features=np.array(features or [[True, False, False]], dtype=bool),
    )


def make_client(parts3: Any, **kw: Any) -> Client:
    X, y = parts3[0]
    return Client("client0", InProcessNetwork(), X, y, seed=1, **kw)


def test_client_refuses_out_of_order_and_repeated_steps(parts3: Any) -> None:
    client = make_client(parts3)
    with pytest.raises(UnexpectedMessage, match="before setup"):
        client.on_layer("server", layer_msg(0))
    client.on_setup("server", setup_msg())
    with pytest.raises(UnexpectedMessage):
        client.on_setup("server", setup_msg())
    client.on_layer("server", layer_msg(0))
    with pytest.raises(UnexpectedMessage, match="never repeated"):
        client.on_layer("server", layer_msg(0, tree=1))
    with pytest.raises(UnexpectedMessage, match="never repeated"):
        client.on_layer("server", layer_msg(5, tree=1))
    with pytest.raises(UnexpectedMessage, match="cannot start"):
        client.on_layer("server", layer_msg(1, tree=3))


def test_client_refuses_more_features_than_declared(parts3: Any) -> None:
    """The sensitivity Δ = m·k holds only if no node asks for more than k features."""
    client = make_client(parts3)
    client.on_setup("server", setup_msg())
    with pytest.raises(ProtocolError, match="features"):
        client.on_layer("server", layer_msg(0, features=[[True, True, True]]))


def test_client_refuses_a_schema_that_does_not_fit_its_data(parts3: Any) -> None:
    with pytest.raises(ProtocolError, match="features"):
        make_client(parts3).on_setup("server", setup_msg(n_features=4, categories=(0, 0, 4, 0),
                                                         low=np.zeros(4), high=np.ones(4)))
    with pytest.raises(ProtocolError, match="categories"):
        make_client(parts3).on_setup("server", setup_msg(categories=(0, 0, 3)))
    X, y = parts3[0]
    shifted = Client("c", InProcessNetwork(), X, y + 5)
    with pytest.raises(ProtocolError, match="classes"):
        shifted.on_setup("server", setup_msg())


def test_client_enforces_its_own_budget(parts3: Any) -> None:
    with pytest.raises(ProtocolError, match="at most"):
        make_client(parts3, max_epsilon=1.0).on_setup("server", setup_msg(epsilon=2.0))
    with pytest.raises(ProtocolError, match="without differential privacy"):
        make_client(parts3, max_epsilon=1.0).on_ranges("server", RangesRequest(numeric=np.array([True, True, False])))
    reply = make_client(parts3).on_ranges("server", RangesRequest(numeric=np.array([True, True, False])))
    assert reply.low[0] == parts3[0][0][:, 0].min() and np.isnan(reply.high[2])


def test_client_checks_the_key_directory(parts3: Any) -> None:
    client = make_client(parts3)
    client.on_setup("server", setup_msg(secure=True))
    with pytest.raises(UnexpectedMessage, match="key exchange"):
        client.on_layer("server", layer_msg(0))
    with pytest.raises(ProtocolError, match="own public key"):
        client.on_keys("server", KeysRequest(public_keys={"client0": bytes(32), "a": bytes(32), "b": bytes(32)}))
    plain = make_client(parts3)
    plain.on_setup("server", setup_msg())
    with pytest.raises(UnexpectedMessage):
        plain.on_keys("server", KeysRequest(public_keys={}))


def test_client_grid_and_edges_rounds_in_order(parts3: Any) -> None:
    client = make_client(parts3)
    client.on_setup("server", setup_msg(grid_cells=16))
    with pytest.raises(UnexpectedMessage, match="bin edges"):
        client.on_layer("server", layer_msg(0))
    edges = [np.array([2.0, 5.0]), np.array([10.0]), np.empty(0)]
    with pytest.raises(UnexpectedMessage, match="after the grid"):
        client.on_edges("server", EdgesNotice(edges=edges))
    with pytest.raises(UnexpectedMessage):
        client.on_grid("server", GridRequest(cells=8))  # not the announced grid
    reply = client.on_grid("server", GridRequest(cells=16))
    assert reply.counts.shape == (2 * 16,) and int(reply.counts.sum()) == 2 * 120
    with pytest.raises(UnexpectedMessage):
        client.on_grid("server", GridRequest(cells=16))
    with pytest.raises(ProtocolError, match="edges"):
        client.on_edges("server", EdgesNotice(edges=[np.array([5.0, 2.0]), np.array([10.0]), np.empty(0)]))
    client.on_edges("server", EdgesNotice(edges=edges))
    client.on_layer("server", layer_msg(0))
    plain = make_client(parts3)
    plain.on_setup("server", setup_msg())
    with pytest.raises(UnexpectedMessage):
        plain.on_grid("server", GridRequest(cells=16))


def test_bad_client_construction() -> None:
    net = InProcessNetwork()
    with pytest.raises(ParameterError):
        Client("a", net, np.empty((0, 2)), np.empty(0, dtype=np.int64))
    with pytest.raises(ParameterError):
        Client("b", net, np.ones((2, 2)), np.array([0.5, 1.0]))


def test_malformed_messages_do_not_decode() -> None:
    good = encode(layer_msg(0))
    assert isinstance(decode(good), LayerRequest)
    with pytest.raises(ParameterError):
        LayerRequest(**{**layer_msg(0).__dict__, "keep": np.zeros(2, np.int64)})  # one feature row, two nodes
    with pytest.raises(ParameterError):
        setup_msg(epsilon=-1.0)
    with pytest.raises(DecodeError):
        decode(good[:-3])


@given(st.binary(max_size=200))
def test_decoder_fuzz(data: bytes) -> None:
    try:
        decode(b"ST\x01" + data)
    except DecodeError:
        pass


# -- DP: nothing of the schema from the pooled data, no ranges round (issue 18 part 2) ---------------

def test_dp_requires_declared_classes_and_categories(parts3: Any, schema: dict[str, Any]) -> None:
    undeclared = {k: v for k, v in schema.items() if k != "classes"}
    with pytest.raises(ParameterError, match="declare classes"):
        fit_parts(HistogramForestClassifier(epsilon=1.0, **undeclared), parts3)
    undeclared = {k: v for k, v in schema.items() if k != "categories"}
    with pytest.raises(ParameterError, match="declare categories"):
        fit_parts(HistogramForestClassifier(epsilon=1.0, **undeclared), parts3)
    with pytest.raises(ParameterError, match="declare classes"):
        fit_parts(HistogramForestClassifier(epsilon=1.0, noise="input", **{**schema, "classes": None}), parts3)
    X, y = parts3[0]
    with pytest.raises(ParameterError, match="outside the declared classes"):
        fit_parts(HistogramForestClassifier(epsilon=1.0, **schema), [(X, np.where(y == 1, 7, 0)), *parts3[1:]])
    for bad in ([0, 0, 1], [1], [[0, 1], [1, 0]]):
        with pytest.raises(ParameterError):
            fit_parts(HistogramForestClassifier(**{**schema, "classes": bad}), parts3)
    # Without DP both are still inferred; without categorical features no categories are needed.
    model = fit_parts(HistogramForestClassifier(n_estimators=1, max_depth=2, categorical_features=[False, False,
            True]), parts3)
    assert model.classes_.tolist() == [0, 1] and model.config_.categories == (0, 0, 4)
    numeric = [(X[:, :2], y) for X, y in parts3]
    fit_parts(HistogramForestClassifier(n_estimators=1, max_depth=2, epsilon=5.0, classes=[0, 1],
                              feature_ranges=schema["feature_ranges"][:2]), numeric)


def _schema_of(parts: Any, schema: dict[str, Any]) -> tuple[Any, Any]:
    model = fit_parts(HistogramForestClassifier(n_estimators=1, max_depth=1, epsilon=5.0, **schema), parts)
    return model.classes_.tolist(), model.config_.categories


def _neighbours(parts3: Any) -> tuple[Any, Any]:
    """D: labels {0, 1} and category codes {0, 1, 2}; D' adds one row labelled 2 with code 3."""
    parts = [(np.where(X == 3, 2, X), y) for X, y in parts3]
    X0, y0 = parts[0]
    return parts, [(np.vstack([X0, [[1.0, 1.0, 3.0]]]), np.append(y0, 2)), *parts[1:]]


def test_dp_schema_does_not_depend_on_a_single_record(parts3: Any, schema: dict[str, Any]) -> None:
    """classes_ and the number of category slots are the declared ones on neighbouring datasets."""
    declared = {**schema, "classes": [0, 1, 2]}
    small, large = _neighbours(parts3)
    assert _schema_of(small, declared) == _schema_of(large, declared) == ([0, 1, 2], (0, 0, 4))


def test_planted_inferred_schema_is_caught(parts3: Any, schema: dict[str, Any], monkeypatch: Any) -> None:
    """Planted leak: the facade infers classes and categories from the pooled data under DP (the old code)."""
    import securetrees.protocols.histogram_forest.classifier as facade

    real_classes, real_schema = facade.HistogramForestClassifier._classes, facade.HistogramForestClassifier._schema

    def inferred_classes(self: Any, ys: Any) -> Any:
        return np.unique(np.concatenate(ys))

    def inferred_schema(self: Any, d: int, Xs: Any) -> Any:
        declared, self.categories = self.categories, None
        saved, self.epsilon = self.epsilon, None  # the inference branch runs only without DP now
        try:
            categories, _, _ = real_schema(self, d, Xs)
        finally:
            self.categories, self.epsilon = declared, saved
        return (categories, *real_schema(self, d, Xs)[1:])

    assert real_classes is not inferred_classes
    monkeypatch.setattr(facade.HistogramForestClassifier, "_classes", inferred_classes)
    monkeypatch.setattr(facade.HistogramForestClassifier, "_schema", inferred_schema)
    small, large = _neighbours(parts3)
    declared = {**schema, "classes": [0, 1, 2]}
    assert _schema_of(small, declared) != _schema_of(large, declared)


class _OldRangesClient(Client):
    """Planted leak: answers ``ranges`` whenever it has no ``max_epsilon`` (the old check)."""

    def on_ranges(self, sender: str, msg: RangesRequest) -> Any:
        setup, self._setup = self._setup, None
        try:
            return super().on_ranges(sender, msg)
        finally:
            self._setup = setup


def _ranges_refused_in_dp_session(cls: type[Client]) -> bool:
    X = np.array([[0.1234, 1.0, 0.0], [0.9876, 2.0, 1.0]])
    client = cls("client0", InProcessNetwork(), X, np.array([0, 1]))
    client.on_setup("server", setup_msg(epsilon=1.0))
    try:
        client.on_ranges("server", RangesRequest(numeric=np.array([True, True, False])))
    except ProtocolError:
        return True
    return False


def test_client_refuses_ranges_in_a_dp_session() -> None:
    """Without ``max_epsilon`` too: the session's ε is enough."""
    assert _ranges_refused_in_dp_session(Client)


def test_planted_ranges_answer_in_a_dp_session_is_caught() -> None:
    assert not _ranges_refused_in_dp_session(_OldRangesClient)


def test_client_that_revealed_its_ranges_refuses_a_dp_session(parts3: Any) -> None:
    numeric = RangesRequest(numeric=np.array([True, True, False]))
    for eps in (dict(epsilon=1.0), dict(input_epsilon=1.0)):
        client = make_client(parts3)
        client.on_ranges("server", numeric)
        with pytest.raises(ProtocolError, match="revealed its ranges"):
            client.on_setup("server", setup_msg(**eps))
    plain = make_client(parts3)
    plain.on_ranges("server", numeric)
    plain.on_setup("server", setup_msg())
