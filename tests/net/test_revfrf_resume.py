"""RevFRF deployed with checkpoints: a participant's process is killed mid-fit (after its first
checkpoint), the operator's fit fails with ``PartyUnavailable`` (the connection is gone: a type,
not a wall-clock bound), the participant is started again (it takes its aligned rows from its
checkpoint: no alignment phase), ``resume`` finishes the fit from the CS's latest layer, and the
predictions equal the one-process facade's on the aligned rows, bit for bit.

Keys are 1024-bit (the size is not the point here), hence the insecure-key warnings are allowed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("grpc")

from securetrees.datasets import load_adult
from securetrees.dtpkc import KGC
from securetrees.errors import PartyUnavailable, PeerTimeout
from securetrees.net.alignment import align, in_alignment
from securetrees.net.config import load_config, read_passphrase
from securetrees.net.control import Operator
from securetrees.net.service import await_roles, network_for, spawn_role
from securetrees.protocols.revfrf import RevFRFClassifier, deploy
from securetrees.rand import DeterministicRandom
from securetrees.testing.alignment import joined_view
from securetrees.testing.interrupt import end_roles, interrupt_fit, restart_role

pytestmark = pytest.mark.filterwarnings("ignore::securetrees.errors.InsecureParameterWarning")

PARTICIPANTS = ("u1", "u2", "u3")
ROWS, D = 80, 14
PARTITION = [list(range(i, D, 3)) for i in range(3)]
SETTINGS = {"n_estimators": 3, "max_depth": 4, "random_state": 5, "n_classes": 2}


def test_a_killed_participant_restarts_from_its_checkpoint_and_the_fit_resumes(tmp_path: Path) -> None:
    adult = load_adult()
    cfg = deploy.prepare(tmp_path, adult.X_train[:ROWS], adult.y_train[:ROWS], PARTITION, X_test=adult.X_test[:8],
                         settings={**SETTINGS, "checkpoint_dir": "ckpt"}, kgc=KGC.setup(1024, allow_insecure=True),
                         lacking=1, rng=DeterministicRandom("revfrf resume trial"))
    config = load_config(cfg)
    pki = tmp_path / "pki"
    procs = {r: spawn_role(config, r, pki / f"{r}.pass", tmp_path / f"{r}.log") for r in config.roles}
    try:
        with network_for(config, "operator", read_passphrase("operator", pki / "operator.pass")) as net:
            op = Operator("operator", net)
            await_roles(net, procs, 60)
            align(op, deploy.alignment_plan(config))
            error = interrupt_fit(op, procs, driver="cs", victim="u1", checkpoint=tmp_path / "ckpt" / "u1.ckpt")
            # stopped at once (every layer asks every participant whose columns were drawn), then
            # killed: the CS's call fails on the dropped connection
            assert isinstance(error, PartyUnavailable) and not isinstance(error, PeerTimeout), error
            assert "u1" in str(error)

            restart_role(config, procs, net, "u1", pki, tmp_path / "u1.restart.log")
            assert not in_alignment(op, "u1")  # its rows came from its checkpoint
            info = deploy.resume(op, config)
            got = deploy.predict(op, config, "vertical")
            op.control_many(config.roles, "shutdown")
    finally:
        end_roles(procs)
    data = joined_view(config, [*PARTICIPANTS, "cs"], PARTITION, D)
    clf = RevFRFClassifier(key_bits=1024, allow_insecure=True, partition=PARTITION,
                           **{k: v for k, v in SETTINGS.items() if k != "n_classes"}).fit(data.X, data.y)
    assert info["trees"] == str(SETTINGS["n_estimators"])
    np.testing.assert_array_equal(got["vertical"], clf.predict_proba(data.X_test))


def test_setup_kgc_writes_checkpoint_keys_for_the_roles_that_checkpoint(tmp_path: Path) -> None:
    from securetrees.net.keyfile import open_key_file

    names = ["cs", "cc", "kgc", "u1", "requester"]
    passphrases = {n: f"{n}-passphrase".encode() for n in names}
    deploy.write_key_files(tmp_path, ["u1"], ["requester"], passphrases, key_bits=1024, allow_insecure=True,
                           checkpoint_key=True)
    keys = {n: open_key_file(tmp_path / f"{n}.keys", n, passphrases[n]) for n in names}
    assert {n for n, items in keys.items() if "checkpoint_key" in items} == {"cs", "u1"}
    assert len(keys["cs"]["checkpoint_key"]) == 32 and keys["cs"]["checkpoint_key"] != keys["u1"]["checkpoint_key"]
