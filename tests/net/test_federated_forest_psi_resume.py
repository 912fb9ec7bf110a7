"""Federated Forest deployed with PSI alignment and checkpoints: a client's process is killed mid-fit
(after its first tree's checkpoint), the operator's fit fails with ``PartyUnavailable`` (a type, not a
wall-clock bound), the client is started again and takes its aligned rows from its checkpoint (it
does not re-enter the alignment phase, which is over for everyone else), ``resume`` finishes the fit
and the label holder's predictions equal the one-process estimator's on the intersected rows.

Keys are 1024-bit (the size is not the point here), hence the insecure-key warnings are allowed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("grpc")

from securetrees.datasets import load_adult
from securetrees.errors import PartyUnavailable, PeerTimeout
from securetrees.net.alignment import align, in_alignment
from securetrees.net.config import load_config, read_passphrase
from securetrees.net.control import Operator
from securetrees.net.service import await_roles, network_for, spawn_role
from securetrees.paillier import PublicKey
from securetrees.protocols.federated_forest import FederatedForestClassifier
from securetrees.protocols.federated_forest import deploy as ff_deploy
from securetrees.rand import DeterministicRandom
from securetrees.testing.alignment import joined_view
from securetrees.testing.interrupt import end_roles, interrupt_fit, restart_role
from securetrees.testing.paillier import small_keypair

pytestmark = pytest.mark.filterwarnings("ignore::securetrees.errors.InsecureParameterWarning")


def _insecure_loader(b: bytes) -> PublicKey:
    return PublicKey.from_bytes(b, allow_insecure=True)


def test_a_killed_client_resumes_on_its_aligned_rows_and_the_fit_finishes(tmp_path: Path) -> None:
    adult = load_adult()
    X, y, Xt = adult.X_train[:150], adult.y_train[:150], adult.X_test[:30]
    d = X.shape[1]
    part = [list(range(i, d, 3)) for i in range(3)]
    keys = small_keypair(1024)
    params = {"n_estimators": 6, "max_depth": 3, "random_state": 0, "n_classes": 2, "allow_insecure": True,
              "key_bits": 1024, "release_predictions": "operator", "checkpoint_dir": "ckpt"}
    cfg = ff_deploy.prepare(tmp_path, X, y, part, X_test=Xt, params=params, paillier_keys=keys, label_holder=1,
                            id_key=DeterministicRandom("ff ids").token_bytes(32), names=adult.feature_names,
                            categories=adult.categories, lacking=3, rng=DeterministicRandom("ff psi resume trial"))
    config = load_config(cfg)
    pki = tmp_path / "pki"
    procs = {r: spawn_role(config, r, pki / f"{r}.pass", tmp_path / f"{r}.log") for r in config.roles}
    try:
        with network_for(config, "operator", read_passphrase("operator", pki / "operator.pass")) as net:
            op = Operator("operator", net)
            await_roles(net, procs, 60)
            align(op, ff_deploy.alignment_plan(config))
            error = interrupt_fit(op, procs, driver="master", victim="client2",
                                  checkpoint=tmp_path / "ckpt" / "client2.ckpt")
            assert isinstance(error, PartyUnavailable) and not isinstance(error, PeerTimeout), error
            assert "client2" in str(error)

            restart_role(config, procs, net, "client2", pki, tmp_path / "client2.restart.log")
            assert not in_alignment(op, "client2")  # its rows came from its checkpoint
            info = ff_deploy.resume(op, config)
            got = ff_deploy.predict(op, config)["output"]
            op.control_many(config.roles, "shutdown")
    finally:
        end_roles(procs)
    assert info["trees"] == "6"
    data = joined_view(config, ["client0", "client1", "client2"], part, d)
    ff = FederatedForestClassifier(6, max_depth=3, random_state=0, paillier_keys=keys,
                                   allow_insecure=True, key_bits=1024, rng=DeterministicRandom("ff ids"),
                                   public_key_loader=_insecure_loader, categorical_features=data.categorical)
    ff.set_params(partition=part).fit(data.X, data.y)
    np.testing.assert_array_equal(got, ff.predict_proba(data.X_test))
