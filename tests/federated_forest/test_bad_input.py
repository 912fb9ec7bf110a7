"""Bad input raises one typed error each (``specs/federated_forest.md``)."""

from __future__ import annotations

import numpy as np
import pytest

from securetrees.errors import (
    EncodingOverflowError,
    InvalidCiphertext,
    NotFittedError,
    ParameterError,
    ProtocolError,
    UnexpectedMessage,
)
from securetrees.protocols.federated_forest import (
    Client,
    FederatedForestClassifier,
    FederatedForestRegressor,
    ForestParams,
    LabelSpec,
    Master,
)
from securetrees.protocols.federated_forest import messages as m
from securetrees.protocols.federated_forest.ids import hash_ids
from securetrees.protocols.federated_forest.slots import SlotLayout
from securetrees.protocols.federated_forest.testing import mixed_data, small_key_options
from securetrees.runtime import InProcessNetwork

KEY = b"k" * 32
X, Y, CAT = mixed_data(60, seed=1)


def _roles(ids1: list[object], ids2: list[object]) -> Master:
    net = InProcessNetwork()
    Client("a", net, X[:, :3], ids1, [0, 1, 2], KEY, labels=LabelSpec(Y, 2))
    Client("b", net, X[:, 3:], ids2, [3, 4, 5], KEY)
    return Master("master", net, ["a", "b"], ForestParams(n_estimators=1), label_protection="shared")


def test_misaligned_ids() -> None:
    ids = list(range(60))
    with pytest.raises(ParameterError, match="aligned"):
        _roles(ids, [*ids[:-1], "someone else"]).setup()
    with pytest.raises(ParameterError, match="aligned"):
        _roles(ids, [*ids[1:], 99]).setup()


def test_duplicate_ids_and_short_key() -> None:
    with pytest.raises(ParameterError, match="unique"):
        hash_ids(KEY, [1, 2, 1])
    with pytest.raises(ParameterError, match="bytes"):
        hash_ids(b"short", [1])


@pytest.mark.parametrize("partition", [[[0, 1, 2], [2, 3, 4, 5]], [[0, 1], [3, 4, 5]], [[0, 1, 2, 3, 4, 5]],
                                       [[0, 1, 2], [3, 4, 6]], [[0, 1, 2], [3, 4, True]]])
def test_bad_partition(partition: list[list[int]]) -> None:
    with pytest.raises(ParameterError):
        FederatedForestClassifier(1, label_protection="shared").set_params(partition=partition).fit(X, Y)


def test_single_class_and_nan_labels() -> None:
    with pytest.raises(ParameterError, match="two classes"):
        FederatedForestClassifier(1, label_protection="shared").set_params(partition=[[0, 1, 2], [3, 4,
                5]]).fit(X, np.zeros(60))
    y = Y.astype(float)
    y[3] = np.nan
    with pytest.raises(ParameterError, match="NaN"):
        FederatedForestClassifier(1, label_protection="shared").set_params(partition=[[0, 1, 2], [3, 4, 5]]).fit(X, y)
    with pytest.raises(ParameterError, match="NaN"):
        FederatedForestRegressor(1, label_protection="shared").set_params(partition=[[0, 1, 2], [3, 4, 5]]).fit(X, y)
    with pytest.raises(ParameterError):
        LabelSpec(np.array([0, 1, 2]), 2)


@pytest.mark.parametrize("kwargs", [{"label_protection": "plain"}, {"prediction": "fast"},
                                    {"feature_sampling": "forest"}, {"label_holder": 2},
                                    {"n_estimators": 0}, {"max_depth": -1}, {"criterion": "squared_error"}])
def test_bad_parameters(kwargs: dict[str, object]) -> None:
    with pytest.raises(ParameterError):
        FederatedForestClassifier(**{"n_estimators": 1, "label_protection": "shared",
                **kwargs}).set_params(partition=[[0, 1, 2], [3, 4, 5]]).fit(  # type: ignore[arg-type]
            X, Y)


def test_not_fitted_and_wrong_width() -> None:
    ff = FederatedForestClassifier(1, label_protection="shared")
    with pytest.raises(NotFittedError):
        ff.predict(X)
    ff.set_params(partition=[[0, 1, 2], [3, 4, 5]]).fit(X, Y)
    with pytest.raises(ParameterError):
        ff.predict(X[:, :5])


def test_two_label_holders_and_overlapping_role_features() -> None:
    net = InProcessNetwork()
    Client("a", net, X[:, :3], range(60), [0, 1, 2], KEY, labels=LabelSpec(Y, 2))
    Client("b", net, X[:, 3:], range(60), [3, 4, 5], KEY, labels=LabelSpec(Y, 2))
    with pytest.raises(ParameterError, match="exactly one"):
        Master("master", net, ["a", "b"], ForestParams(n_estimators=1)).setup()
    net = InProcessNetwork()
    Client("a", net, X[:, :3], range(60), [0, 1, 2], KEY, labels=LabelSpec(Y, 2))
    Client("b", net, X[:, 3:], range(60), [2, 4, 5], KEY)
    with pytest.raises(ParameterError, match="two clients"):
        Master("master", net, ["a", "b"], ForestParams(n_estimators=1)).setup()


def _encrypted_pair() -> tuple[InProcessNetwork, Client, Client, Master]:
    net = InProcessNetwork()
    opts = small_key_options()
    holder = Client("a", net, X[:, :3], range(60), [0, 1, 2], KEY,
                    labels=LabelSpec(Y, 2, keypair=opts["paillier_keys"]))
    other = Client("b", net, X[:, 3:], range(60), [3, 4, 5], KEY, public_key_loader=opts["public_key_loader"])
    master = Master("master", net, ["a", "b"], ForestParams(n_estimators=1, max_depth=2))
    master.setup()
    return net, holder, other, master


def test_messages_at_the_wrong_step_and_malformed_ones() -> None:
    _net, _holder, other, master = _encrypted_pair()
    with pytest.raises(UnexpectedMessage):  # no tree in progress
        master.call("b", m.FindSplits(0, 0, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)),
                    expect=m.LocalBest)
    with pytest.raises(UnexpectedMessage):  # shared labels in encrypted mode
        master.call("b", m.SharedLabels(Y), expect=m.Ack)
    weights = np.ones(60, dtype=np.int64)
    master.call_many({"a": m.TreeStart(0, weights, (0, 1, 2)), "b": m.TreeStart(0, weights, (3, 4, 5))},
                     expect=m.Ack)
    with pytest.raises(ProtocolError):  # a feature client b does not hold
        master.call("b", m.FindSplits(0, 0, np.array([0]), np.array([1]), np.array([1])), expect=m.LocalBest)
    with pytest.raises(ProtocolError):  # wrong chunk count in a score request
        other.call("a", m.ScoreRequest(0, 0, np.array([0]), np.array([3]), np.array([False]), np.array([5]),
                                       (1, 1, 1, 1, 1)), expect=m.ScoreReply)
    with pytest.raises(InvalidCiphertext):  # a value that is no ciphertext
        other.call("a", m.ScoreRequest(0, 0, np.array([0]), np.array([3]), np.array([False]), np.array([1]),
                                       (0,)), expect=m.ScoreReply)
    with pytest.raises(ProtocolError):  # bootstrap weights of the wrong length
        master.call("b", m.TreeStart(1, weights[:10], ()), expect=m.Ack)
    with pytest.raises(ProtocolError):  # a partition of the wrong size
        master.call("b", m.LayerPartition(0, 0, np.array([0]), np.ones(3, dtype=bool)), expect=m.Ack)


def test_slot_layout_limits() -> None:
    with pytest.raises(ParameterError):
        SlotLayout(0, 16)
    with pytest.raises(ParameterError):
        SlotLayout(2, 12)
    with pytest.raises(EncodingOverflowError):
        SlotLayout(2, 8).pack_unit((256, 0))
    with pytest.raises(ParameterError):
        SlotLayout(4, 64).bins_per_plaintext(200)


def test_messages_from_the_wrong_party() -> None:
    """Instructions only from the master of the setup; score requests only from other clients;
    labels only from the label holder."""
    _net, holder, other, master = _encrypted_pair()
    weights = np.ones(60, dtype=np.int64)
    with pytest.raises(UnexpectedMessage):
        other.call("a", m.TreeStart(0, weights, (0, 1, 2)), expect=m.Ack)
    master.call_many({"a": m.TreeStart(0, weights, (0, 1, 2)), "b": m.TreeStart(0, weights, (3, 4, 5))},
                     expect=m.Ack)
    with pytest.raises(UnexpectedMessage):
        master.call("a", m.ScoreRequest(0, 0, np.array([0]), np.array([3]), np.array([False]), np.array([1]), (1,)),
                    expect=m.ScoreReply)
    with pytest.raises(UnexpectedMessage):
        other.call("a", m.NodeStatsRequest(0, 0), expect=m.NodeStats)
    with pytest.raises(UnexpectedMessage):
        master.call("b", m.EncryptedLabels(b"", 1, 8, ()), expect=m.Ack)
    assert holder.is_label_holder


def test_handed_leaves_are_checked() -> None:
    """The label holder takes prediction's last step only in ``encrypted`` mode, only as the
    label holder, only for its trees and the loaded test rows, only for leaves (a cover leaf
    is mapped to its reference leaf by the label holder); it keeps the output and acknowledges."""
    ff = FederatedForestClassifier(2, max_depth=2, random_state=1, **small_key_options())
    ff.set_params(partition=[[0, 1, 2], [3, 4, 5]]).fit(X, Y)
    ff.predict(X[:7])
    net, trees = ff.network_, ff.clients_[0].trees
    good = np.stack([np.full(7, t.leaves[-1], dtype=np.int64) for t in trees])
    assert isinstance(net.call("master", "client0", m.TestLeaves(good)), m.Ack)
    assert ff.clients_[0].kept_output is not None and ff.clients_[0].kept_output.shape == (7, 2)
    assert all(t.left[0] != -1 for t in trees)  # the root is no leaf: refused below
    with pytest.raises(UnexpectedMessage):
        net.call("master", "client1", m.TestLeaves(good))
    for bad in (np.zeros((2, 7), dtype=np.int64), good[:, :6], good[:1], good.astype(np.float64),
                np.full((2, 7), trees[0].n_nodes + 50, dtype=np.int64), np.full((2, 7), -1, dtype=np.int64)):
        with pytest.raises(ProtocolError):
            net.call("master", "client0", m.TestLeaves(bad))
    with pytest.raises(UnexpectedMessage):  # the master aggregates nothing in encrypted mode
        ff.master_.aggregate(good)
    shared = FederatedForestClassifier(1, max_depth=2, random_state=1, label_protection="shared")
    shared.set_params(partition=[[0, 1, 2], [3, 4, 5]]).fit(X, Y)
    shared.predict(X[:7])
    with pytest.raises(UnexpectedMessage):
        shared.network_.call("master", "client0", m.TestLeaves(np.zeros((1, 7), dtype=np.int64)))
    with pytest.raises(UnexpectedMessage):
        shared.master_.hand_leaves(np.zeros((1, 7), dtype=np.int64))


def _root_offers() -> tuple[Client, Master]:
    """An encrypted pair with tree 0 started and both clients' local bests of the root in."""
    _net, holder, _other, master = _encrypted_pair()
    weights = np.ones(60, dtype=np.int64)
    master.call_many({"a": m.TreeStart(0, weights, (0, 1, 2)), "b": m.TreeStart(0, weights, (3, 4, 5))},
                     expect=m.Ack)
    for c, feats in (("a", [0, 1, 2]), ("b", [3, 4, 5])):
        best = master.call(c, m.FindSplits(0, 0, np.array([0]), np.array([3]), np.array(feats)), expect=m.LocalBest)
        assert best.found.tolist() == [True] and best.gains.tolist() == [0.0]  # the gain stays with the holder
    return holder, master


def _winners(counts: list[int], clients: list[int], layer: int = 0) -> m.WinnersRequest:
    return m.WinnersRequest(0, layer, np.array([0]), np.array(counts), np.array(clients))


def test_winners_requests_are_checked() -> None:
    """The label holder names winners only as the label holder, for the layer in progress, and
    only for offers that are exactly the valid candidates it saw, each client once; it then
    accepts only the partition of the nodes it named winners for."""
    holder, master = _root_offers()
    for counts, clients in (([1], [0]), ([1], [1]), ([2], [0, 0]), ([3], [0, 1, 2])):
        with pytest.raises(ProtocolError):
            master.call("a", _winners(counts, clients), expect=m.Winners)
    with pytest.raises(UnexpectedMessage):
        master.call("a", _winners([2], [0, 1], layer=1), expect=m.Winners)
    with pytest.raises(UnexpectedMessage):
        master.call("b", _winners([2], [0, 1]), expect=m.Winners)
    won = master.call("a", _winners([2], [1, 0]), expect=m.Winners)
    assert won.clients.shape == (1,) and int(won.clients[0]) in (0, 1)
    with pytest.raises(ProtocolError):  # the root was named a winner: its partition must come
        master.call("a", m.LayerPartition(0, 0, np.zeros(0, np.int64), np.zeros(0, dtype=bool)), expect=m.Ack)
    assert holder.is_label_holder


def test_no_winners_in_shared_mode_and_no_stats_in_encrypted_mode() -> None:
    master = _roles(list(range(60)), list(range(60)))
    master.setup()
    weights = np.ones(60, dtype=np.int64)
    master.call_many({"a": m.TreeStart(0, weights, (0, 1, 2)), "b": m.TreeStart(0, weights, (3, 4, 5))},
                     expect=m.Ack)
    with pytest.raises(UnexpectedMessage):
        master.call("a", _winners([2], [0, 1]), expect=m.Winners)
    _holder, enc = _root_offers()
    with pytest.raises(UnexpectedMessage):  # purity and values stay with the label holder
        enc.call("a", m.NodeStatsRequest(0, 0), expect=m.NodeStats)


def test_a_winner_that_offered_nothing_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Client, "on_winners_request",
                        lambda self, sender, msg: m.Winners(np.full(msg.positions.size, 1, dtype=np.int64) * 7))
    with pytest.raises(ProtocolError, match="winner"):
        FederatedForestClassifier(1, max_depth=2, random_state=1, **small_key_options()).fit(X, Y)
