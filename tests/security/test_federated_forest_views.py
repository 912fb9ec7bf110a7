"""Security properties of Federated Forest read from the transcript
(``specs/federated_forest.md``, "Threat model and what leaks by design")."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from protocols.federated_forest import FederatedForestClassifier, FederatedForestRegressor
from protocols.federated_forest import messages as m
from protocols.federated_forest.testing import mixed_data, small_key_options
from securetrees.testing.canaries import assert_no_canaries, find_canaries

N = 120


def _regression_run(mode: str) -> tuple[Any, np.ndarray, np.ndarray]:
    """Distinctive targets (canaries) at client 1; distinctive feature values at client 0."""
    g = np.random.default_rng(17)
    X = g.normal(size=(N, 4))
    X[:, 0] = 9_181_726.354637 + np.arange(N) * 1.000013  # client 0's feature values
    y = 731.0271849 + 3.7 * X[:, 2] + 0.013 * np.arange(N)  # the labels
    ff = FederatedForestRegressor(2, max_depth=3, random_state=1, label_protection=mode, label_holder=1,
                                  **small_key_options())
    ff.fit(X, y, [[0, 1], [2, 3]])
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


def test_no_feature_value_or_threshold_leaves_its_client(encrypted_run: Any) -> None:
    """Client 0's feature values and thresholds reach neither the master nor client 1."""
    ff, X, _ = encrypted_run
    own = ff.clients_[0].trees
    thresholds = sorted({float(t.threshold[k]) for t in own for k in np.flatnonzero(~t.withheld & (t.left != -1))})
    assert thresholds, "client 0 should have won at least one split"
    canaries = [float(v) for v in X[::9, 0]] + thresholds
    for party in ("master", "client1"):
        assert_no_canaries(ff.transcript_.view(party), canaries, frac_bits=(32,))


def test_master_stores_no_threshold_and_no_value(encrypted_run: Any) -> None:
    ff, _, _ = encrypted_run
    for t in ff.master_.trees:  # encrypted mode: the values stay with the label holder
        internal = t.left != -1
        assert np.all(t.withheld[internal]) and np.all(np.isnan(t.threshold)) and np.all(t.feature == -1)
        assert np.all(np.isnan(t.value))
    for t in ff.clients_[0].trees:  # the other client keeps no values (labels)
        assert np.all(np.isnan(t.value))
    assert all(np.all(np.isfinite(t.value)) for t in ff.clients_[1].trees)  # the label holder's table


@pytest.mark.parametrize("mode", ["shared", "encrypted"])
def test_clients_see_only_their_own_selected_features(mode: str) -> None:
    X, y, cat = mixed_data(150, seed=5)
    partition = [[0, 1, 4], [2, 3], [5]]
    ff = FederatedForestClassifier(3, max_depth=3, random_state=6, label_protection=mode, categorical=cat,
                                   **small_key_options())
    ff.fit(X, y, partition)
    seen_types: set[str] = set()
    for i, cols in enumerate(partition):
        for rec in ff.transcript_.view(f"client{i}"):
            seen_types.add(rec.type_name)
            p = rec.payload
            if isinstance(p, m.FindSplits):
                assert set(np.asarray(p.features).tolist()) <= set(cols)
            elif isinstance(p, m.TreeStart):
                assert set(p.features) <= set(cols)
            elif isinstance(p, m.ScoreRequest):  # anonymous entries: no feature id field at all
                assert {f.name for f in p.__dataclass_fields__.values()}.isdisjoint({"features", "feature_ids"})
    assert "federated_forest.find_splits" in seen_types


def test_client_views_match_the_spec() -> None:
    """Encrypted mode: the message types each role receives are exactly the spec's table."""
    X, y, cat = mixed_data(120, seed=8)
    ff = FederatedForestClassifier(2, max_depth=2, random_state=3, categorical=cat, **small_key_options())
    ff.fit(X, y, [[0, 1, 2], [3, 4, 5]])
    ff.predict(X[:10])
    tr = ff.transcript_
    received = set(tr.types_received("client1"))
    core = {
        "federated_forest.hello", "federated_forest.setup", "federated_forest.encrypted_labels",
        "federated_forest.tree_start", "federated_forest.find_splits", "federated_forest.score_reply",
        "federated_forest.layer_partition", "federated_forest.tree_end", "federated_forest.test_ids",
        "federated_forest.predict_request",
    }
    assert core <= received <= core | {"federated_forest.apply_split"}
    holder = set(tr.types_received("client0"))
    assert "federated_forest.encrypted_labels" not in holder and "federated_forest.shared_labels" not in holder
    assert {"federated_forest.score_request", "federated_forest.node_stats_request",
            "federated_forest.gains_request", "federated_forest.leaf_values_request"} <= holder
    assert "federated_forest.leaf_values_request" not in received
    master = set(tr.types_received("master"))
    assert master <= {"federated_forest.client_info", "federated_forest.ack", "federated_forest.node_stats",
                      "federated_forest.local_best", "federated_forest.partition",
                      "federated_forest.client_test_ids", "federated_forest.leaf_sets",
                      "federated_forest.gains_reply", "federated_forest.forest_output"}
    # a client other than the label holder never receives a gain (a function of the labels)
    for rec in tr.view("client1"):
        if isinstance(rec.payload, m.ScoreReply):
            assert not hasattr(rec.payload, "gains")
