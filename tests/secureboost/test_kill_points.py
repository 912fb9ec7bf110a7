"""Kill a SecureBoost role at every message of one boosting round, restart it from its own
checkpoint files only, resume: the same model and predictions, bit for bit.

Every delivery of the chosen round (gradients, histogram and split requests, the checkpoint
round) is a kill point, twice over: the role dies before the message is handled (it is lost) or
right after (the reply is lost); the role is the message's sender or its receiver.  The other
roles keep running with what they hold in memory; the dead role is rebuilt from its checkpoint
store, then the active party resumes.

A passive party answers one histogram request per tree and layer and one split request per tree
and nodes: the same request again (a resumed active party repeats it byte for byte) passes, any
other is refused, across a restart (its journal).  Planted companion: a passive party that forgets
its answered requests when it resumes answers a second, different one.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from securetrees.errors import PartyUnavailable, UnexpectedMessage
from securetrees.paillier import PrivateKey, PublicKey
from securetrees.protocols.secureboost import ActiveParty, PassiveParty, SecureBoostParams
from securetrees.protocols.secureboost import messages as m
from securetrees.protocols.secureboost.checkpoint import FORMAT
from securetrees.protocols.secureboost.testing import joined_tree
from securetrees.rand import DeterministicRandom
from securetrees.runtime import Message
from securetrees.runtime.checkpoint import CheckpointStore
from securetrees.runtime.journal import SingleUseJournal
from securetrees.testing.kill_points import Kill, KillNet
from tests.secureboost.conftest import vertical_data

X, Y = vertical_data(60, seed=3)
X_TEST = vertical_data(20, seed=4)[0]
COLS = {"active": [0, 1], "p0": [2, 3], "p1": [4, 5]}
pytestmark = pytest.mark.filterwarnings("ignore::securetrees.errors.InsecureParameterWarning")
KEYS = {"active": b"a" * 32, "p0": b"b" * 32, "p1": b"c" * 32}
PARAMS = SecureBoostParams(n_estimators=3, max_depth=2, max_bins=8, frac_bits=16)


def _store(d: Path, name: str) -> CheckpointStore:
    return CheckpointStore(d, name, KEYS[name], FORMAT, rng=DeterministicRandom(name))


def _active(net: KillNet, d: Path, keys: tuple[PublicKey, PrivateKey], params: SecureBoostParams = PARAMS
            ) -> ActiveParty:
    return ActiveParty("active", net, X=X[:, COLS["active"]], y=Y, passives=["p0", "p1"], params=params,
                       keypair=keys, rng=DeterministicRandom("active"), checkpoint=_store(d, "active"))


def _passive(net: KillNet, d: Path, name: str, cls: type[PassiveParty] = PassiveParty) -> PassiveParty:
    return cls(name, net, X=X[:, COLS[name]], allow_insecure=True, rng=DeterministicRandom(name),
               checkpoint=_store(d, name))


def _model(active: ActiveParty, passives: dict[str, PassiveParty]) -> tuple[list[object], np.ndarray]:
    assert active.model is not None
    trees = [joined_tree(r, [passives["p0"], passives["p1"]], 2) for r in active.model.trees]
    for name, p in passives.items():
        p.load_queries(X_TEST[:, COLS[name]])
    return trees, active.decision_function(X_TEST[:, COLS["active"]])


def _round_window(log: list[tuple[str, str, Message]], trees: range) -> list[int]:
    """Deliveries of one boosting round: its trees' messages and the checkpoint that closes it."""
    def in_round(msg: Message) -> bool:
        if isinstance(msg, m.Checkpoint):
            return msg.trees == trees.stop
        return getattr(msg, "tree", None) in trees

    return [k for k, (_, _, msg) in enumerate(log) if in_round(msg)]


def test_kill_any_role_at_any_message_of_a_round_and_resume(tmp_path: Path,
                                                           keypair: tuple[PublicKey, PrivateKey]) -> None:
    net = KillNet()
    passives = {n: _passive(net, tmp_path / "ref", n) for n in ("p0", "p1")}
    active = _active(net, tmp_path / "ref", keypair)
    active.fit()
    want_trees, want_out = _model(active, passives)
    window = _round_window(net.log, range(1, 2))
    kinds = {type(net.log[k][2]) for k in window}
    assert {m.Gradients, m.HistogramRequest, m.SplitRequest, m.Checkpoint} <= kinds, kinds
    kills = [Kill(k, who, after) for k in window for who in net.log[k][:2] for after in (False, True)]
    repeated = 0
    for n, kill in enumerate(kills):
        d = tmp_path / str(n)
        net = KillNet(kill)
        passives = {name: _passive(net, d, name) for name in ("p0", "p1")}
        active = _active(net, d, keypair)
        with pytest.raises(PartyUnavailable):
            active.fit()
        if kill.victim == "active":
            active = _active(net, d, keypair)
        else:
            passives[kill.victim] = _passive(net, d, kill.victim)
        start = len(net.log)
        active.resume()
        got_trees, got_out = _model(active, passives)
        assert len(got_trees) == len(want_trees), kill
        assert all(a.same_as(b) for a, b in zip(got_trees, want_trees, strict=True)), kill  # type: ignore[attr-defined]
        np.testing.assert_array_equal(got_out, want_out, err_msg=str(kill))
        asked = {(r, msg.tree, msg.layer) for _, r, msg in net.log[:start] if isinstance(msg, m.HistogramRequest)}
        repeated += any(isinstance(msg, m.HistogramRequest) and (r, msg.tree, msg.layer) in asked
                        for _, r, msg in net.log[start:])
    assert repeated > 0  # some resumes did repeat an answered request (admitted as byte-identical)


def test_resume_without_a_checkpoint_starts_over(tmp_path: Path, keypair: tuple[PublicKey, PrivateKey]) -> None:
    net = KillNet()
    passives = {n: _passive(net, tmp_path / "ref", n) for n in ("p0", "p1")}
    active = _active(net, tmp_path / "ref", keypair)
    active.fit()
    want = _model(active, passives)[1]
    net = KillNet(Kill(3, "p0", after=False))  # dies in the first tree: no checkpoint yet
    passives = {n: _passive(net, tmp_path, n) for n in ("p0", "p1")}
    with pytest.raises(PartyUnavailable):
        _active(net, tmp_path, keypair).fit()
    passives["p0"] = _passive(net, tmp_path, "p0")
    active = _active(net, tmp_path, keypair)
    active.resume()
    np.testing.assert_array_equal(_model(active, passives)[1], want)


def test_a_new_fit_over_the_checkpoints_of_an_earlier_one_is_refused(
        tmp_path: Path, keypair: tuple[PublicKey, PrivateKey]) -> None:
    from securetrees.errors import ParameterError

    net = KillNet()
    for n in ("p0", "p1"):
        _passive(net, tmp_path, n)
    _active(net, tmp_path, keypair).fit()
    with pytest.raises(ParameterError, match="holds a fit already"):
        _active(net, tmp_path, keypair).fit()


def test_a_checkpoint_of_another_run_is_refused(tmp_path: Path, keypair: tuple[PublicKey, PrivateKey]) -> None:
    from securetrees.errors import ProtocolError

    net = KillNet()
    for n in ("p0", "p1"):
        _passive(net, tmp_path, n)
    _active(net, tmp_path, keypair).fit()
    other = _active(net, tmp_path, keypair, replace(PARAMS, learning_rate=0.2))
    with pytest.raises(ProtocolError, match="does not belong to this run"):
        other.resume()


# ---------------------------------------------------------------------------- single-use requests
class ForgetfulPassive(PassiveParty):
    """Planted leak: forgets the requests it answered when it resumes."""

    def on_resume(self, sender: str, msg: m.Resume) -> m.Ack:
        ack = super().on_resume(sender, msg)
        self._journal.prune(lambda slot: False)
        return ack


class LateJournalPassive(PassiveParty):
    """Planted leak: holds its journal only once the active party sends ``Resume`` (the old order)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._journal = self._late_journal()  # nothing reloaded yet

    def _late_journal(self) -> SingleUseJournal:
        return SingleUseJournal(lambda slot: UnexpectedMessage(f"{slot} answered"), store=self._store)

    def on_resume(self, sender: str, msg: m.Resume) -> m.Ack:
        self._journal = self._late_journal()
        self._journal.reload()
        return super().on_resume(sender, msg)


def _second_histogram_answered(tmp: Path, keys: tuple[PublicKey, PrivateKey], cls: type[PassiveParty], *,
                               resume: bool = True) -> bool:
    """``p0`` is killed right after answering its first histogram request of tree 1 and restarted;
    the active party resumes (tree 1 again), or (``resume=False``) skips the resume and goes on;
    then a request for the same tree and layer over other instances (what a curious active party
    would ask to learn more bucket sums) is sent."""
    net = KillNet()
    for n in ("p0", "p1"):
        _passive(net, tmp / "ref", n)
    _active(net, tmp / "ref", keys).fit()
    first = next(k for k, (_, r, msg) in enumerate(net.log)
                 if r == "p0" and isinstance(msg, m.HistogramRequest) and msg.tree == 1)
    net = KillNet(Kill(first, "p0", after=True))
    _passive(net, tmp, "p0"), _passive(net, tmp, "p1")
    with pytest.raises(PartyUnavailable):
        _active(net, tmp, keys).fit()
    request = net.log[first][2]
    assert isinstance(request, m.HistogramRequest)
    p0 = _passive(net, tmp, "p0", cls)
    active = _active(net, tmp, keys)
    active.setup()
    if resume:
        net.call("active", "p0", m.Resume(1))
    net.call("active", "p0", m.Gradients(1, PARAMS.frac_bits, 1, 1, _ones(keys[0])))
    job = request.jobs[0]
    probe = m.HistogramRequest(1, request.layer, (replace(job, ids=job.ids[:1]),))
    try:
        net.call("active", "p0", probe)
    except UnexpectedMessage:
        return False
    assert p0.table is not None
    return True


def _ones(pk: PublicKey) -> bytes:
    """Gradient ciphertexts of a tree (their values do not matter to the check)."""
    from securetrees.paillier.batch import encrypt_to_bytes

    return encrypt_to_bytes(pk, [1] * X.shape[0], rng=DeterministicRandom("g"))


def test_a_different_second_request_for_an_answered_layer_is_refused_after_a_restart(
        tmp_path: Path, keypair: tuple[PublicKey, PrivateKey]) -> None:
    assert not _second_histogram_answered(tmp_path, keypair, PassiveParty)


def test_planted_leak_a_passive_that_forgets_on_resume_answers_a_second_request(
        tmp_path: Path, keypair: tuple[PublicKey, PrivateKey]) -> None:
    assert _second_histogram_answered(tmp_path, keypair, ForgetfulPassive)


def test_a_restarted_passive_refuses_a_second_request_even_before_any_resume(
        tmp_path: Path, keypair: tuple[PublicKey, PrivateKey]) -> None:
    assert not _second_histogram_answered(tmp_path, keypair, PassiveParty, resume=False)


def test_planted_leak_a_passive_that_reloads_its_journal_only_on_resume_answers_a_second_request(
        tmp_path: Path, keypair: tuple[PublicKey, PrivateKey]) -> None:
    assert _second_histogram_answered(tmp_path, keypair, LateJournalPassive, resume=False)
