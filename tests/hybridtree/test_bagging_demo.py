"""Multi-host bagging (Appendix C.2) and the demo's entry point."""

from __future__ import annotations

import numpy as np

from securetrees.protocols.hybridtree.bagging import HybridTreeBagging
from securetrees.protocols.hybridtree.demo import main
from securetrees.protocols.hybridtree.testing import HybridData
from securetrees.testing.paillier import small_keypair


def test_bagging_over_two_hosts(data: HybridData) -> None:
    n = len(data.y)
    hosts = [np.arange(0, n, 2), np.arange(1, n, 2)]
    bag = HybridTreeBagging("classifier", n_estimators=4, host_depth=2, guest_depth=1, learning_rate=0.5,
                            max_bins=8, keypair=small_keypair(512), min_node_size=0,
                            min_bin_size=0)  # small data
    bag.fit(data.X, data.y, hosts, data.host_features, data.guest_features, data.guest_rows)
    assert len(bag.models_) == 2
    pred = bag.predict(data.X, data.guest_rows)
    assert np.mean(pred == data.y) > 0.75
    proba = bag.predict_proba(data.X, data.guest_rows)
    assert np.allclose(proba.sum(axis=1), 1.0)
    reg = HybridTreeBagging("regressor", n_estimators=3, host_depth=2, guest_depth=1, max_bins=8,
                            keypair=small_keypair(512), min_node_size=0, min_bin_size=0)
    reg.fit(data.X, data.y_reg, hosts, data.host_features, data.guest_features, data.guest_rows)
    assert reg.predict(data.X, data.guest_rows).shape == (n,)


def test_demo_runs_on_a_slice_of_adult(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["--rows", "600", "--trees", "2", "--mode", "paper", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "HybridTree (paper" in out and "ALL-IN" in out and "SOLO" in out
