"""Every rejection raises a typed error: facade and parameter validation, malformed messages,
protocol misuse by a peer, and messages from a role that may not send them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from securetrees.errors import NotFittedError, ParameterError, ProtocolError, UnauthorizedSender
from securetrees.paillier import PrivateKey, PublicKey
from securetrees.protocols.secureboost import ActiveParty, PassiveParty, SecureBoostParams
from securetrees.protocols.secureboost.messages import (
    Gradients,
    HistogramReply,
    HistogramRequest,
    NodeJob,
    PredictReply,
    PredictRequest,
    Setup,
    SetupReply,
    SplitOrder,
    SplitReply,
    SplitRequest,
)
from securetrees.runtime import InProcessNetwork
from securetrees.testing.paillier import small_keypair
from tests.secureboost.conftest import PARTITION, make

IDS = np.arange(3, dtype=np.int64)


@pytest.mark.parametrize("partition", [[[0, 1, 2, 3, 4, 5]], [[0, 1], [1, 2, 3, 4, 5]], [[0, 1], [2, 3]],
                                       [[0, 1], [2, 3, 4, 9]]])
def test_bad_partitions(data: tuple[np.ndarray, np.ndarray], keypair: tuple[PublicKey, PrivateKey],
                        partition: list[list[int]]) -> None:
    with pytest.raises(ParameterError):
        make("reg", partition, keypair).fit(*data)


@pytest.mark.parametrize("kw", [{"n_estimators": 0}, {"n_estimators": True}, {"learning_rate": 0.0},
                                {"max_depth": 0}, {"max_bins": 1}, {"frac_bits": 41}, {"encryption": "rsa"},
                                {"base_score": "mean"}, {"min_samples_leaf": 0}, {"reg_lambda": -1.0}])
def test_bad_parameters(data: tuple[np.ndarray, np.ndarray], keypair: tuple[PublicKey, PrivateKey],
                        kw: dict[str, Any]) -> None:
    with pytest.raises(ParameterError):
        make("reg", PARTITION, keypair, **kw).fit(*data)


def test_params_reject_a_logistic_loss_without_classes() -> None:
    with pytest.raises(ParameterError):
        SecureBoostParams(loss="logistic", n_classes=1)
    with pytest.raises(ParameterError):
        SecureBoostParams(loss="hinge")  # type: ignore[arg-type]


def test_facade_rejections(data: tuple[np.ndarray, np.ndarray], keypair: tuple[PublicKey, PrivateKey]) -> None:
    X, y = data
    with pytest.raises(NotFittedError):
        make("reg", PARTITION, keypair).predict(X)
    with pytest.raises(ParameterError):
        make("clf", PARTITION, keypair).fit(X, np.zeros(X.shape[0]))
    with pytest.raises(ParameterError):
        make("reg", PARTITION, keypair).fit(X[:, :5], y)
    with pytest.raises(ParameterError):
        make("reg", PARTITION, keypair).set_params(depth=3)
    with pytest.raises(ParameterError):
        make("reg", PARTITION, keypair).fit(X, np.full(X.shape[0], np.nan))
    fitted = make("reg", PARTITION, keypair, n_estimators=1).fit(X, y)
    with pytest.raises(ParameterError):
        fitted.predict(X[:, :4])


def _roles(keys: tuple[PublicKey, PrivateKey], X: np.ndarray, y: np.ndarray,
           pinned: PublicKey | None = None) -> tuple[ActiveParty, PassiveParty, InProcessNetwork]:
    net = InProcessNetwork()
    passive = PassiveParty("passive1", net, X=X[:, 2:], active_key=pinned or keys[0])
    active = ActiveParty("active", net, X=X[:, :2], y=y, passives=["passive1"],
                         params=SecureBoostParams(n_estimators=1, max_bins=8), keypair=keys)
    return active, passive, net


def test_role_constructors_reject_bad_input(data: tuple[np.ndarray, np.ndarray],
                                            keypair: tuple[PublicKey, PrivateKey]) -> None:
    X, y = data
    net = InProcessNetwork()
    with pytest.raises(ParameterError):
        PassiveParty("p", net, X=np.array([[np.inf]]))
    with pytest.raises(ParameterError):
        PassiveParty("q", net, X=np.zeros(3))
    params = SecureBoostParams(loss="logistic", n_classes=2)
    with pytest.raises(ParameterError):
        ActiveParty("a1", net, X=X[:, :2], y=np.full(X.shape[0], 2.0), passives=["p"], params=params, keypair=keypair)
    with pytest.raises(ParameterError):
        ActiveParty("a2", net, X=X[:, :2], y=y, passives=[], params=SecureBoostParams(), keypair=keypair)
    with pytest.raises(ParameterError):
        ActiveParty("a3", net, X=X[:, :2], y=y, passives=["p", "p"], params=SecureBoostParams(), keypair=keypair)
    with pytest.raises(ParameterError):
        ActiveParty("a4", net, X=X[:, :2], y=y[:5], passives=["p"], params=SecureBoostParams(), keypair=keypair)


def test_passive_rejects_protocol_misuse(data: tuple[np.ndarray, np.ndarray],
                                         keypair: tuple[PublicKey, PrivateKey]) -> None:
    X, y = data
    active, passive, _ = _roles(keypair, X, y)
    with pytest.raises(ProtocolError):  # no setup yet
        passive.on_histogram("active", HistogramRequest(0, 0, ()))
    with pytest.raises(ProtocolError):
        passive.on_setup("active", Setup(keypair[0].to_bytes(), X.shape[0] + 1, 8))
    passive.on_setup("active", Setup(keypair[0].to_bytes(), X.shape[0], 8))
    with pytest.raises(ProtocolError):
        passive.on_gradients("active", Gradients(0, 24, 1, 1, (1).to_bytes(2 * keypair[0].modulus_bytes, "big") * 2))
    with pytest.raises(ProtocolError):  # a tree whose gradients were not received
        passive.on_histogram("active", HistogramRequest(4, 0, (NodeJob(0, -1, -1, IDS),)))
    with pytest.raises(ProtocolError):
        passive.on_split("active", SplitRequest(4, (SplitOrder(0, 0, 0, False),)))
    active.fit()
    with pytest.raises(ProtocolError):
        passive.on_predict("active", PredictRequest(IDS, IDS))  # no rows loaded
    passive.load_queries(X[:5, 2:])
    with pytest.raises(ProtocolError):
        passive.on_predict("active", PredictRequest(np.array([10**6], dtype=np.int64), IDS[:1]))
    with pytest.raises(ProtocolError):
        passive.on_predict("active", PredictRequest(IDS[:1], np.array([99], dtype=np.int64)))
    with pytest.raises(ParameterError):
        passive.load_queries(X[:5, :2])
    with pytest.raises(ProtocolError):
        passive.record_for(SplitOrder(0, 99, 0, False))


def test_passive_refuses_another_key(data: tuple[np.ndarray, np.ndarray],
                                     keypair: tuple[PublicKey, PrivateKey]) -> None:
    X, y = data
    active, _, _ = _roles(keypair, X, y, pinned=small_keypair(512)[0])
    with pytest.raises(ProtocolError):
        active.fit()


def test_active_refuses_left_instances_of_another_node(data: tuple[np.ndarray, np.ndarray],
                                                       keypair: tuple[PublicKey, PrivateKey],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    X, y = data
    honest = PassiveParty.on_split

    def lying(self: PassiveParty, sender: str, msg: SplitRequest) -> SplitReply:
        reply = honest(self, sender, msg)
        return SplitReply(reply.records, tuple(np.append(ids, -5).astype(np.int64) for ids in reply.left))

    monkeypatch.setattr(PassiveParty, "on_split", lying)
    active, _, _ = _roles(keypair, X, y)
    with pytest.raises(ProtocolError):
        active.fit()


def test_only_the_active_role_may_send_requests(data: tuple[np.ndarray, np.ndarray],
                                                keypair: tuple[PublicKey, PrivateKey]) -> None:
    X, y = data
    _, passive, net = _roles(keypair, X, y)
    PassiveParty("passive2", net, X=X[:, 4:])
    with pytest.raises(UnauthorizedSender):
        passive.call("passive2", Setup(keypair[0].to_bytes(), X.shape[0], 8), expect=SetupReply)


@pytest.mark.parametrize("build", [
    lambda: NodeJob(0, -1, -1, np.zeros(2)),
    lambda: SplitReply((1, 2), (IDS,)),
    lambda: PredictRequest(IDS, IDS[:2]),
    lambda: PredictReply(np.zeros(2, dtype=np.int64)),
    lambda: SetupReply((1, 2), (False,)),
    lambda: SetupReply((), ()),
    lambda: HistogramReply(2, np.zeros(3, dtype=np.uint8), ()),
    lambda: HistogramReply(1, np.zeros(1, dtype=np.int64), ()),
    lambda: HistogramReply(1, np.array([3], dtype=np.uint8), ()),
])
def test_malformed_messages(build: Any) -> None:
    with pytest.raises(ParameterError):
        build()
