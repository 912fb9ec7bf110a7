"""HybridTree deployed with checkpoints: a role's process is killed mid-fit (after its first
checkpoint), the operator's fit fails with ``PartyUnavailable`` naming it (the connection is gone,
or too few guests remain: a type, not a wall-clock bound), the role is started again (it takes its
aligned rows from its checkpoint: no alignment phase), ``resume`` finishes the fit (the host sets
every guest up again: a fresh session, fresh agreement keys) and the host's predictions equal the
one-process facade's on the joined aligned rows, bit for bit.  Once with a guest killed, once with
the host (the role that drives the fit).

Keys are 1024-bit and the guest layers' minimum node size is 20 rows, so that a few hundred rows
grow guest splits quickly (the size is not the point here); hence the insecure-key warnings are allowed.
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
from securetrees.protocols.hybridtree import deploy
from securetrees.protocols.hybridtree.demo import MAX_BINS, AdultHybrid, adult_hybrid
from securetrees.protocols.hybridtree.estimators import HybridTreeClassifier
from securetrees.protocols.hybridtree.testing import joined_view
from securetrees.rand import DeterministicRandom
from securetrees.testing.interrupt import end_roles, interrupt_fit, restart_role
from securetrees.testing.paillier import small_keypair

pytestmark = pytest.mark.filterwarnings("ignore::securetrees.errors.InsecureParameterWarning")

SETTINGS: dict[str, Any] = {"n_estimators": 3, "learning_rate": 0.5, "host_depth": 2, "max_bins": MAX_BINS,
                            "min_node_size": 20, "key_bits": 1024, "allow_insecure": True}


@pytest.fixture(scope="module")
def adult() -> AdultHybrid:
    return adult_hybrid(n_guests=3, rows=200)


def _interrupted_fit_resumed(tmp_path: Path, adult: AdultHybrid, victim: str) -> None:
    """Align, fit until ``victim`` has written its first checkpoint, kill it, restart it, resume,
    predict; the host's probabilities equal the facade's."""
    keys = small_keypair(1024)
    s = adult.split
    cfg = deploy.prepare(tmp_path, adult.X_train, adult.y_train, s.host_features, s.guest_features, s.train_rows,
                         X_test=adult.X_test, test_rows=s.test_rows, keypair=keys,
                         params={**SETTINGS, "checkpoint_dir": "ckpt"}, names=adult.names,
                         categories=load_adult().categories, lacking=3,
                         rng=DeterministicRandom("hybridtree resume trial"))
    config = load_config(cfg)
    pki = tmp_path / "pki"
    procs = {r: spawn_role(config, r, pki / f"{r}.pass", tmp_path / f"{r}.log") for r in config.roles}
    try:
        with network_for(config, "operator", read_passphrase("operator", pki / "operator.pass")) as net:
            op = Operator("operator", net)
            await_roles(net, procs, 60)
            align(op, deploy.alignment_plan(config))
            error = interrupt_fit(op, procs, driver=deploy.HOST, victim=victim,
                                  checkpoint=tmp_path / "ckpt" / f"{victim}.ckpt")
            # stopped at once, then killed: the next round needs it (three guests, min_guests = 3:
            # the host cannot go on without one); the call to it fails on the dropped connection
            assert isinstance(error, PartyUnavailable) and not isinstance(error, PeerTimeout), error
            assert victim in str(error)

            restart_role(config, procs, net, victim, pki, tmp_path / f"{victim}.restart.log")
            assert not in_alignment(op, victim)  # its rows came from its checkpoint
            info = deploy.resume(op, config)
            deploy.predict(op, config)
            op.control_many(config.roles, "shutdown")
    finally:
        end_roles(procs)
    view = joined_view(config)
    clf = HybridTreeClassifier(**SETTINGS, **view.settings(), keypair=keys)  # type: ignore[arg-type]
    clf.fit(view.X, view.y)
    assert info["trees"] == str(SETTINGS["n_estimators"]) and info["dropped"] == "none"
    assert int(info["guest_splits"]) == sum(r.n_guest_splits for r in clf.host_.records) > 0
    test_view = joined_view(config, test=True, host_schema=view.host_schema)
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "host.proba.npy"), clf.predict_proba(test_view.X))


def test_a_killed_guest_restarts_from_its_checkpoint_and_the_fit_resumes(tmp_path: Path, adult: AdultHybrid) -> None:
    _interrupted_fit_resumed(tmp_path, adult, "guest0")
    assert "guest0 set up by host" in (tmp_path / "guest0.restart.log").read_text()  # a fresh session


def test_a_killed_host_restarts_from_its_checkpoint_and_the_fit_resumes(tmp_path: Path, adult: AdultHybrid) -> None:
    _interrupted_fit_resumed(tmp_path, adult, deploy.HOST)
