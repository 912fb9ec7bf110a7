"""Parties, networks and transcripts (specs/runtime.md)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from securetrees.errors import ParameterError, PartyUnavailable, ProtocolError, UnexpectedMessage
from securetrees.runtime import InProcessNetwork, Message, Party, handles, message
from securetrees.testing.canaries import assert_no_canaries, find_canaries


@message("test.net.ask", sender="driver", receiver=("adder", "driver", "liar"))
@dataclass(frozen=True)
class Ask(Message):
    values: tuple[int, ...]


@message("test.net.answer", reply_to=Ask)
@dataclass(frozen=True)
class Answer(Message):
    total: int


@message("test.net.notice", sender="driver", receiver="adder")
@dataclass(frozen=True)
class Notice(Message):
    text: str


@message("test.net.vector", sender="driver", receiver="echo")
@dataclass(frozen=True)
class Vector(Message):
    data: np.ndarray
    scaled: int
    x: float


@message("test.net.receipt", reply_to=Ask)
@dataclass(frozen=True)
class Receipt(Message):
    """A declared reply to Ask that is not the one the caller expects."""


class Adder(Party):
    role = "adder"

    def __init__(self, name: str, network: InProcessNetwork) -> None:
        super().__init__(name, network)
        self.notices: list[str] = []
        self.seen: list[Ask] = []

    @handles(Ask)
    def on_ask(self, sender: str, msg: Ask) -> Answer:
        self.seen.append(msg)
        return Answer(sum(msg.values))

    @handles(Notice)
    def on_notice(self, sender: str, msg: Notice) -> None:
        self.notices.append(f"{sender}:{msg.text}")


class Liar(Party):
    role = "liar"

    @handles(Ask)
    def on_ask(self, sender: str, msg: Ask) -> Receipt:
        return Receipt()


class Driver(Party):
    role = "driver"


@pytest.fixture
def net() -> InProcessNetwork:
    return InProcessNetwork()


def test_call_round_trip_and_transcript(net: InProcessNetwork) -> None:
    adder = Adder("adder", net)
    driver = Driver("driver", net)
    reply = driver.call("adder", Ask((1, 2, 3)), expect=Answer)
    assert reply == Answer(6)
    assert adder.seen[0] == Ask((1, 2, 3)) and adder.seen[0] is not None
    t = net.transcript
    assert t.rounds == 1 and len(t) == 2
    assert [r.type_name for r in t.view("adder")] == ["test.net.ask"]
    assert [r.type_name for r in t.view("driver")] == ["test.net.answer"]
    assert t.total_bytes == sum(r.size for r in t) == t.bytes_sent("driver") + t.bytes_sent("adder")
    assert t.types_received("adder") == {"test.net.ask": 1}


def test_messages_are_copies_not_references(net: InProcessNetwork) -> None:
    adder = Adder("adder", net)
    driver = Driver("driver", net)
    sent = Ask((5,))
    driver.call("adder", sent, expect=Answer)
    assert adder.seen[0] == sent and adder.seen[0] is not sent


def test_fan_out_is_one_round(net: InProcessNetwork) -> None:
    for i in range(4):
        Adder(f"a{i}", net)
    driver = Driver("driver", net)
    mark = net.transcript.mark()
    replies = driver.call_many({f"a{i}": Ask((i, i)) for i in range(4)}, expect=Answer)
    assert {k: v.total for k, v in replies.items()} == {"a0": 0, "a1": 2, "a2": 4, "a3": 6}
    stats = net.transcript.since(mark)
    assert stats.rounds == 1 and stats.messages == 8


def test_one_way_send(net: InProcessNetwork) -> None:
    adder = Adder("adder", net)
    driver = Driver("driver", net)
    driver.send("adder", Notice("hi"))
    assert adder.notices == ["driver:hi"]
    with pytest.raises(UnexpectedMessage, match="replied"):
        driver.send("adder", Ask((1,)))


def test_unexpected_message_type(net: InProcessNetwork) -> None:
    Driver("other", net)
    driver = Driver("driver", net)
    with pytest.raises(UnexpectedMessage, match="does not accept"):
        driver.call("other", Ask((1,)), expect=Answer)


def test_wrong_reply_type(net: InProcessNetwork) -> None:
    Liar("liar", net)
    driver = Driver("driver", net)
    with pytest.raises(UnexpectedMessage, match=r"expected test\.net\.answer"):
        driver.call("liar", Ask((1,)), expect=Answer)


def test_dropouts(net: InProcessNetwork) -> None:
    for name in ("a", "b", "c"):
        Adder(name, net)
    driver = Driver("driver", net)
    net.disconnect("b")
    with pytest.raises(PartyUnavailable):
        driver.call("b", Ask((1,)), expect=Answer)
    with pytest.raises(PartyUnavailable):
        driver.call_many({n: Ask((1,)) for n in "abc"}, expect=Answer)
    replies = driver.call_many({n: Ask((1,)) for n in "abc"}, expect=Answer, allow_missing=True)
    assert sorted(replies) == ["a", "c"]
    net.reconnect("b")
    assert driver.call("b", Ask((2,)), expect=Answer).total == 2


def test_unknown_party_and_duplicate_names(net: InProcessNetwork) -> None:
    driver = Driver("driver", net)
    with pytest.raises(PartyUnavailable):
        driver.call("nobody", Ask((1,)), expect=Answer)
    with pytest.raises(ProtocolError):
        Driver("driver", net)
    with pytest.raises(ParameterError):
        Driver("bad name!", net)


def test_keep_payloads_off_keeps_sizes_only() -> None:
    net = InProcessNetwork(keep_payloads=False)
    Adder("adder", net)
    Driver("driver", net).call("adder", Ask((1,)), expect=Answer)
    rec = net.transcript.view("adder")[0]
    assert rec.size > 0 and rec.data is None and rec.payload is None
    with pytest.raises(ValueError, match="no payloads"):
        find_canaries(net.transcript.view("adder"), [123456789])


class Echo(Party):
    role = "echo"

    @handles(Vector)
    def on_vector(self, sender: str, msg: Vector) -> None:
        return None


@pytest.mark.parametrize(
    ("payload", "canary"),
    [
        (Vector(np.array([1, 987654321], dtype=np.int64), 0, 0.0), 987654321),
        (Vector(np.array([0.5, 731.0271849]), 0, 0.0), 731.0271849),
        (Vector(np.zeros(1), 731 << 32, 0.0), 731.0),
        (Vector(np.zeros(1), round(731.0271849 * 2**32), 0.0), 731.0271849),
        (Vector(np.zeros(1), 0, 731.0271849), 731.0271849),
        (Vector(np.zeros(1), (-987654321) % 2**64, 0.0), -987654321),
    ],
)
def test_canary_scanner_finds_planted_values(payload: Vector, canary: object) -> None:
    """The scanner can fail: each planted encoding is found."""
    net = InProcessNetwork()
    Echo("echo", net)
    Driver("driver", net).send("echo", payload)
    with pytest.raises(AssertionError, match="leaked"):
        assert_no_canaries(net.transcript.view("echo"), [canary])


def test_canary_scanner_finds_raw_bytes() -> None:
    net = InProcessNetwork()
    Echo("echo", net)
    hidden = (987654321).to_bytes(8, "little")
    Driver("driver", net).send("echo", Vector(np.frombuffer(hidden + b"\x00" * 8, dtype=np.uint8), 0, 0.0))
    hits = find_canaries(net.transcript.view("echo"), [987654321])
    assert hits and any("raw bytes" in h.where for h in hits)


def test_canary_scanner_passes_clean_views() -> None:
    net = InProcessNetwork()
    Echo("echo", net)
    Driver("driver", net).send("echo", Vector(np.arange(10), 42, 0.25))
    assert_no_canaries(net.transcript.view("echo"), [987654321, 731.0271849, "secret-label"])
