"""Security properties of Federated Forest read from the transcript
(``specs/federated_forest.md``, "Threat model and what leaks by design")."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from securetrees.protocols.federated_forest import FederatedForestClassifier, FederatedForestRegressor
from securetrees.protocols.federated_forest import messages as m
from securetrees.protocols.federated_forest.client import Client
from securetrees.protocols.federated_forest.testing import mixed_data, small_key_options
from securetrees.rand import DeterministicRandom
from securetrees.runtime import Record, encode
from securetrees.testing.canaries import assert_no_canaries, find_canaries

N = 120


def _regression_run(mode: str) -> tuple[Any, np.ndarray, np.ndarray]:
    """Distinctive targets (canaries) at client 1; distinctive feature values at client 0."""
    g = np.random.default_rng(17)
    X = g.normal(size=(N, 4))
    X[:, 0] = 9_181_726.354637 + np.arange(N) * 1.000013  # client 0's feature values
    # client 0's other column, far from 0 too: its thresholds (canaries) have 7-byte fixed-point
    # forms, which random ciphertext bytes match by chance with probability below 1e-9 per run
    X[:, 1] += 4_271_993.0
    y = 731.0271849 + 3.7 * X[:, 2] + 0.013 * np.arange(N)  # the labels
    # every party's secret randomness (keys, masks, cover-split choices) from a fixed stream, so that
    # the fit, and which client wins which split, is one fixed outcome: with system randomness the
    # cover splits vary from run to run, and client 0 sometimes won no split at all
    ff = FederatedForestRegressor(2, max_depth=3, random_state=1, label_protection=mode, label_holder=1,
                                  rng=DeterministicRandom(f"ff-views/{mode}"), **small_key_options())
    ff.set_params(partition=[[0, 1], [2, 3]]).fit(X, y)
    ff.predict(X[:20])
    ff.predict(X[:20], method="classical")
    return ff, X, y


@pytest.fixture(scope="module")
def encrypted_run() -> tuple[Any, np.ndarray, np.ndarray]:
    return _regression_run("encrypted")


def test_no_label_in_any_client_view(encrypted_run: Any) -> None:
    """Encrypted mode: no label value reaches client 0 (the only non-holder)."""
    ff, _, y = encrypted_run
    view = ff.transcript_.view("client0")
    assert view
    assert_no_canaries(view, [float(v) for v in y[::7]], frac_bits=(32,))


def test_shared_mode_does_show_labels_to_clients() -> None:
    """The scanner finds the labels where the paper's practice sends them (the test can fail)."""
    ff, _, y = _regression_run("shared")
    assert find_canaries(ff.transcript_.view("client0"), [float(y[3])], frac_bits=(32,))


def check_client0_values_stay_home(ff: Any, X: np.ndarray) -> None:
    """Client 0's feature values and thresholds reach neither the master nor client 1."""
    own = ff.clients_[0].trees
    thresholds = sorted({float(t.threshold[k]) for t in own for k in np.flatnonzero(~t.withheld & (t.left != -1))})
    assert thresholds, "client 0 should have won at least one split"
    canaries = [float(v) for v in X[:, 0]] + thresholds
    for party in ("master", "client1"):
        assert_no_canaries(ff.transcript_.view(party), canaries, frac_bits=(32,))


def test_no_feature_value_or_threshold_leaves_its_client(encrypted_run: Any) -> None:
    ff, X, _ = encrypted_run
    check_client0_values_stay_home(ff, X)


def test_a_client_reporting_a_raw_value_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted leak: client 0 reports one of its feature values as the gain of its last slot
    (in ``shared`` mode: in ``encrypted`` mode the master refuses any gain but 0)."""
    real = Client.on_find_splits

    def leaky(self: Client, sender: str, msg: m.FindSplits) -> m.LocalBest:
        reply = real(self, sender, msg)
        if self.name != "client0" or reply.gains.size == 0:
            return reply
        gains = reply.gains.copy()
        gains[-1] = float(self._X[0, 0])
        return dataclasses.replace(reply, gains=gains)

    monkeypatch.setattr(Client, "on_find_splits", leaky)
    ff, X, _ = _regression_run("shared")
    with pytest.raises(AssertionError, match="private values leaked"):
        check_client0_values_stay_home(ff, X)


def check_master_stores_no_threshold(master_trees: list[Any], client_trees: list[list[Any]]) -> None:
    """Encrypted mode: the master's trees hold no split and no value (the values stay with the
    label holder); the other clients' trees hold no values (labels)."""
    for t in master_trees:
        internal = t.left != -1
        assert np.all(t.withheld[internal]) and np.all(np.isnan(t.threshold)) and np.all(t.feature == -1), \
            "the master's tree holds a split"
        assert np.all(np.isnan(t.value)), "the master's tree holds leaf values"
    for trees in client_trees:
        for t in trees:
            assert np.all(np.isnan(t.value)), "a client's tree holds leaf values"


def test_master_stores_no_threshold(encrypted_run: Any) -> None:
    ff, _, _ = encrypted_run
    check_master_stores_no_threshold(ff.master_.trees, [ff.clients_[0].trees])
    assert all(np.all(np.isfinite(t.value)) for t in ff.clients_[1].trees)  # the label holder's table


def test_a_master_holding_a_clients_split_is_caught(encrypted_run: Any) -> None:
    """Planted leak: the master keeps a client's tree (thresholds, features), or a client keeps the
    master's tree (leaf values)."""
    ff, _, _ = encrypted_run
    # a client tree that holds a split: which client wins a cover node is the label holder's secret
    # random choice, so take the first tree of any client with a known split (the reference splits)
    holding = [t for c in ff.clients_ for t in c.trees if np.any((t.left != -1) & ~t.withheld)]
    assert holding, "no client holds a split: the fit grew no tree"
    with pytest.raises(AssertionError, match="holds a split"):
        check_master_stores_no_threshold([*ff.master_.trees, holding[0]], [])
    with pytest.raises(AssertionError, match="holds leaf values"):
        check_master_stores_no_threshold([], [[ff.clients_[1].trees[0]]])


def check_client_sees_only_its_features(view: list[Any], cols: list[int]) -> set[str]:
    """A client is asked only about its own features, and score requests carry no feature ids."""
    seen_types: set[str] = set()
    for rec in view:
        seen_types.add(rec.type_name)
        p = rec.payload
        if isinstance(p, m.FindSplits):
            assert set(np.asarray(p.features).tolist()) <= set(cols), "asked about another client's feature"
        elif isinstance(p, m.TreeStart):
            assert set(p.features) <= set(cols), "told another client's features"
        elif isinstance(p, m.ScoreRequest):  # anonymous entries: no feature id field at all
            assert {f.name for f in p.__dataclass_fields__.values()}.isdisjoint({"features", "feature_ids"})
    return seen_types


@pytest.mark.parametrize("mode", ["shared", "encrypted"])
def test_clients_see_only_their_own_selected_features(mode: str) -> None:
    X, y, cat = mixed_data(150, seed=5)
    partition = [[0, 1, 4], [2, 3], [5]]
    ff = FederatedForestClassifier(3, max_depth=3, random_state=6, label_protection=mode, categorical_features=cat,
                                   **small_key_options())
    ff.set_params(partition=partition).fit(X, y)
    seen_types: set[str] = set()
    for i, cols in enumerate(partition):
        seen_types |= check_client_sees_only_its_features(ff.transcript_.view(f"client{i}"), cols)
    assert "federated_forest.find_splits" in seen_types


def test_a_find_splits_naming_another_clients_feature_is_caught() -> None:
    """Planted leak: the master's request to client 2 lists client 0's feature 1."""
    msg = m.FindSplits(0, 0, np.array([0]), np.array([2]), np.array([5, 1]))
    data = encode(msg)
    rec = Record(1, "master", "client2", msg.wire_type, len(data), data, msg)
    with pytest.raises(AssertionError, match="another client's feature"):
        check_client_sees_only_its_features([rec], [5])


CLIENT_CORE = {
    "federated_forest.hello", "federated_forest.setup", "federated_forest.encrypted_labels",
    "federated_forest.tree_start", "federated_forest.find_splits", "federated_forest.score_reply",
    "federated_forest.layer_partition", "federated_forest.tree_end", "federated_forest.test_ids",
    "federated_forest.predict_request",
}
MASTER_TYPES = {
    "federated_forest.client_info", "federated_forest.ack", "federated_forest.local_best",
    "federated_forest.partition", "federated_forest.client_test_ids", "federated_forest.leaf_sets",
    "federated_forest.winners",
}


def check_views_match_the_spec(received: dict[str, set[str]]) -> None:
    """Encrypted mode, label holder client0: the message types each role receives are the spec's table."""
    client1 = received["client1"]
    assert CLIENT_CORE <= client1 <= CLIENT_CORE | {"federated_forest.apply_split"}, \
        f"client1 received {sorted(client1 - CLIENT_CORE)}"
    holder = received["client0"]
    assert "federated_forest.encrypted_labels" not in holder and "federated_forest.shared_labels" not in holder
    assert {"federated_forest.score_request", "federated_forest.winners_request",
            "federated_forest.test_leaves"} <= holder
    assert received["master"] <= MASTER_TYPES, f"the master received {sorted(received['master'] - MASTER_TYPES)}"


@pytest.fixture(scope="module")
def spec_run() -> Any:
    X, y, cat = mixed_data(120, seed=8)
    ff = FederatedForestClassifier(2, max_depth=2, random_state=3, categorical_features=cat, **small_key_options())
    ff.set_params(partition=[[0, 1, 2], [3, 4, 5]]).fit(X, y)
    ff.predict(X[:10])
    return ff


def _received(ff: Any) -> dict[str, set[str]]:
    return {p: set(ff.transcript_.types_received(p)) for p in ("client0", "client1", "master")}


def test_client_views_match_the_spec(spec_run: Any) -> None:
    check_views_match_the_spec(_received(spec_run))
    # a client other than the label holder never receives a gain (a function of the labels)
    for rec in spec_run.transcript_.view("client1"):
        if isinstance(rec.payload, m.ScoreReply):
            assert not hasattr(rec.payload, "gains")


@pytest.mark.parametrize(("party", "extra"), [("client1", "federated_forest.winners"),
                                               ("client1", "federated_forest.local_best"),
                                               ("master", "federated_forest.score_request"),
                                               ("master", "federated_forest.node_stats")])
def test_a_message_outside_the_spec_table_is_caught(spec_run: Any, party: str, extra: str) -> None:
    """Planted leak: a role receives a message its table does not list (the winners or another
    client's best split at a client, packed statistics or purity flags at the master)."""
    received = _received(spec_run)
    received[party] = received[party] | {extra}
    with pytest.raises(AssertionError, match="received"):
        check_views_match_the_spec(received)


# -- not-found slots carry constants only --------------------------------------------------------
#
# LocalBest has one slot per requested node; where the client has no valid split the slot must hold
# the dummy gain 0 and feature id -1.  Anything else there is data-derived and reaches the master.


def not_found_slots(view: list[Any]) -> tuple[int, set[float], set[int]]:
    """The master's scan: how many not-found slots it received, and the gains and feature ids in them."""
    count, gains, fids = 0, set(), set()
    for rec in view:
        if isinstance(rec.payload, m.LocalBest):
            miss = ~np.asarray(rec.payload.found, dtype=bool)
            count += int(miss.sum())
            gains |= {float(g) for g in np.asarray(rec.payload.gains)[miss]}
            fids |= {int(f) for f in np.asarray(rec.payload.feature_ids)[miss]}
    return count, gains, fids


def check_not_found_slots_are_dummies(view: list[Any]) -> int:
    """The property: every not-found slot holds gain 0.0 and feature id -1; returns their number."""
    count, gains, fids = not_found_slots(view)
    assert gains <= {0.0} and fids <= {-1}, f"data-derived values in not-found slots: {sorted(gains)[:5]}"
    return count


def _mixed_run(mode: str) -> Any:
    """Client 3 holds one column that never splits (one row differs, min_samples_leaf 5) and every
    node asks every feature: it answers not-found at every node, so the slots are always there."""
    X, y, cat = mixed_data(150, seed=5)
    stuck = np.full((X.shape[0], 1), 2.5)
    stuck[0] = 97.125
    ff = FederatedForestClassifier(2, max_depth=3, random_state=6, label_protection=mode,
            categorical_features=[*cat, False],
                                   max_features=None, min_samples_leaf=5, **small_key_options())
    return ff.set_params(partition=[[0, 1, 4], [2, 3], [5], [6]]).fit(np.hstack([X, stuck]), y)


@pytest.mark.parametrize("mode", ["shared", "encrypted"])
def test_not_found_slots_carry_only_the_dummy_gain(mode: str) -> None:
    ff = _mixed_run(mode)
    assert check_not_found_slots_are_dummies(ff.transcript_.view("master")) > 0


def _first_value(X: np.ndarray) -> float:
    return float(X[:, 0][~np.isnan(X[:, 0])][0])


def _column_mean(X: np.ndarray) -> float:
    return float(np.nanmean(X[:, 0]))


@pytest.mark.parametrize("mode", ["shared", "encrypted"])
@pytest.mark.parametrize("derive", [_first_value, _column_mean], ids=["raw-value", "column-mean"])
def test_data_in_not_found_slots_is_caught(monkeypatch: pytest.MonkeyPatch, mode: str, derive: Any) -> None:
    """Planted leak: a client fills its not-found slots' gains with a raw feature value or a column
    mean; the model is unchanged (the master ignores those slots), the property check fails, and the
    value itself is found in the master's view."""
    real = Client.on_find_splits
    planted: list[float] = []

    def leaky(self: Client, sender: str, msg: m.FindSplits) -> m.LocalBest:
        reply = real(self, sender, msg)
        planted.append(derive(self._X))
        return dataclasses.replace(reply, gains=np.where(reply.found, reply.gains, planted[-1]))

    monkeypatch.setattr(Client, "on_find_splits", leaky)
    view = _mixed_run(mode).transcript_.view("master")
    with pytest.raises(AssertionError, match="data-derived values in not-found slots"):
        check_not_found_slots_are_dummies(view)
    _, gains, _ = not_found_slots(view)
    leaked = gains & set(planted)
    assert leaked and find_canaries(view, sorted(leaked)[:1])
