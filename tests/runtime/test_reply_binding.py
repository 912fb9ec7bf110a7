"""Replies are bound to their requests (specs/runtime.md, "Reply binding").

A replaying network sits between replier and caller: it hands the caller an earlier answer of
the right type, or one given to another caller for the same request.  The caller refuses both
with :class:`UnboundReply`; the planted companion, a network whose binding leaves out the request
id and frame, accepts the replay, which shows the check is what refuses it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from securetrees.errors import UnboundReply, UnexpectedMessage
from securetrees.runtime import InProcessNetwork, Message, Party, handles, message
from securetrees.runtime.network import BINDING_BYTES, REQUEST_ID_BYTES, reply_binding


@message("test.binding.ask", sender="asker", receiver="counter")
@dataclass(frozen=True)
class Ask(Message):
    what: str


@message("test.binding.count", reply_to=Ask)
@dataclass(frozen=True)
class Count(Message):
    n: int


@message("test.binding.note", sender="asker", receiver="counter")
@dataclass(frozen=True)
class Note(Message):
    text: str


class Counter(Party):
    role = "counter"
    n = 0

    @handles(Ask)
    def on_ask(self, sender: str, msg: Ask) -> Count:
        self.n += 1
        return Count(self.n)

    @handles(Note)
    def on_note(self, sender: str, msg: Note) -> None:
        return None


class Asker(Party):
    role = "asker"


class ReplayingNetwork(InProcessNetwork):
    """Keeps every answer as it travels (binding and frame) and request id; once ``replay`` is
    set, hands the caller the first answer it kept instead of the real one."""

    def __init__(self) -> None:
        super().__init__()
        self.answers: list[bytes] = []
        self.request_ids: list[bytes] = []
        self.replay = False

    def answer(self, round_: int, sender: str, party: Party, request_id: bytes, data: bytes) -> bytes | None:
        real = super().answer(round_, sender, party, request_id, data)
        self.request_ids.append(request_id)
        if real is not None:
            self.answers.append(real)
        return self.answers[0] if self.replay and real is not None else real


class UnboundNetwork(ReplayingNetwork):
    """The planted leak: a binding over the two names only (request id and frame left out)."""

    def bind(self, caller: str, replier: str, request_id: bytes, request: bytes) -> bytes:
        return reply_binding(caller, replier, b"", b"")


def parties(net: InProcessNetwork) -> tuple[Asker, Asker, Counter]:
    return Asker("a1", net), Asker("a2", net), Counter("c", net)


def ask_twice_with_replay(net: ReplayingNetwork) -> Count:
    """The first call is answered; the second gets the first answer again."""
    a1, _, _ = parties(net)
    assert a1.call("c", Ask("how many"), expect=Count) == Count(1)
    net.replay = True
    return a1.call("c", Ask("how many"), expect=Count)


def test_a_replayed_reply_is_refused() -> None:
    net = ReplayingNetwork()
    with pytest.raises(UnboundReply, match="not bound to the request"):
        ask_twice_with_replay(net)
    (refusal,) = net.transcript.refusals
    assert (refusal.sender, refusal.receiver, refusal.type_name) == ("c", "a1", "test.binding.count")
    assert [r.payload for r in net.transcript.view("a1")] == [Count(1)]  # the replay reached no view
    assert issubclass(UnboundReply, UnexpectedMessage)


def test_planted_unbound_variant_accepts_the_replay() -> None:
    assert ask_twice_with_replay(UnboundNetwork()) == Count(1)  # the stale count, taken for the new one


class CrossingNetwork(ReplayingNetwork):
    """Hands the second caller the answer the first caller got (the same request, another caller)."""

    def answer(self, round_: int, sender: str, party: Party, request_id: bytes, data: bytes) -> bytes | None:
        real = super().answer(round_, sender, party, request_id, data)
        return self.answers[0] if sender == "a2" else real


def test_a_reply_given_to_another_caller_is_refused() -> None:
    net = CrossingNetwork()
    a1, a2, _ = parties(net)
    assert a1.call("c", Ask("same"), expect=Count) == Count(1)
    with pytest.raises(UnboundReply):
        a2.call("c", Ask("same"), expect=Count)


def test_every_request_has_a_fresh_id_and_every_reply_its_binding() -> None:
    net = ReplayingNetwork()
    a1, a2, _ = parties(net)
    a1.call("c", Ask("x"), expect=Count)
    a1.call_many({"c": Ask("x")}, expect=Count)
    a2.send("c", Note("one-way: no reply, no binding"))
    ids = net.request_ids
    assert len(ids) == 3 and len(set(ids)) == 3 and all(len(i) == REQUEST_ID_BYTES for i in ids)
    frames = [r.data for r in net.transcript.view("a1")]
    assert [len(a) - len(f) for a, f in zip(net.answers, frames, strict=True)] == [BINDING_BYTES] * 2
    assert len(net.answers) == 2  # the one-way message got no answer
