"""Every validation rule of the protocols' messages at its exact boundary: the last value accepted
and the first refused, each rule alone (the mutation run over the message modules found these
unchecked; specs/testing.md "Mutation runs")."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from securetrees.errors import ParameterError
from securetrees.protocols.federated_forest.messages import Winners, WinnersRequest
from securetrees.protocols.histogram_forest.messages import (
    BinsReply,
    CountsReply,
    EdgesNotice,
    GridRequest,
    LayerRequest,
    SetupRequest,
)
from securetrees.protocols.hybridtree.messages import NodeRouting, PredictRequest

NAN = np.nan


def setup(**changes: Any) -> SetupRequest:
    fields: dict[str, Any] = dict(
        session=bytes(16), n_features=3, categories=(0, 0, 4), n_classes=2, n_trees=2, histogram="fixed",
        n_bins=4, low=np.array([0.0, 0.0, NAN]), high=np.array([10.0, 20.0, NAN]), sampling="none",
        subsample_fraction=1.0, max_multiplicity=1, features_per_node=1, max_depth=3, grid_cells=0,
        epsilon=None, input_epsilon=None, secure=False,
    )
    fields.update(changes)
    return SetupRequest(**fields)


REGRESSION = dict(task="regression", n_classes=0, y_low=0.0, y_high=1.0, y_bits=10, n_clients=1)
ONE = dict(n_features=1, categories=(0,), low=np.array([0.0]), high=np.array([1.0]))

SETUP_ACCEPTED = {
    "one feature": ONE,
    "two-valued category": dict(categories=(0, 0, 2)),
    "two classes": dict(n_classes=2),
    "regression": REGRESSION,
    "two bins": dict(n_bins=2),
    "y_bits 0": {**REGRESSION, "y_bits": 0},
    "y_bits 60": {**REGRESSION, "y_bits": 60},
    "subsample fraction 1": dict(subsample_fraction=1.0),
    "grid cells 65535": dict(grid_cells=65535),
    "empty ranges": dict(low=np.zeros(0), high=np.zeros(0)),
}
SETUP_REFUSED = {
    "no feature": dict(n_features=0, categories=(), low=np.zeros(0), high=np.zeros(0)),
    "categories short": dict(categories=(0, 0)),
    "one-valued category": dict(categories=(0, 0, 1)),
    "negative category": dict(categories=(0, 0, -2)),
    "one class": dict(n_classes=1),
    "regression with classes": {**REGRESSION, "n_classes": 1},
    "no tree": dict(n_trees=0),
    "one bin": dict(n_bins=1),
    "regression empty range": {**REGRESSION, "y_high": 0.0},
    "regression reversed range": {**REGRESSION, "y_low": 2.0},
    "regression infinite low": {**REGRESSION, "y_low": -np.inf},
    "regression infinite high": {**REGRESSION, "y_high": np.inf},
    "regression y_bits -1": {**REGRESSION, "y_bits": -1},
    "regression y_bits 61": {**REGRESSION, "y_bits": 61},
    "regression no client": {**REGRESSION, "n_clients": 0},
    "unknown histogram": dict(histogram="exact"),
    "unknown sampling": dict(sampling="jackknife"),
    "low/high shapes": dict(high=np.array([1.0, 2.0])),
    "ranges of the wrong width": dict(low=np.zeros(2), high=np.ones(2)),
    "low as integers": dict(low=np.array([0, 0, 0]), high=np.array([1, 1, 1])),
    "low 2-d": dict(low=np.zeros((1, 3)), high=np.zeros((1, 3))),
    "subsample fraction 0": dict(subsample_fraction=0.0),
    "subsample fraction above 1": dict(subsample_fraction=1.5),
    "multiplicity 0": dict(max_multiplicity=0),
    "grid cells negative": dict(grid_cells=-1),
    "grid cells 65536": dict(grid_cells=65536),
    "grid without fixed bins": dict(grid_cells=16, histogram="streaming"),
    "epsilon 0": dict(epsilon=0.0),
    "input epsilon 0": dict(input_epsilon=0.0),
}


@pytest.mark.parametrize("name", sorted(SETUP_ACCEPTED))
def test_setup_accepts_its_boundaries(name: str) -> None:
    setup(**SETUP_ACCEPTED[name])


@pytest.mark.parametrize("name", sorted(SETUP_REFUSED))
def test_setup_refuses_past_its_boundaries(name: str) -> None:
    with pytest.raises(ParameterError):
        setup(**SETUP_REFUSED[name])


def test_grid_cells_bounds() -> None:
    GridRequest(cells=2)
    GridRequest(cells=65535)
    for bad in (1, 65536):
        with pytest.raises(ParameterError):
            GridRequest(cells=bad)


def test_edges_are_float_vectors() -> None:
    EdgesNotice([np.array([0.5, 1.5])])
    for bad in (np.array([1, 2]), np.zeros((1, 2))):
        with pytest.raises(ParameterError):
            EdgesNotice([bad])


E_I, E_F, E_B = np.empty(0, np.int64), np.empty(0, np.float64), np.empty(0, bool)


def layer(**changes: Any) -> LayerRequest:
    fields: dict[str, Any] = dict(step=0, tree=0, layer=0, split_feature=E_I, split_threshold=E_F,
                                  split_categorical=E_B, split_missing_left=E_B, keep=np.zeros(1, np.int64),
                                  features=np.ones((1, 3), dtype=bool))
    fields.update(changes)
    return LayerRequest(**fields)


LATER = dict(layer=1, split_feature=np.array([0]), split_threshold=np.array([0.5]),
             split_categorical=np.array([False]), split_missing_left=np.array([True]),
             keep=np.array([0, 1]), features=np.ones((2, 3), dtype=bool))


def test_layer_boundaries() -> None:
    layer()
    layer(**LATER)
    refused: list[dict[str, Any]] = [
        dict(step=-1), dict(tree=-1), dict(layer=-1),
        {**LATER, "features": np.ones((1, 3), dtype=bool)},
        {**LATER, "keep": np.zeros(0, np.int64), "features": np.ones((0, 3), dtype=bool)},
        dict(keep=np.array([1])),
        dict(split_feature=np.array([0]), split_threshold=np.array([0.5]), split_categorical=np.array([False]),
             split_missing_left=np.array([True])),
        {**LATER, "split_threshold": np.array([0.5, 1.0])},
        dict(features=np.ones(3, dtype=bool)),
    ]
    for changes in refused:
        with pytest.raises(ParameterError):
            layer(**changes)


def bins(**changes: Any) -> BinsReply:
    fields: dict[str, Any] = dict(centres=np.array([0.5, 1.5, 2.5]), counts=np.ones((3, 2), np.int64),
                                  lengths=np.array([2, 1, 0]), missing=np.zeros((3, 2), np.int64))
    fields.update(changes)
    return BinsReply(**fields)


def test_bins_boundaries() -> None:
    bins()  # a pair with no bin (length 0) is allowed
    refused: list[dict[str, Any]] = [
        dict(counts=np.ones((2, 2), np.int64)),
        dict(lengths=np.array([2, 2, 0])),
        dict(lengths=np.array([4, -1, 0])),
        dict(missing=np.zeros((2, 2), np.int64)),
        dict(missing=np.zeros((3, 3), np.int64)),
        dict(centres=np.array([0.5, np.inf, 2.5])),
    ]
    for changes in refused:
        with pytest.raises(ParameterError):
            bins(**changes)


def test_counts_are_integer_vectors() -> None:
    CountsReply(np.array([1, 2], dtype=np.int64))
    CountsReply(np.array([1, 2], dtype=np.uint64))
    for bad in (np.ones((1, 2), np.int64), np.array([1.0, 2.0]), [1, 2]):
        with pytest.raises(ParameterError):
            CountsReply(bad)  # type: ignore[arg-type]


def test_hybridtree_routing_and_prediction_arrays() -> None:
    NodeRouting(3, np.array([True, False]))
    for bad in (np.array([1, 0]), np.ones((1, 2), dtype=bool)):
        with pytest.raises(ParameterError):
            NodeRouting(3, bad)
    ids = np.array([4, 9], dtype=np.int64)
    PredictRequest(0, ids, np.zeros((2, 3), np.int64))
    refused = [
        (ids.astype(np.int32), np.zeros((2, 3), np.int64)),
        (ids.reshape(1, 2), np.zeros((2, 3), np.int64)),
        (ids, np.zeros((2, 3), np.int32)),
        (ids, np.zeros(2, np.int64)),
        (ids, np.zeros((3, 3), np.int64)),
    ]
    for i, leaves in refused:
        with pytest.raises(ParameterError):
            PredictRequest(0, i, leaves)


def winners_request(**changes: Any) -> WinnersRequest:
    fields: dict[str, Any] = dict(tree=0, layer=0, positions=np.array([0, 3], np.int64),
                                  counts=np.array([1, 2], np.int64), clients=np.array([1, 0, 1], np.int64))
    fields.update(changes)
    return WinnersRequest(**fields)


def test_federated_forest_winners_request_boundaries() -> None:
    winners_request()
    winners_request(positions=np.array([5], np.uint32), counts=np.array([1], np.uint8), clients=np.array([0]))
    refused: list[dict[str, Any]] = [
        dict(tree=-1), dict(layer=-1),
        dict(positions=np.array([0, 3.0])), dict(counts=np.array([[1, 2]])), dict(clients=[1, 0, 1]),
        dict(positions=np.array([0, 3, 4], np.int64)),
        dict(positions=np.zeros(0, np.int64), counts=np.zeros(0, np.int64), clients=np.zeros(0, np.int64)),
        dict(counts=np.array([0, 3], np.int64)),
        dict(clients=np.array([1, 0], np.int64)), dict(clients=np.array([1, 0, 1, 0], np.int64)),
        dict(positions=np.array([-1, 3], np.int64)), dict(positions=np.array([3, 3], np.int64)),
        dict(positions=np.array([3, 0], np.int64)), dict(clients=np.array([1, -1, 1], np.int64)),
    ]
    for changes in refused:
        with pytest.raises(ParameterError):
            winners_request(**changes)


def test_federated_forest_winners_are_client_indices() -> None:
    Winners(np.array([0, 2], np.int64))
    Winners(np.zeros(0, np.int64))
    for bad in (np.array([0, -1], np.int64), np.array([0.0]), np.zeros((1, 1), np.int64), [0, 1]):
        with pytest.raises(ParameterError):
            Winners(bad)  # type: ignore[arg-type]
