"""SecureBoost deployed with checkpoints: a passive party's process is killed mid-fit (after its
first round's checkpoint), the operator's fit fails with ``PartyUnavailable`` (the connection is
gone: a type, not a wall-clock bound), the party is started again (it takes its aligned rows from
its checkpoint: no alignment phase), ``resume`` finishes the fit and the active party's predictions
equal the one-process facade's on the aligned rows, bit for bit.

Keys are 1024-bit (the size is not the point here), hence the insecure-key warnings are allowed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("grpc")

from securetrees.datasets import load_adult
from securetrees.errors import PartyUnavailable, PeerTimeout
from securetrees.net.alignment import align, in_alignment
from securetrees.net.config import load_config, read_passphrase
from securetrees.net.control import Operator
from securetrees.net.service import await_roles, network_for, spawn_role
from securetrees.protocols.secureboost import SecureBoostClassifier, deploy
from securetrees.protocols.secureboost.demo import MAX_BINS, adult_partition
from securetrees.rand import DeterministicRandom
from securetrees.testing.alignment import joined_view
from securetrees.testing.interrupt import end_roles, interrupt_fit, restart_role
from securetrees.testing.paillier import small_keypair

pytestmark = pytest.mark.filterwarnings("ignore::securetrees.errors.InsecureParameterWarning")

SETTINGS: dict[str, Any] = {"n_estimators": 6, "max_depth": 3, "learning_rate": 0.3, "max_bins": MAX_BINS,
                            "key_bits": 1024, "allow_insecure": True}


def test_a_killed_passive_party_restarts_from_its_checkpoint_and_the_fit_resumes(tmp_path: Path) -> None:
    adult, keys = load_adult(), small_keypair(1024)
    cfg = deploy.prepare(tmp_path, adult.X_train[:150], adult.y_train[:150], adult_partition(2),
                         X_test=adult.X_test[:30], params={**SETTINGS, "checkpoint_dir": "ckpt"}, keypair=keys,
                         names=adult.feature_names, categories=adult.categories, lacking=3,
                         rng=DeterministicRandom("secureboost resume trial"))
    config = load_config(cfg)
    pki = tmp_path / "pki"
    procs = {r: spawn_role(config, r, pki / f"{r}.pass", tmp_path / f"{r}.log") for r in config.roles}
    try:
        with network_for(config, "operator", read_passphrase("operator", pki / "operator.pass")) as net:
            op = Operator("operator", net)
            await_roles(net, procs, 60)
            align(op, deploy.alignment_plan(config))
            error = interrupt_fit(op, procs, driver="active", victim="passive0",
                                  checkpoint=tmp_path / "ckpt" / "passive0.ckpt")
            # stopped at once (the fit cannot finish without it: five more rounds need its answers),
            # then killed: the active party's call fails on the dropped connection
            assert isinstance(error, PartyUnavailable) and not isinstance(error, PeerTimeout), error
            assert "passive0" in str(error)

            restart_role(config, procs, net, "passive0", pki, tmp_path / "passive0.restart.log")
            assert not in_alignment(op, "passive0")  # its rows came from its checkpoint
            info = deploy.resume(op, config)
            deploy.predict(op, config)
            op.control_many(config.roles, "shutdown")
    finally:
        end_roles(procs)
    part = adult_partition(2)
    data = joined_view(config, ["active", "passive0", "passive1"], part, adult.X_train.shape[1])
    clf = SecureBoostClassifier(part, **SETTINGS, keypair=keys,
                                categorical_features=[int(c) for c in np.flatnonzero(data.categorical)])
    clf.fit(data.X, data.y)
    assert info["trees"] == str(SETTINGS["n_estimators"])
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "active.proba.npy"), clf.predict_proba(data.X_test))
