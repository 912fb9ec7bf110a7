"""Federated Forest's sender guards (``specs/federated_forest.md``, "Threat model"): a client takes
labels only from the setup's label holder, instructions only from the master that set it up, and
(label holder) score requests only from the run's other clients.

The network's role check admits any party of the declared role, so each guard is what stands
between a client and a peer of the right role but the wrong identity.  Each check has a
planted-leak companion: the guard replaced by one that admits everyone, on which the same
exchange is accepted (so the check can fail).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from securetrees.errors import UnexpectedMessage
from securetrees.protocols.federated_forest import Client, ForestParams, LabelSpec, Master
from securetrees.protocols.federated_forest import messages as m
from securetrees.protocols.federated_forest.testing import mixed_data, small_key_options
from securetrees.runtime import InProcessNetwork, Message

KEY = b"g" * 32
X, Y, _ = mixed_data(40, seed=5)
PART = {"a": [0, 1], "b": [2, 3], "c": [4, 5]}  # "a" holds the labels


def _run(mode: str) -> tuple[dict[str, Client], Master, Master, Client]:
    """Three clients set up by ``master`` and every tree-0 instruction sent, a second party of
    the master role (``rogue``) and a client outside the run (``outsider``) on the same network."""
    net = InProcessNetwork()
    opts = small_key_options()
    clients = {name: Client(name, net, X[:, cols], range(40), cols, KEY, public_key_loader=opts["public_key_loader"],
                            labels=LabelSpec(Y, 2, keypair=opts["paillier_keys"]) if name == "a" else None)
               for name, cols in PART.items()}
    outsider = Client("outsider", net, X[:, :1], range(40), [0], KEY)
    master = Master("master", net, list(PART), ForestParams(n_estimators=1, max_depth=2), label_protection=mode)
    rogue = Master("rogue", net, list(PART), ForestParams(n_estimators=1, max_depth=2), label_protection=mode)
    master.setup()
    weights = np.ones(40, dtype=np.int64)
    master.call_many({n: m.TreeStart(0, weights, tuple(PART[n])) for n in PART}, expect=m.Ack)
    return clients, master, rogue, outsider


def _forged_labels(clients: dict[str, Client], mode: str) -> Message:
    """What client ``c`` would send ``b`` to plant labels of its choosing: the labels reversed
    (``shared``), or the label holder's own ciphertexts in reversed order (``encrypted``)."""
    if mode == "shared":
        return m.SharedLabels(np.asarray(Y[::-1], dtype=np.int64))
    b = clients["b"]
    assert b._pk is not None and b._layout is not None
    return m.EncryptedLabels(b._pk.to_bytes(), b._layout.n_slots, b._layout.slot_bits,
                             tuple(c.value for c in b._enc[::-1]))


def _accepted(send: Callable[[], object]) -> bool:
    """Whether the exchange ``send()`` went through (``False``: refused with ``UnexpectedMessage``)."""
    try:
        send()
    except UnexpectedMessage:
        return False
    return True


def _labels_from_another_client(mode: str) -> bool:
    clients, *_ = _run(mode)
    msg = _forged_labels(clients, mode)
    return _accepted(lambda: clients["c"].call("b", msg, expect=m.Ack))


def _instruction_from_another_master(mode: str) -> bool:
    *_, rogue, _outsider = _run(mode)
    return _accepted(lambda: rogue.call("b", m.TreeEnd(0), expect=m.Ack))


def _score_request_from_outside() -> bool:
    *_, outsider = _run("encrypted")
    request = m.ScoreRequest(0, 0, np.array([0]), np.array([3]), np.array([False]), np.array([1]), (1,))
    return _accepted(lambda: outsider.call("a", request, expect=m.ScoreReply))


def _admit_everyone(monkeypatch: pytest.MonkeyPatch, guard: str) -> None:
    """Planted leak: the guard admits every sender (the one line the issue planted)."""
    monkeypatch.setattr(Client, guard, lambda self, sender: None)


@pytest.mark.parametrize("mode", ["shared", "encrypted"])
def test_a_client_refuses_labels_from_a_client_that_does_not_hold_them(mode: str) -> None:
    assert not _labels_from_another_client(mode)


@pytest.mark.parametrize("mode", ["shared", "encrypted"])
def test_planted_leak_without_the_guard_a_client_takes_forged_labels(monkeypatch: pytest.MonkeyPatch,
                                                                      mode: str) -> None:
    _admit_everyone(monkeypatch, "check_label_holder")
    assert _labels_from_another_client(mode)


@pytest.mark.parametrize("mode", ["shared", "encrypted"])
def test_a_client_refuses_instructions_from_another_master(mode: str) -> None:
    assert not _instruction_from_another_master(mode)


@pytest.mark.parametrize("mode", ["shared", "encrypted"])
def test_planted_leak_without_the_guard_another_master_ends_the_tree(monkeypatch: pytest.MonkeyPatch,
                                                                      mode: str) -> None:
    _admit_everyone(monkeypatch, "check_master")
    assert _instruction_from_another_master(mode)


def test_the_label_holder_scores_only_the_runs_other_clients() -> None:
    assert not _score_request_from_outside()


def test_planted_leak_without_the_guard_the_label_holder_scores_an_outsider(monkeypatch: pytest.MonkeyPatch) -> None:
    _admit_everyone(monkeypatch, "check_scorer_client")
    assert _score_request_from_outside()
