"""Kill a histogram-forest role at every message of one tree, restart it from its own checkpoint
files only, resume (``specs/histogram_forest.md``, "Checkpoints").

Every delivery of tree 2 (its layer requests to every client, the checkpoint round that closes it)
is a kill point, twice over: the role dies before handling the message (it is lost) or right after
(the reply is lost); the role is the message's sender or its receiver.  The other roles keep running
with what they hold in memory; the dead one is rebuilt from its checkpoint store; the server resumes.

* Secure aggregation, fixed bins, no noise: the resumed forest equals the uninterrupted run's bit for
  bit (a restarted client restores its agreement key, so its masks are the same).
* Histogram noise (ε-DP): no client ever releases two different replies for one step (a repeated
  request is answered from its journal: the noisy release is re-used, never drawn again), every
  layer is charged once, and each client's spent ε equals the server's ledger, within the budget.
  (A request lost before a client handled it is answered with fresh noise, which may shape other
  trees than the uninterrupted run's: the model is compared bit for bit without noise only.)  The planted companion, a
  client that forgets its journal when it resumes and draws the noise again, fails that check.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from securetrees.errors import PartyUnavailable, ProtocolError
from securetrees.protocols.histogram_forest import messages as m
from securetrees.protocols.histogram_forest.accountant import Release
from securetrees.protocols.histogram_forest.checkpoint import FORMAT
from securetrees.protocols.histogram_forest.client import Client
from securetrees.protocols.histogram_forest.server import ForestConfig, Server
from securetrees.rand import DeterministicRandom
from securetrees.runtime import Message, encode
from securetrees.runtime.checkpoint import CheckpointStore
from securetrees.testing.kill_points import Kill, KillNet
from securetrees.trees.tree import Tree
from tests.histogram_forest.conftest import CATEGORIES, make_parts

PARTS = make_parts(3, 60, seed=4)
NAMES = ["c0", "c1", "c2"]
LOW, HIGH = np.array([0.0, 0.0, np.nan]), np.array([10.0, 20.0, np.nan])


def _config(dp: bool) -> ForestConfig:
    return ForestConfig(n_features=3, categories=tuple(CATEGORIES), n_classes=2, n_trees=3, max_depth=3, n_bins=6,
                        histogram="fixed", features_per_node=2, epsilon=4.0 if dp else None, secure=not dp,
                        low=LOW, high=HIGH)


def _store(d: Path, name: str) -> CheckpointStore:
    return CheckpointStore(d, name, hashlib.sha256(name.encode()).digest(), FORMAT, rng=DeterministicRandom(name))


def _client(net: KillNet, d: Path, i: int, cls: type[Client] = Client) -> Client:
    X, y = PARTS[i]
    return cls(NAMES[i], net, X, y, seed=i, rng=DeterministicRandom(f"client {i}"), checkpoint=_store(d, NAMES[i]))


def _server(net: KillNet, d: Path, dp: bool) -> Server:
    return Server("server", net, NAMES, _config(dp), random_state=5, rng=DeterministicRandom("server"),
                  checkpoint=_store(d, "server"))


def _window(log: list[tuple[str, str, Message]], tree: int) -> list[int]:
    def in_tree(msg: Message) -> bool:
        if isinstance(msg, m.Checkpoint):
            return msg.trees == tree + 1
        return isinstance(msg, m.LayerRequest) and msg.tree == tree

    return [k for k, (_, _, msg) in enumerate(log) if in_tree(msg)]


def _releases(net: KillNet) -> tuple[dict[tuple[str, int], set[bytes]], int]:
    """Per (client, step), the distinct layer replies it released; and how many (client, step)
    answered twice."""
    out: dict[tuple[str, int], set[bytes]] = {}
    count: dict[tuple[str, int], int] = {}
    for (_, receiver, msg), reply in zip(net.log, net.replies, strict=True):
        if isinstance(msg, m.LayerRequest) and reply is not None:
            out.setdefault((receiver, msg.step), set()).add(encode(reply))
            count[(receiver, msg.step)] = count.get((receiver, msg.step), 0) + 1
    return out, sum(1 for c in count.values() if c > 1)


@dataclass
class Outcome:
    trees: list[Tree]
    spent: list[float]
    ledger: list[Release]
    releases: dict[tuple[str, int], set[bytes]]
    answered_twice: int


def _run(d: Path, dp: bool, kill: Kill | None, cls: type[Client] = Client) -> tuple[Outcome, KillNet]:
    net = KillNet(kill)
    clients = {NAMES[i]: _client(net, d, i) for i in range(3)}
    server = _server(net, d, dp)
    if kill is None:
        trees = server.train()
    else:
        with pytest.raises(PartyUnavailable):
            server.train()
        if kill.victim == "server":
            server = _server(net, d, dp)
        else:
            clients[kill.victim] = _client(net, d, NAMES.index(kill.victim), cls)
        trees = server.resume()
    ledger = [] if server.accountant is None else list(server.accountant.releases)
    return Outcome(trees, [clients[n].privacy_spent for n in NAMES], ledger, *_releases(net)), net


@pytest.mark.parametrize("dp", [False, True], ids=["secure", "dp"])
def test_kill_any_role_at_any_message_of_a_tree_and_resume(tmp_path: Path, dp: bool) -> None:
    want, net = _run(tmp_path / "ref", dp, None)
    window = _window(net.log, 1)
    assert {type(net.log[k][2]) for k in window} == {m.LayerRequest, m.Checkpoint}
    kills = [Kill(k, who, after) for k in window for who in net.log[k][:2] for after in (False, True)]
    repeated = 0
    for n, kill in enumerate(kills):
        got, _ = _run(tmp_path / str(n), dp, kill)
        assert all(len(r) == 1 for r in got.releases.values()), kill  # one release per client and step
        # every layer charged once, by the server and by each client alike, within the budget (the
        # noise shapes the trees, so a fresh draw after a lost request may grow other layers)
        layers = [(r.tree, r.layer) for r in got.ledger]
        assert len(layers) == len(set(layers)), kill
        assert all(spent == got.spent[0] for spent in got.spent) and got.spent[0] <= 4.0 * (1 + 1e-9), kill
        assert got.spent[0] == pytest.approx(sum(r.epsilon for r in got.ledger)), kill
        if not dp:
            assert len(got.trees) == len(want.trees), kill
            assert all(a.same_as(b) for a, b in zip(got.trees, want.trees, strict=True)), kill
        repeated += got.answered_twice
    assert repeated > 0  # some resumes repeated an answered request (answered from the journal)


# ---------------------------------------------------------------------------- planted companion
class ForgetfulClient(Client):
    """Planted leak: forgets its journal when it resumes, so it draws the noise of a repeated
    request again (a second release of the same histogram)."""

    def on_resume(self, sender: str, msg: m.Resume) -> m.Ack:
        ack = super().on_resume(sender, msg)
        self._journal = {}
        return ack


def _one_release_per_step(tmp: Path, cls: type[Client]) -> bool:
    """``c1`` dies right after answering its first layer request of tree 1 (the reply is lost), is
    restarted as ``cls`` and the server resumes: does every (client, step) have one release?"""
    _, net = _run(tmp / "ref", True, None)
    first = next(k for k, (_, r, msg) in enumerate(net.log)
                 if r == "c1" and isinstance(msg, m.LayerRequest) and msg.tree == 1)
    got, _ = _run(tmp / "kill", True, Kill(first, "c1", after=True), cls)
    return all(len(r) == 1 for r in got.releases.values())


def test_a_repeated_request_is_answered_with_the_same_release(tmp_path: Path) -> None:
    assert _one_release_per_step(tmp_path, Client)


def test_planted_leak_a_client_that_forgets_its_journal_releases_twice(tmp_path: Path) -> None:
    assert not _one_release_per_step(tmp_path, ForgetfulClient)


def test_a_different_request_for_an_answered_step_is_refused(tmp_path: Path) -> None:
    from securetrees.errors import UnexpectedMessage

    _, net = _run(tmp_path / "ref", True, None)
    first = next(k for k, (_, r, msg) in enumerate(net.log)
                 if r == "c1" and isinstance(msg, m.LayerRequest) and msg.tree == 1)
    net = KillNet(Kill(first, "c1", after=True))
    for i in range(3):
        _client(net, tmp_path, i)
    with pytest.raises(PartyUnavailable):
        _server(net, tmp_path, True).train()
    request = net.log[first][2]
    assert isinstance(request, m.LayerRequest)
    c1 = _client(net, tmp_path, 1)
    marker = next(msg for _, _, msg in reversed(net.log) if isinstance(msg, m.Checkpoint))
    net.call("server", "c1", m.Resume(marker.trees, marker.step))
    other = m.LayerRequest(request.step, request.tree, request.layer, request.split_feature, request.split_threshold,
                           request.split_categorical, request.split_missing_left, request.keep,
                           ~request.features if (~request.features).any(axis=1).all() else request.features[:, ::-1])
    with pytest.raises(UnexpectedMessage, match="already answered step"):
        c1.on_layer("server", other)


def test_resume_needs_a_checkpoint_of_this_run(tmp_path: Path) -> None:
    _run(tmp_path, True, None)
    net = KillNet()
    for i in range(3):
        _client(net, tmp_path, i)
    with pytest.raises(ProtocolError, match="does not belong to this run"):
        Server("server", net, NAMES, _config(False), checkpoint=_store(tmp_path, "server")).resume()
    with pytest.raises(ProtocolError, match="no checkpoint"):
        Server("server", net, NAMES, _config(True), checkpoint=_store(tmp_path / "empty", "server")).resume()
