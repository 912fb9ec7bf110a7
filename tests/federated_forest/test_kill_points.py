"""Kill a role at every message of one layer, restart only that role, resume: the same model.

Every message exchanged in the chosen layer (``encrypted`` label protection, so the score
requests to the label holder are among them) is a kill point, twice over: the role dies
before the message is handled (it is lost) or right after (the reply is lost); the role is
the message's sender or its receiver.  The other roles keep running with whatever they had
in memory, as processes that did not die do; the dead role is rebuilt from its own
checkpoint files only, then the master resumes.  The resumed forest and its one-round
predictions must equal the uninterrupted run's bit for bit.

The label holder's scoring oracle is single-use per sender, tree and layer: a resend is
answered from the kept reply only if byte-identical; anything else is refused.  The planted
leak (a label holder that forgets its answers when it resumes) shows the check fails.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from securetrees.errors import PartyUnavailable, UnexpectedMessage
from securetrees.paillier import Ciphertext
from securetrees.protocols.federated_forest import Client, ForestParams, LabelSpec, Master, model_tree
from securetrees.protocols.federated_forest import messages as m
from securetrees.protocols.federated_forest.checkpoint import CheckpointStore
from securetrees.protocols.federated_forest.testing import mixed_data, small_key_options
from securetrees.rand import DeterministicRandom
from securetrees.runtime import Message, encode
from securetrees.testing.kill_points import Kill, KillNet

X, Y, CAT = mixed_data(80, seed=5)
X_TEST = mixed_data(30, seed=6)[0]
PARTITION = [[0, 1, 4], [2, 3, 5]]
ID_KEY = b"k" * 32
KEYS = {"master": b"m" * 32, "c0": b"a" * 32, "c1": b"b" * 32}
OPTS = small_key_options()


def _client(net: KillNet, i: int, tmp: Path, holder: type[Client] = Client) -> Client:
    name, cols = f"c{i}", PARTITION[i]
    cls = holder if i == 0 else Client
    return cls(name, net, X[:, cols], range(X.shape[0]), cols, ID_KEY, categorical=[CAT[j] for j in cols],
               labels=LabelSpec(Y, 2, keypair=OPTS["paillier_keys"]) if i == 0 else None,
               public_key_loader=OPTS["public_key_loader"],
               checkpoint=CheckpointStore(tmp, name, KEYS[name], rng=DeterministicRandom(name)))


def _master(net: KillNet, tmp: Path, checkpoint: str) -> Master:
    params = ForestParams(n_estimators=2, max_depth=3, random_state=7, checkpoint=checkpoint)
    return Master("master", net, ["c0", "c1"], params, label_protection="encrypted",
                  checkpoint=CheckpointStore(tmp, "master", KEYS["master"], rng=DeterministicRandom("master")))


def _model(master: Master, clients: dict[str, Client]) -> tuple[list[Any], np.ndarray]:
    """The model's complete trees (cover splits removed, the label holder's values), and the
    one-round prediction of the test rows."""
    trees = [model_tree(t, clients["c0"].reference[k], [clients[c].trees[k] for c in ("c0", "c1")], PARTITION,
                        values=clients["c0"].trees[k].value) for k, t in enumerate(master.trees)]
    for i, c in enumerate(("c0", "c1")):
        clients[c].load_test(X_TEST[:, PARTITION[i]], range(X_TEST.shape[0]))
    master.align_test()
    master.hand_leaves(master.leaf_of_one_round())
    assert clients["c0"].kept_output is not None
    return trees, clients["c0"].kept_output


def _layer_window(log: list[tuple[str, str, Message]], tree: int, layer: int) -> list[int]:
    """Deliveries of one layer: every message carrying that tree and layer, the tree's start
    (first layer) and the checkpoint round that closes the layer (``checkpoint="layer"``)."""
    def in_layer(msg: Message) -> bool:
        if isinstance(msg, m.TreeStart):
            return layer == 0 and msg.tree == tree
        if isinstance(msg, m.Checkpoint):
            return (msg.tree, msg.layer) == (tree, layer + 1)
        return (getattr(msg, "tree", None), getattr(msg, "layer", None)) == (tree, layer)

    return [k for k, (_, _, msg) in enumerate(log) if in_layer(msg)]


@pytest.mark.parametrize(("checkpoint", "layer"), [("tree", 0), ("layer", 1)])
def test_kill_any_role_at_any_message_of_a_layer_and_resume(tmp_path: Path, checkpoint: str, layer: int) -> None:
    net = KillNet()
    clients = {c.name: c for c in (_client(net, 0, tmp_path / "ref"), _client(net, 1, tmp_path / "ref"))}
    master = _master(net, tmp_path / "ref", checkpoint)
    master.fit()
    want_trees, want_out = _model(master, clients)
    window = _layer_window(net.log, 1, layer)
    kinds = {type(net.log[k][2]) for k in window}
    assert {m.FindSplits, m.ScoreRequest, m.WinnersRequest, m.ApplySplit,
            m.LayerPartition} <= kinds, kinds
    kills = [Kill(k, who, after) for k in window for who in net.log[k][:2] for after in (False, True)]
    resent_from_cache = 0
    for n, kill in enumerate(kills):
        d = tmp_path / str(n)
        net = KillNet(kill)
        clients = {c.name: c for c in (_client(net, 0, d), _client(net, 1, d))}
        master = _master(net, d, checkpoint)
        with pytest.raises(PartyUnavailable):
            master.fit()
        if kill.victim == "master":
            master = _master(net, d, checkpoint)
        else:
            clients[kill.victim] = _client(net, int(kill.victim[1:]), d)
        start = len(net.log)
        master.resume()
        got_trees, got_out = _model(master, clients)
        assert len(got_trees) == len(want_trees), kill
        assert all(a.same_as(b) for a, b in zip(got_trees, want_trees, strict=True)), kill
        np.testing.assert_array_equal(got_out, want_out, err_msg=str(kill))
        before = {encode(msg) for _, _, msg in net.log[:start] if isinstance(msg, m.ScoreRequest)}
        resent_from_cache += any(isinstance(msg, m.ScoreRequest) and encode(msg) in before
                                 for _, _, msg in net.log[start:])
    assert resent_from_cache > 0  # some resumes did repeat an answered request byte for byte


# ---------------------------------------------------------------------------- single-use oracle
class ForgetfulHolder(Client):
    """Planted leak: the label holder resets its per-layer answers when it resumes."""

    def on_resume(self, sender: str, msg: m.Resume) -> m.Ack:
        self._answered = {}
        return super().on_resume(sender, msg)


def _killed_after_first_score_request(tmp: Path, holder: type[Client]) -> tuple[KillNet, Client, m.ScoreRequest]:
    """``c1`` dies right after the label holder answered its score request of tree 1, layer 1
    (layer checkpoints); the label holder is then told to resume from ``(1, 1)``."""
    net = KillNet()
    _client(net, 0, tmp / "ref", holder), _client(net, 1, tmp / "ref")
    _master(net, tmp / "ref", "layer").fit()
    first = next(k for k, (s, _, msg) in enumerate(net.log)
                 if isinstance(msg, m.ScoreRequest) and (msg.tree, msg.layer) == (1, 1) and s == "c1")
    net = KillNet(Kill(first, "c1", after=True))
    c0, _ = _client(net, 0, tmp, holder), _client(net, 1, tmp)
    with pytest.raises(PartyUnavailable):
        _master(net, tmp, "layer").fit()
    request = net.log[first][2]
    assert isinstance(request, m.ScoreRequest)
    net.call("master", "c0", m.Resume(1, 1))
    return net, c0, request


def _rerandomised(request: m.ScoreRequest) -> m.ScoreRequest:
    """The same candidates and statistics, other ciphertexts (what a restarted client without
    a journal would send)."""
    pk = OPTS["paillier_keys"][0]
    fresh = tuple(Ciphertext(pk, v).rerandomize().value for v in request.ciphertexts)
    return m.ScoreRequest(request.tree, request.layer, request.entry_node, request.entry_bins,
                          request.entry_categorical, request.chunks, fresh)


def _second_query_answered(tmp: Path, holder: type[Client]) -> bool:
    net, _, request = _killed_after_first_score_request(tmp, holder)
    try:
        net.call("c1", "c0", _rerandomised(request))
    except UnexpectedMessage:
        return False
    return True


def test_identical_resend_is_answered_from_the_kept_reply(tmp_path: Path) -> None:
    net, c0, request = _killed_after_first_score_request(tmp_path, Client)
    first = c0._answered[(1, 1, "c1")].reply
    decryptions = c0.counters.decryptions
    again = net.call("c1", "c0", request)
    assert isinstance(again, m.ScoreReply) and encode(again) == encode(first)
    assert c0.counters.decryptions == decryptions  # from the kept reply, nothing decrypted again


def test_a_different_second_query_for_the_layer_is_refused(tmp_path: Path) -> None:
    assert not _second_query_answered(tmp_path, Client)


def test_planted_leak_a_holder_that_forgets_on_resume_answers_a_second_query(tmp_path: Path) -> None:
    assert _second_query_answered(tmp_path, ForgetfulHolder)
