"""The histogram forest deployed with checkpoints (secure aggregation, fixed bins, no noise: the run is
deterministic given ``random_state``): a client's process is killed mid-fit (after its checkpoint of
the first tree), the operator's fit fails with ``PartyUnavailable`` (the connection is gone: a type,
not a wall-clock bound), the client is started again, ``securetrees operator resume`` finishes the fit (the restarted
client restores its agreement key, so the masks still cancel) and every client's predictions equal the
one-process facade's on the same rows, bit for bit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("grpc")

from securetrees import cli
from securetrees.datasets import load_adult
from securetrees.errors import PartyUnavailable, PeerTimeout
from securetrees.net.config import load_config, read_passphrase
from securetrees.net.control import Operator
from securetrees.net.service import await_roles, network_for, spawn_role
from securetrees.protocols.histogram_forest import deploy
from securetrees.protocols.histogram_forest.experiment import stratified_clients
from securetrees.protocols.histogram_forest.testing import fit_tables
from securetrees.rand import DeterministicRandom
from securetrees.testing.interrupt import end_roles, interrupt_fit, restart_role

SETTINGS: dict[str, Any] = {"n_estimators": 6, "max_depth": 4, "random_state": 5, "secure_aggregation": True,
                            "histogram": "fixed", "checkpoint_dir": "ckpt"}
CLIENTS = ["client0", "client1", "client2"]


def test_a_killed_client_restarts_from_its_checkpoint_and_the_fit_resumes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = load_adult()
    X, y = data.X_train[:600], np.where(data.y_train[:600] == 1, ">50K", "<=50K")
    splits = stratified_clients(X, y, 3, seed=0)
    cfg = deploy.prepare(tmp_path, [(s.X_train, s.y_train) for s in splits],
                         tests=[(s.X_test, s.y_test) for s in splits], params=SETTINGS, names=data.feature_names,
                         categories=data.categories, rng=DeterministicRandom(b"hf-tables"))
    config = load_config(cfg)
    pki = tmp_path / "pki"
    procs = {r: spawn_role(config, r, pki / f"{r}.pass", tmp_path / f"{r}.log") for r in config.roles}
    try:
        with network_for(config, "operator", read_passphrase("operator", pki / "operator.pass")) as net:
            op = Operator("operator", net)
            await_roles(net, procs, 60)
            error = interrupt_fit(op, procs, driver="server", victim="client1",
                                  checkpoint=tmp_path / "ckpt" / "client1.prev.ckpt")
            # stopped at once (five more trees need its histograms), then killed
            assert isinstance(error, PartyUnavailable) and not isinstance(error, PeerTimeout), error
            assert "client1" in str(error)

            restart_role(config, procs, net, "client1", pki, tmp_path / "client1.restart.log")
            capsys.readouterr()
            assert cli.main(["operator", "resume", "--config", str(cfg),
                             "--passphrase-file", str(pki / "operator.pass")]) == 0
            resumed = capsys.readouterr().out
            deploy.predict(op, config)
            op.control_many(config.roles, "shutdown")
    finally:
        end_roles(procs)
    assert "resume: trees 6, epsilon_spent 0.0" in resumed
    clf, pooled = fit_tables(cfg)
    out = tmp_path / "out"
    for c in CLIENTS:
        np.testing.assert_array_equal(np.load(out / f"{c}.proba.npy"), clf.predict_proba(pooled.tests[c]))
