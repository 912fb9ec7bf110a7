"""Bad input raises one typed error each (specs/hybridtree.md, "Parameters", "Too few guests")."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from securetrees.errors import (
    InsecureParameterWarning,
    NotFittedError,
    ParameterError,
    ProtocolError,
    UnauthorizedSender,
    UnexpectedMessage,
)
from securetrees.protocols.hybridtree import Guest, HybridTreeParams, check_mode
from securetrees.protocols.hybridtree.testing import HybridData, fit_layout, with_guest_column
from securetrees.runtime import InProcessNetwork
from securetrees.testing.paillier import small_keypair
from securetrees.trees import BinMapper


def _fit(make: Any, data: HybridData, **over: Any) -> Any:
    args = dict(X=data.X, y=data.y, host_features=data.host_features,
                guest_features=data.guest_features, guest_rows=data.guest_rows)
    args.update(over)
    return fit_layout(make("clf", "secure"), **args)


@pytest.mark.parametrize("over", [
    {"guest_rows": None},  # replaced below: unknown row IDs
    {"guest_features": [2, 3, 4]},  # overlaps the host's columns
    {"host_features": [0, 0, 1]},  # a column twice
    {"host_features": [0, 1, 9]},  # a column out of range
    {"guest_features": []},
])
def test_layout_errors(make: Any, data: HybridData, over: dict[str, Any]) -> None:
    if over.get("guest_rows", 1) is None:
        over = {"guest_rows": [*data.guest_rows[:3], np.array([5, 10_000])]}
    with pytest.raises(ParameterError):
        _fit(make, data, **over)


def test_guest_rows_errors(make: Any, data: HybridData) -> None:
    rows = data.guest_rows
    for bad in ([*rows[:3], np.array([], dtype=np.int64)],       # an empty guest
                [*rows[:3], np.array([1.0, np.nan])],            # NaN row IDs
                [*rows[:3], np.array([4, 4])],                   # a row twice
                [*rows[:3], np.array([-1])],                     # negative ID
                []):                                             # no guest at all
        with pytest.raises(ParameterError):
            _fit(make, data, guest_rows=bad)
    with pytest.raises(ParameterError):  # two guests: a masked sum would expose each
        _fit(make, data, guest_rows=rows[:2])


def test_value_errors(make: Any, data: HybridData) -> None:
    y = data.y.astype(float)
    y[3] = np.nan
    with pytest.raises(ParameterError):
        _fit(make, data, y=y)
    X = data.X.copy()
    X[0, 0] = np.inf
    with pytest.raises(ParameterError):
        _fit(make, data, X=X)
    with pytest.raises(ParameterError):
        _fit(make, data, y=np.zeros(len(data.y)))
    with pytest.raises(ParameterError):
        _fit(make, data, y=data.y[:-1])


def test_mode_and_key_policy(data: HybridData) -> None:
    with pytest.raises(ParameterError):
        check_mode("plaintext", allow_insecure=False)
    with pytest.raises(ParameterError):
        check_mode("nonsense", allow_insecure=True)
    with pytest.warns(InsecureParameterWarning):
        assert check_mode("paper", allow_insecure=True) == "paper"
    assert check_mode("secure", allow_insecure=False) == "secure"
    from securetrees.protocols.hybridtree import HybridTreeClassifier

    with pytest.raises(ParameterError):  # 1024 bits without the insecure flag
        fit_layout(HybridTreeClassifier(1, key_bits=1024), data.X, data.y, data.host_features,
                                                   data.guest_features, data.guest_rows)


@pytest.mark.parametrize("kw", [{"host_depth": -1}, {"guest_depth": 0}, {"frac_bits": 0},
                                {"frac_bits": 60}, {"min_guests": 2}, {"learning_rate": 0.0},
                                {"reg_lambda": float("nan")}, {"few_guests": "ignore"},
                                {"encryption": "rsa"}, {"mode": "fast"}, {"max_bins": 1},
                                {"min_node_size": -1}, {"min_node_size": 2.5},
                                {"min_bin_size": -1}, {"min_bin_size": 1.5}, {"min_bin_size": True},
                                {"min_group_width": 0}, {"min_group_width": 2.0},
                                {"min_group_width": 33}, {"min_group_width": 3, "max_bins": 2}])
def test_params_rejected(kw: dict[str, Any]) -> None:
    with pytest.raises(ParameterError):
        HybridTreeParams(**kw)


@pytest.mark.parametrize("kw", [{"min_bin_size": -1}, {"min_group_width": 0}, {"min_node_size": -5}])
def test_facade_rejects_mitigation_params(make: Any, data: HybridData, kw: dict[str, Any]) -> None:
    with pytest.raises(ParameterError):
        fit_layout(make("clf", "secure", **kw), data.X, data.y, data.host_features, data.guest_features,
                                        data.guest_rows)


def test_facade_exposes_mitigation_params() -> None:
    from securetrees.protocols.hybridtree import HybridTreeClassifier, HybridTreeRegressor
    from securetrees.protocols.hybridtree.params import MIN_BIN_SIZE, MIN_GROUP_WIDTH, MIN_NODE_SIZE

    for cls in (HybridTreeClassifier, HybridTreeRegressor):
        p = cls().get_params()
        assert (p["min_node_size"], p["min_bin_size"], p["min_group_width"]) == (
            MIN_NODE_SIZE, MIN_BIN_SIZE, MIN_GROUP_WIDTH)
        assert cls(min_node_size=0, min_bin_size=0, min_group_width=1)._params().min_group_width == 1


def test_not_fitted_and_predict_layout(make: Any, data: HybridData) -> None:
    with pytest.raises(NotFittedError):
        make("clf").predict(with_guest_column(data.X, data.guest_rows))
    m = _fit(make, data)
    with pytest.raises(ParameterError):
        m.predict(with_guest_column(data.X[:, :4], data.guest_rows))
    X = with_guest_column(data.X, data.guest_rows)
    X[7, -1] = 4.0  # names no guest of the fit (guests 0..3)
    with pytest.raises(ParameterError, match="names no guest"):
        m.predict(X)


def test_guest_refuses_other_key_and_strangers(data: HybridData) -> None:
    from securetrees.protocols.hybridtree.messages import HistogramRequest, Setup, SetupReply

    net = InProcessNetwork()
    params = HybridTreeParams()
    X = data.X[data.guest_rows[0]][:, 3:]
    g = Guest("g0", net, params=params, ids=data.guest_rows[0], X=X,
              mapper=BinMapper.fit(X, max_bins=8), host_key=small_keypair(512)[0])
    other = small_keypair(256)[0].to_bytes()
    with pytest.raises(ProtocolError):
        g.on_setup("host", Setup(b"s" * 16, other, ("g0",), "secure"))
    X2 = data.X[data.guest_rows[2]][:, 3:]
    stranger = Guest("g2", net, params=params, ids=data.guest_rows[2], X=X2, mapper=BinMapper.fit(X2, max_bins=8))
    with pytest.raises(UnauthorizedSender):  # a guest is not the host: refused by the network, never handled
        stranger.call("g0", Setup(b"s" * 16, other, ("g0",), "secure"), expect=SetupReply)
    with pytest.raises(UnexpectedMessage):
        g.on_histogram("host", HistogramRequest(5, 1, 0, ("g0",), 1, ()))
    with pytest.raises(ParameterError):
        Guest("g1", net, params=params, ids=data.guest_rows[1], X=X[:-1], mapper=BinMapper.fit(X))


@pytest.mark.parametrize("features", [(1, 0), (0, 0), (-1,), (3,)])
def test_guest_refuses_malformed_feature_lists(make: Any, data: HybridData, features: tuple[int, ...]) -> None:
    from securetrees.protocols.hybridtree.messages import BuildNode, HistogramRequest

    m = _fit(make, data)
    guest = m.guests_[0]
    peers = tuple(g.name for g in m.guests_)
    build = BuildNode(0, 0, features, ((7,),) * len(features))
    req = HistogramRequest(len(m.host_.records) - 1, 1, 99, peers, 1, (build,))
    with pytest.raises(ProtocolError):
        guest.on_histogram("host", req)
