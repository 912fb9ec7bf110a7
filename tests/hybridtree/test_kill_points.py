"""Kill a HybridTree role at every message of one tree, restart it from its own checkpoint files
only, resume: the same model and predictions, bit for bit (``specs/hybridtree.md``, "Checkpoints").

Every delivery of the chosen tree (gradients, histogram requests, split decisions, the checkpoint
round that closes it) is a kill point, twice over: the role dies before the message is handled (it
is lost) or right after (the reply is lost); the role is the message's sender (the host) or its
receiver (a guest).  With
``min_guests`` guests a dead guest stops the run (too few guests remain).  The other roles keep
what they hold in memory; the dead role is rebuilt from its checkpoint store, then the host
resumes.

A guest answers one histogram request per tree, layer and attempt: the same request again (a
resumed host repeats it byte for byte) passes, any other is refused, across a restart (its
journal).  Planted companion: a guest that forgets its journal when it restarts answers a second,
different request.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from securetrees.errors import ProtocolError
from securetrees.protocols.hybridtree import Guest, Host, HybridTreeParams
from securetrees.protocols.hybridtree import messages as m
from securetrees.protocols.hybridtree.checkpoint import FORMAT
from securetrees.protocols.hybridtree.guest import agree_bins, guest_matrix
from securetrees.protocols.hybridtree.host import owners
from securetrees.protocols.hybridtree.testing import hybrid_data
from securetrees.rand import DeterministicRandom
from securetrees.runtime import Message
from securetrees.runtime.checkpoint import CheckpointStore
from securetrees.testing import kill_points
from securetrees.testing.kill_points import Kill
from securetrees.testing.paillier import small_keypair

DATA = hybrid_data(90, 3, seed=5)
NAMES = ["guest0", "guest1", "guest2"]
PARAMS = HybridTreeParams(host_depth=1, guest_depth=2, max_bins=8, min_node_size=0, min_bin_size=0, min_guests=3)
TREES = 2
KEYS = {n: bytes([i + 1]) * 32 for i, n in enumerate(["host", *NAMES])}
GX = [guest_matrix(DATA.X[r], DATA.guest_features, DATA.guest_features) for r in DATA.guest_rows]
BINS = agree_bins(GX, max_bins=PARAMS.max_bins, categorical=[False, False, True])
OWNER = owners(len(DATA.y), DATA.guest_rows)


class HostDied(Exception):
    """The host process ends (nothing in the protocol catches it)."""


class KillNet(kill_points.KillNet):
    """A guest's death makes it unavailable (the host may go on without it); the host's ends the run."""

    def death(self, victim: str) -> Exception:
        return HostDied() if victim == "host" else super().death(victim)


def _store(d: Path, name: str) -> CheckpointStore:
    return CheckpointStore(d, name, KEYS[name], FORMAT, rng=DeterministicRandom(name))


def _guest(net: KillNet, d: Path, name: str, cls: type[Guest] = Guest) -> Guest:
    u = NAMES.index(name)
    return cls(name, net, params=PARAMS, ids=DATA.guest_rows[u], X=GX[u], mapper=BINS, host_key=small_keypair(512)[0],
               rng=DeterministicRandom(name), checkpoint=_store(d, name))


def _host(net: KillNet, d: Path) -> Host:
    return Host("host", net, params=PARAMS, guests=NAMES, X=DATA.X[:, DATA.host_features], owner=OWNER,
                keypair=small_keypair(512), rng=DeterministicRandom("host"), checkpoint=_store(d, "host"))


def _parties(net: KillNet, d: Path) -> tuple[Host, dict[str, Guest]]:
    guests = {n: _guest(net, d, n) for n in NAMES}
    return _host(net, d), guests


def _model(host: Host, guests: dict[str, Guest]) -> tuple[bytes, list[bytes], np.ndarray]:
    """The host's model part, each guest's, and the scores of the training rows."""
    from securetrees.runtime import encode

    for g, r, x in zip(NAMES, DATA.guest_rows, GX, strict=True):
        guests[g].load_test(r, x)
    return (encode(host.model_state()), [encode(guests[g].model_state({})) for g in NAMES],
            host.decision_function(DATA.X[:, DATA.host_features], OWNER))


def _fit(host: Host) -> None:
    host.fit(DATA.y, n_estimators=TREES)


def _resume(host: Host) -> None:
    host.resume(DATA.y, n_estimators=TREES)


def test_kill_any_role_at_any_message_of_a_tree_and_resume(tmp_path: Path) -> None:
    net = KillNet()
    host, guests = _parties(net, tmp_path / "ref")
    _fit(host)
    want_host, want_guests, want_out = _model(host, guests)
    window = [k for k, (_, _, msg) in enumerate(net.log)
              if getattr(msg, "tree", None) == 1 or (isinstance(msg, m.Checkpoint) and msg.trees == 2)]
    kinds = {type(net.log[k][2]) for k in window}
    assert {m.Gradients, m.HistogramRequest, m.SplitDecision, m.Checkpoint} <= kinds, kinds
    kills = [Kill(k, who, after) for k in window for who in net.log[k][:2] for after in (False, True)]
    repeated = 0
    for n, kill in enumerate(kills):
        d = tmp_path / str(n)
        net = KillNet(kill)
        host, guests = _parties(net, d)
        with pytest.raises((HostDied, ProtocolError)):
            _fit(host)
        if kill.victim == "host":
            host = _host(net, d)
        else:
            guests[kill.victim] = _guest(net, d, kill.victim)
        start = len(net.log)
        _resume(host)
        got_host, got_guests, got_out = _model(host, guests)
        assert got_host == want_host, kill
        assert got_guests == want_guests, kill
        np.testing.assert_array_equal(got_out, want_out, err_msg=str(kill))
        asked = {(r, msg.tree, msg.layer) for _, r, msg in net.log[:start] if isinstance(msg, m.HistogramRequest)}
        repeated += any(isinstance(msg, m.HistogramRequest) and (r, msg.tree, msg.layer) in asked
                        for _, r, msg in net.log[start:])
    assert repeated > 0  # some resumes did repeat an answered request (admitted as byte-identical)


def test_resume_without_a_checkpoint_starts_over(tmp_path: Path) -> None:
    net = KillNet()
    host, guests = _parties(net, tmp_path / "ref")
    _fit(host)
    want = _model(host, guests)[2]
    first = next(k for k, (_, _, msg) in enumerate(net.log) if isinstance(msg, m.HistogramRequest))
    net = KillNet(Kill(first, "host", after=False))  # dies in the first tree: no checkpoint yet
    host, guests = _parties(net, tmp_path)
    with pytest.raises(HostDied):
        _fit(host)
    host = _host(net, tmp_path)
    _resume(host)
    np.testing.assert_array_equal(_model(host, guests)[2], want)


def test_a_checkpoint_of_another_run_is_refused(tmp_path: Path) -> None:
    net = KillNet()
    host, _ = _parties(net, tmp_path)
    _fit(host)
    with pytest.raises(ProtocolError, match="does not belong to this run"):
        _host(net, tmp_path).resume(DATA.y_reg, n_estimators=TREES, loss="squared")


def test_a_new_fit_over_the_checkpoints_of_an_earlier_one_is_refused(tmp_path: Path) -> None:
    from securetrees.errors import ParameterError

    net = KillNet()
    host, _ = _parties(net, tmp_path)
    _fit(host)
    with pytest.raises(ParameterError, match="holds a fit already"):
        _fit(_host(net, tmp_path))


# ---------------------------------------------------------------------------- single-use requests
class ForgetfulGuest(Guest):
    """Planted leak: forgets the histogram requests it answered when it restarts."""

    def _restore(self) -> None:
        super()._restore()
        self._journal.prune(lambda slot: False)


class ProbeNet(KillNet):
    """Before the first histogram request of tree 1 reaches ``guest0``, sends it another request
    for the same tree, layer and attempt (what a curious host would ask to learn more sums)."""

    answered: bool | None = None

    def _deliver(self, round_: int, sender: str, receiver: str, msg: Message) -> Message | None:
        if self.answered is None and receiver == "guest0" and isinstance(msg, m.HistogramRequest) and msg.tree == 1:
            try:
                super()._deliver(round_, sender, receiver, replace(msg, n_sets=msg.n_sets + 1))
                self.answered = True
            except ProtocolError:
                self.answered = False
        return super()._deliver(round_, sender, receiver, msg)


def _second_histogram_answered(tmp: Path, cls: type[Guest]) -> bool:
    """``guest0`` is killed right after answering its first histogram request of tree 1 and
    restarted; the host resumes, and a different request for that tree and layer comes first."""
    net = KillNet()
    _parties(net, tmp / "ref")[0].fit(DATA.y, n_estimators=TREES)
    first = next(k for k, (_, r, msg) in enumerate(net.log)
                 if r == "guest0" and isinstance(msg, m.HistogramRequest) and msg.tree == 1)
    net = ProbeNet(Kill(first, "guest0", after=True))
    host, guests = _parties(net, tmp)
    net.answered = False  # the first run's request is not probed
    with pytest.raises(ProtocolError):
        _fit(host)
    net.answered = None
    guests["guest0"] = _guest(net, tmp, "guest0", cls)
    try:
        _resume(host)
    except ProtocolError:
        pass  # the forgetful guest then refuses the genuine request: the run fails, too late
    assert net.answered is not None
    return net.answered


def test_a_different_second_request_for_an_answered_layer_is_refused_after_a_restart(tmp_path: Path) -> None:
    assert not _second_histogram_answered(tmp_path, Guest)


def test_planted_leak_a_guest_that_forgets_its_journal_answers_a_second_request(tmp_path: Path) -> None:
    assert _second_histogram_answered(tmp_path, ForgetfulGuest)
