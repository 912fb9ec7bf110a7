"""RevFRF deployed with checkpoints: one role's process is killed mid-fit, started again, and
``resume`` finishes the fit; the predictions equal the one-process facade's on the aligned rows,
bit for bit, and the resumed forest can then be revoked from like any other.

* A participant (``u1``), after its first checkpoint: the CS's fit fails with ``PartyUnavailable``
  (the connection is gone: a type, not a wall-clock bound); restarted, ``u1`` takes its aligned
  rows from its checkpoint (no alignment phase).
* The CS itself (the driver), after its first checkpoint, in round 0 (once ``u1`` has journalled
  its reply): the operator's ``fit`` call fails with ``PartyUnavailable`` naming ``cs``; restarted,
  the CS takes its rows from its checkpoint (no alignment phase), refuses to ``fit`` afresh,
  ``resume`` restores its latest layer and the participants answer the round in progress from
  their journals.
* The CC, after the CS's first checkpoint: construction does not need it (the fit finishes); saving
  the parts does (``resume`` fails with ``PartyUnavailable`` naming ``cc`` until it is restarted),
  and so does FRF-Test, which then matches the facade's.

After a resume, FRF-Revoc at level 2 (the restarted party among the survivors, or the restarted CS
rebuilding) gives the facade's forest after the same revocation; every saved part shows the
revocation (:func:`check_revoked`, with its planted companion: the parts before it fail the check).

Keys are 1024-bit (the size is not the point here), hence the insecure-key warnings are allowed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("grpc")

from securetrees.datasets import load_adult
from securetrees.dtpkc import KGC
from securetrees.errors import ParameterError, PartyUnavailable, PeerTimeout, ProtocolError
from securetrees.net.alignment import align, in_alignment
from securetrees.net.config import RunConfig, load_config, read_passphrase
from securetrees.net.control import Operator
from securetrees.net.keyfile import open_key_file
from securetrees.net.models import model_path, open_model
from securetrees.net.service import await_roles, network_for, spawn_role
from securetrees.net.transport import GrpcNetwork
from securetrees.protocols.revfrf import RevFRFClassifier, deploy
from securetrees.protocols.revfrf.checkpoint import FORMAT, ServerState
from securetrees.protocols.revfrf.model import CSPart, ParticipantPart, RevokedPart
from securetrees.rand import DeterministicRandom
from securetrees.runtime import Message
from securetrees.runtime.checkpoint import CheckpointStore
from securetrees.testing.alignment import JoinedView, joined_view
from securetrees.testing.interrupt import Procs, end_roles, interrupt_fit, restart_role

pytestmark = pytest.mark.filterwarnings("ignore::securetrees.errors.InsecureParameterWarning")

PARTICIPANTS = ("u1", "u2", "u3")
ROWS, D = 80, 14
PARTITION = [list(range(i, D, 3)) for i in range(3)]
SETTINGS = {"n_estimators": 3, "max_depth": 4, "random_state": 5, "n_classes": 2}


@dataclass
class Run:
    """A deployment whose roles run as processes, aligned and ready to fit."""

    config: RunConfig
    procs: Procs
    net: GrpcNetwork
    op: Operator
    tmp: Path

    def kill_mid_fit(self, victim: str, checkpoint: str) -> BaseException | None:
        """The operator's ``fit`` call to the CS, ``victim`` killed once ``ckpt/checkpoint`` exists."""
        return interrupt_fit(self.op, self.procs, driver="cs", victim=victim,
                             checkpoint=self.tmp / "ckpt" / checkpoint)

    def restart(self, role: str) -> None:
        restart_role(self.config, self.procs, self.net, role, self.tmp / "pki", self.tmp / f"{role}.restart.log")

    def parts(self) -> dict[str, Message]:
        """Every model part as its party last saved it."""
        return {name: open_model(model_path(self.config, name).read_bytes(),
                                 read_passphrase(name, self.tmp / "pki" / f"{name}.pass")).body
                for name in deploy.model_roles(self.config)}


@contextmanager
def deployment(tmp_path: Path) -> Iterator[Run]:
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
            yield Run(config, procs, net, op, tmp_path)
            op.control_many(config.roles, "shutdown")
    finally:
        end_roles(procs)


def facade(config: RunConfig) -> tuple[RevFRFClassifier, JoinedView]:
    """The one-process facade fitted on the rows the deployment agreed on."""
    data = joined_view(config, [*PARTICIPANTS, "cs"], PARTITION, D)
    clf = RevFRFClassifier(n_estimators=SETTINGS["n_estimators"], max_depth=SETTINGS["max_depth"],
                           random_state=SETTINGS["random_state"], key_bits=1024, allow_insecure=True,
                           partition=PARTITION).fit(data.X, data.y)
    return clf, data


def check_revoked(parts: dict[str, Message], party: str) -> None:
    """What the saved parts show after FRF-Revoc of ``party``: no node of it and none of its columns
    in the CS's forest, its own part empty and revoked, its key revoked at the KGC and dropped by
    the CC, the survivors in the new epoch."""
    cs = parts["cs"]
    assert isinstance(cs, CSPart)
    columns = PARTITION[PARTICIPANTS.index(party)]
    for t in cs.trees:
        internal = np.array([p != "" for p in t.provider], dtype=bool)
        assert party not in t.provider, f"a node of {party} remains"
        assert not set(np.asarray(t.column)[internal].tolist()) & set(columns), f"a column of {party} remains"
    assert cs.revoked == (party,) and cs.epoch == 1
    for name in ("kgc", "cc"):
        body = parts[name]
        assert isinstance(body, RevokedPart) and body.revoked == (party,), f"the {name} did not revoke {party}"
    for u in PARTICIPANTS:
        body = parts[u]
        assert isinstance(body, ParticipantPart)
        assert (body.revoked, body.epoch) == ((True, 0) if u == party else (False, 1)), u
        assert u != party or body.tree.size == 0, f"{party} kept its nodes"


def revoke_after_resume(run: Run, clf: RevFRFClassifier, data: JoinedView, party: str) -> None:
    """FRF-Revoc of ``party`` at level 2 on the resumed forest: the parts show it (and the parts from
    before it fail the same check: the planted companion), and the predictions equal the facade's
    after the same revocation."""
    before = run.parts()
    deploy.revoke(run.op, run.config, party, 2)
    check_revoked(run.parts(), party)
    with pytest.raises(AssertionError, match=f"a node of {party} remains"):
        check_revoked(before, party)
    got = deploy.predict(run.op, run.config, "vertical")
    clf.revoke(party, level=2)
    np.testing.assert_array_equal(got["vertical"], clf.predict_proba(data.X_test))


def test_a_killed_participant_restarts_from_its_checkpoint_and_the_fit_resumes(tmp_path: Path) -> None:
    with deployment(tmp_path) as run:
        error = run.kill_mid_fit("u1", "u1.ckpt")
        # stopped at once (every layer asks every participant whose columns were drawn), then
        # killed: the CS's call fails on the dropped connection
        assert isinstance(error, PartyUnavailable) and not isinstance(error, PeerTimeout), error
        assert "u1" in str(error)

        run.restart("u1")
        assert not in_alignment(run.op, "u1")  # its rows came from its checkpoint
        info = deploy.resume(run.op, run.config)
        got = deploy.predict(run.op, run.config, "vertical")
        clf, data = facade(run.config)
        assert info["trees"] == str(SETTINGS["n_estimators"])
        np.testing.assert_array_equal(got["vertical"], clf.predict_proba(data.X_test))
        # the restarted u1 re-signs its surviving nodes from the state it restored
        revoke_after_resume(run, clf, data, "u3")


def test_a_killed_cs_restarts_from_its_checkpoint_and_the_fit_resumes(tmp_path: Path) -> None:
    with deployment(tmp_path) as run:
        # killed once u1 has journalled its first reply: the CS has sealed its first checkpoint
        # (the roots) and is in round 0, which the resumed CS asks again
        error = run.kill_mid_fit("cs", "u1.ckpt")
        # the operator's fit call went to the CS itself: it fails on the dropped connection
        assert isinstance(error, PartyUnavailable) and not isinstance(error, PeerTimeout), error
        assert "'cs'" in str(error)

        run.restart("cs")
        assert not in_alignment(run.op, "cs")  # its rows (and labels) came from its checkpoint
        with pytest.raises(ParameterError, match="resume"):  # starting over would re-ask answered rounds
            run.op.control("cs", "fit")
        info = deploy.resume(run.op, run.config)
        got = deploy.predict(run.op, run.config, "vertical")
        clf, data = facade(run.config)
        assert info["trees"] == str(SETTINGS["n_estimators"])
        np.testing.assert_array_equal(got["vertical"], clf.predict_proba(data.X_test))
        # the restarted CS destroys and rebuilds by FLE-Expan over the rows it restored
        revoke_after_resume(run, clf, data, "u1")
        # checkpoints cover construction only: killed again after the revocation, the CS refuses to
        # resume, since its checkpoint holds the forest of before it (u1's nodes with it)
        run.procs["cs"].kill()
        run.procs["cs"].wait(timeout=30)
        run.restart("cs")
        with pytest.raises(ProtocolError, match="after a revocation"):
            deploy.resume(run.op, run.config)
        check_revoked(run.parts(), "u1")  # nothing saved over the revoked parts
        assert "u1" in checkpointed_providers(run)  # what a CS without the refusal would resume


def checkpointed_providers(run: Run) -> set[str]:
    """The providers of the nodes in the CS's latest checkpoint (opened with its key from its key file)."""
    items = open_key_file(run.tmp / "keys" / "cs.keys", "cs", read_passphrase("cs", run.tmp / "pki" / "cs.pass"))
    state = CheckpointStore(run.tmp / "ckpt", "cs", items["checkpoint_key"], FORMAT).latest(ServerState)
    assert state is not None
    return {n.provider for n in state.nodes if n.provider}


def test_a_killed_cc_takes_no_part_in_construction_and_is_needed_after_it(tmp_path: Path) -> None:
    with deployment(tmp_path) as run:
        assert run.kill_mid_fit("cc", "cs.ckpt") is None  # the forest is grown without the CC
        with pytest.raises(PartyUnavailable, match="'cc'") as failed:  # saving the parts needs every role
            deploy.resume(run.op, run.config)
        assert not isinstance(failed.value, PeerTimeout)

        run.restart("cc")
        info = deploy.resume(run.op, run.config)
        got = deploy.predict(run.op, run.config, "test")  # FRF-Test: HoLT with the restarted CC
        clf, data = facade(run.config)
        assert info["trees"] == str(SETTINGS["n_estimators"])
        np.testing.assert_array_equal(got["test"], clf.predict_proba(data.X_test, method="test"))


def test_setup_kgc_writes_checkpoint_keys_for_the_roles_that_checkpoint(tmp_path: Path) -> None:
    from securetrees.net.keyfile import open_key_file

    names = ["cs", "cc", "kgc", "u1", "requester"]
    passphrases = {n: f"{n}-passphrase".encode() for n in names}
    deploy.write_key_files(tmp_path, ["u1"], ["requester"], passphrases, key_bits=1024, allow_insecure=True,
                           checkpoint_key=True)
    keys = {n: open_key_file(tmp_path / f"{n}.keys", n, passphrases[n]) for n in names}
    assert {n for n, items in keys.items() if "checkpoint_key" in items} == {"cs", "u1"}
    assert len(keys["cs"]["checkpoint_key"]) == 32 and keys["cs"]["checkpoint_key"] != keys["u1"]["checkpoint_key"]
