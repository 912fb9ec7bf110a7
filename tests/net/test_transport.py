"""The gRPC transport in one process: mutual TLS, the roster, typed failures, retries, limits."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("grpc")

from securetrees.errors import (
    AuthenticationError,
    DecodeError,
    KeyMismatchError,
    ParameterError,
    PartyUnavailable,
    PeerTimeout,
    ProtocolError,
    RemoteError,
    RevokedError,
    UnauthorizedSender,
    UnboundReply,
)
from securetrees.net import GrpcNetwork, Peer, TlsIdentity, TransportOptions, fingerprint, load_identity, transport
from securetrees.net.control import Controllable, ControlReply, ControlRequest, Operator
from securetrees.net.keyfile import open_key_file, write_key_file
from securetrees.net.tls import make_test_pki
from securetrees.runtime import Message, Party, handles, message
from securetrees.runtime.network import reply_binding

NAMES = ["alice", "bob", "operator", "mallory"]


@message("test.net.ping", sender="caller", receiver="echo")
@dataclass(frozen=True)
class Ping(Message):
    x: int
    blob: bytes = b""


@message("test.net.query", sender="caller", receiver="echo")
@dataclass(frozen=True)
class Query(Message):
    idempotent = True


@message("test.net.pong", reply_to=(Ping, Query))
@dataclass(frozen=True)
class Pong(Message):
    y: int


class Caller(Party):
    role = "caller"


class Echo(Controllable, Party):
    role = "echo"
    calls = 0
    fail_first = 0
    hold: threading.Event | None = None

    @handles(Ping)
    def on_ping(self, sender: str, msg: Ping) -> Pong:
        self.calls += 1
        if self.hold is not None:
            self.hold.wait()  # a slow peer: answers only once the test lets it
        if msg.x == -1:
            raise RevokedError("you are revoked")
        if msg.x == -2:
            raise KeyError("secret internal detail")
        return Pong(msg.x + 1 + len(msg.blob))

    @handles(Query)
    def on_query(self, sender: str, msg: Query) -> Pong:
        self.calls += 1
        return Pong(self.calls)

    def control_double(self, args: dict[str, str]) -> ControlReply:
        return ControlReply(arrays={"v": np.arange(3) * 2}, info={"who": self.name})


Pair = tuple[GrpcNetwork, Party, GrpcNetwork, Echo, dict[str, Peer]]

DEADLINE = 5.0
"""Deadline of the calls that must succeed: a loopback call takes milliseconds, and a loaded
machine makes it slower, not 1000 times slower; the slow peer below never answers in time."""


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, TlsIdentity]:
    d = tmp_path_factory.mktemp("pki")
    pw = {n: f"pw-{n}".encode() for n in NAMES}
    paths = make_test_pki(NAMES, d, pw)
    ids = {n: load_identity(n, d / "ca.pem", *paths[n], pw[n]) for n in NAMES}
    other = tmp_path_factory.mktemp("rogue")  # a second CA: same names, untrusted
    rpaths = make_test_pki(["alice"], other, {"alice": b"x"}, ca_name="rogue CA")
    ids["rogue-alice"] = load_identity("alice", other / "ca.pem", *rpaths["alice"], b"x")
    return ids


@pytest.fixture
def pair(pki: dict[str, TlsIdentity]) -> Iterator[Pair]:
    roster = {"alice": Peer("127.0.0.1:0", role="caller"), "bob": Peer("127.0.0.1:0", role="echo"),
              "operator": Peer("127.0.0.1:0", role="operator")}
    opts = TransportOptions(deadline=DEADLINE, retries=2, backoff=0.05)
    nb = GrpcNetwork(pki["bob"], roster, options=opts)
    bob = Echo("bob", nb)
    port = nb.start()
    roster["bob"] = Peer(f"127.0.0.1:{port}", role="echo")
    na = GrpcNetwork(pki["alice"], roster, options=opts)
    alice = Caller("alice", na)
    yield na, alice, nb, bob, roster
    na.close()
    nb.close()


def test_a_second_server_on_a_taken_address_is_refused(pki: dict[str, TlsIdentity], pair: Pair) -> None:
    """A role started twice (or another process on its port) must not share the port: gRPC's default
    SO_REUSEPORT let the second process bind it silently, and calls went to either process."""
    _, alice, _, _, roster = pair
    twin = GrpcNetwork(pki["bob"], roster, options=TransportOptions(deadline=DEADLINE))
    Echo("bob", twin)
    with pytest.raises(PartyUnavailable, match="already in use"):
        twin.start()
    twin.close()
    assert alice.call("bob", Ping(1), expect=Pong) == Pong(2)


def test_round_trip_records_views_and_bytes(pair: Pair) -> None:
    na, alice, nb, _, _ = pair
    assert alice.call("bob", Ping(41), expect=Pong) == Pong(42)
    replies = alice.call_many({"bob": Ping(1)}, expect=Pong)
    assert replies == {"bob": Pong(2)}
    assert na.transcript.rounds == 2
    (req,) = nb.transcript.view("bob")[:1]
    assert (req.sender, req.receiver, req.type_name) == ("alice", "bob", "test.net.ping")
    assert req.payload == Ping(41) and req.size == len(req.data or b"")
    assert [r.type_name for r in na.transcript.view("alice")] == ["test.net.pong", "test.net.pong"]


class UnboundGrpcNetwork(GrpcNetwork):
    """The planted leak: both ends bind a reply to the two names only, not to the request."""

    def bind(self, caller: str, replier: str, request_id: bytes, request: bytes) -> bytes:
        return reply_binding(caller, replier, b"", b"")


@pytest.mark.parametrize("network", [GrpcNetwork, UnboundGrpcNetwork], ids=["bound", "planted-unbound"])
def test_a_replayed_response_is_refused(pki: dict[str, TlsIdentity], network: type[GrpcNetwork]) -> None:
    """Bob's server hands back, for alice's second Ping, the whole response it gave the first (the
    bytes after TLS: marker, binding, frame).  The bound transport refuses it; the planted unbound
    one takes the stale Pong for the new answer."""
    roster = {"alice": Peer("127.0.0.1:0", role="caller"), "bob": Peer("127.0.0.1:0", role="echo")}
    opts = TransportOptions(deadline=DEADLINE, retries=0)
    nb = network(pki["bob"], roster, options=opts)
    Echo("bob", nb)
    serve, sent = nb._serve, []

    def replaying(request: bytes, context: object) -> bytes:
        sent.append(serve(request, context))  # type: ignore[arg-type]
        return sent[0]

    nb._serve = replaying  # type: ignore[method-assign]
    roster["bob"] = Peer(f"127.0.0.1:{nb.start()}", role="echo")
    na = network(pki["alice"], roster, options=opts)
    alice = Caller("alice", na)
    try:
        assert alice.call("bob", Ping(1), expect=Pong) == Pong(2)
        if network is GrpcNetwork:
            with pytest.raises(UnboundReply):
                alice.call("bob", Ping(10), expect=Pong)
            assert [r.type_name for r in na.transcript.refusals] == ["test.net.pong"]
        else:
            assert alice.call("bob", Ping(10), expect=Pong) == Pong(2)  # the stale answer, accepted
        assert len(sent) == 2 and sent[0] != sent[1]
    finally:
        na.close()
        nb.close()


def test_a_request_without_its_id_is_refused(pair: Pair) -> None:
    """A request carries its 16-byte id in ``st-request``; one without (an older or hostile client)
    is refused before any handler runs."""
    import grpc

    na, _, _, bob, _ = pair
    stub = na._channel("bob").unary_unary(transport.METHOD)
    frame = transport.codec.encode(Ping(1))
    for request_id in (None, "00" * 15, "zz" * 16, " 0" * 16):
        meta = [("st-receiver", "bob"), ("st-round", "1")]
        meta += [] if request_id is None else [("st-request", request_id)]
        with pytest.raises(grpc.RpcError) as info:
            stub(frame, timeout=DEADLINE, metadata=meta)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert bob.calls == 0


def test_remote_errors_keep_their_type_and_hide_internals(
        pair: Pair) -> None:
    _, alice, _, _, _ = pair
    with pytest.raises(RevokedError, match="revoked"):
        alice.call("bob", Ping(-1), expect=Pong)
    with pytest.raises(RemoteError) as info:
        alice.call("bob", Ping(-2), expect=Pong)
    assert info.value.remote_type == "KeyError" and "secret internal detail" not in str(info.value)


def test_untrusted_certificate_is_refused(pki: dict[str, TlsIdentity],
                                          pair: Pair) -> None:
    _, _, nb, bob, roster = pair
    rogue_net = GrpcNetwork(pki["rogue-alice"], roster, options=TransportOptions(deadline=DEADLINE, retries=0))
    rogue = Caller("alice", rogue_net)
    before = bob.calls
    with pytest.raises(PartyUnavailable):  # the TLS handshake fails: nothing is delivered
        rogue.call("bob", Ping(1), expect=Pong)
    rogue_net.close()
    assert bob.calls == before and all(r.sender != "alice" or r.payload != Ping(1) for r in nb.transcript)


def test_name_outside_the_roster_is_refused(pki: dict[str, TlsIdentity],
                                            pair: Pair) -> None:
    _, _, _, bob, roster = pair
    net = GrpcNetwork(pki["mallory"], {**roster, "mallory": Peer("127.0.0.1:0", role="caller")},
                      options=TransportOptions(deadline=DEADLINE, retries=0))
    mallory = Caller("mallory", net)
    with pytest.raises(AuthenticationError, match="not in the run's roster"):
        mallory.call("bob", Ping(1), expect=Pong)
    net.close()
    assert bob.calls == 0


def test_pinned_fingerprint_mismatch_is_refused(pki: dict[str, TlsIdentity]) -> None:
    roster = {"alice": Peer("127.0.0.1:0", fingerprint=fingerprint(pki["bob"].cert_pem), role="caller"),
              "bob": Peer("127.0.0.1:0", role="echo")}
    nb = GrpcNetwork(pki["bob"], roster)
    Echo("bob", nb)
    roster["bob"] = Peer(f"127.0.0.1:{nb.start()}", role="echo")
    na = GrpcNetwork(pki["alice"], roster)
    with pytest.raises(AuthenticationError, match="pinned"):
        Caller("alice", na).call("bob", Ping(1), expect=Pong)
    na.close()
    nb.close()


def test_server_with_another_partys_certificate_is_refused(
        pki: dict[str, TlsIdentity], pair: Pair) -> None:
    *_, roster = pair
    # "operator" is in the roster at bob's address: the server there proves it is bob, not operator
    net = GrpcNetwork(pki["alice"], {**roster, "operator": roster["bob"]}, options=TransportOptions(retries=0))
    impostor_target = Caller("alice", net)
    with pytest.raises(PartyUnavailable):
        impostor_target.call("operator", Ping(1), expect=Pong)
    net.close()


def test_dead_peer_and_slow_peer(pair: Pair) -> None:
    """A slow peer times out at the deadline (a caller that waited would get bob's reply, not a
    PeerTimeout) and the non-idempotent Ping is not sent again; a dead peer is PartyUnavailable
    (a caller that waited for it would see PeerTimeout).  Types and counts, no wall-clock bound:
    the outcome does not depend on the machine's load."""
    _, alice, nb, bob, _ = pair
    bob.hold = threading.Event()  # bob answers only after the deadline
    with pytest.raises(PeerTimeout):
        alice.call("bob", Ping(1), expect=Pong)
    bob.hold.set()
    assert bob.calls <= 1  # (0 only if the request reached bob after the deadline)
    nb.close(grace=None)
    with pytest.raises(PartyUnavailable):
        alice.call("bob", Ping(1), expect=Pong)


def test_calls_beyond_the_per_peer_limit_are_refused(pki: dict[str, TlsIdentity]) -> None:
    """bob admits one open call from alice: a second while the first is held is refused as a
    ProtocolError naming the limit; the held call then completes."""
    roster = {"alice": Peer("127.0.0.1:0", role="caller"), "bob": Peer("127.0.0.1:0", role="echo")}
    nb = GrpcNetwork(pki["bob"], roster, options=TransportOptions(deadline=30.0, retries=0, max_calls_per_peer=1))
    bob = Echo("bob", nb)
    bob.hold = threading.Event()
    roster["bob"] = Peer(f"127.0.0.1:{nb.start()}", role="echo")
    with GrpcNetwork(pki["alice"], roster, options=TransportOptions(deadline=30.0, retries=0)) as na:
        alice = Caller("alice", na)
        first: list[Pong] = []
        held = threading.Thread(target=lambda: first.append(alice.call("bob", Ping(1), expect=Pong)))
        held.start()
        end = time.monotonic() + 60  # a generous wait for the event, not a bound on speed
        while bob.calls == 0 and time.monotonic() < end:
            time.sleep(0.01)
        with pytest.raises(ProtocolError, match="at most 1 calls open at once"):
            alice.call("bob", Ping(2), expect=Pong)
        bob.hold.set()
        held.join()
    nb.close()
    assert first == [Pong(2)] and nb.refusals.counts() == {("alice", "busy"): 1}


Ports = Callable[[int], list[int]]


def test_only_idempotent_messages_are_retried(pki: dict[str, TlsIdentity], held_ports: Ports,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Bob comes up during alice's first backoff (started from the backoff itself, not by a timer
    racing the retries, so the outcome does not depend on the machine's load)."""
    roster = {"alice": Peer("127.0.0.1:0", role="caller"),
              "bob": Peer(f"127.0.0.1:{held_ports(1)[0]}", role="echo")}
    na = GrpcNetwork(pki["alice"], roster, options=TransportOptions(deadline=DEADLINE, retries=4, backoff=0.3))
    alice = Caller("alice", na)
    nb = GrpcNetwork(pki["bob"], roster)
    bob = Echo("bob", nb)
    backoffs: list[float] = []

    def backoff(seconds: float) -> None:
        backoffs.append(seconds)
        nb.start()
        time.sleep(seconds)

    monkeypatch.setattr(transport, "time", SimpleNamespace(sleep=backoff, monotonic=time.monotonic))
    with pytest.raises(PartyUnavailable):  # not idempotent: one attempt, bob is not up
        alice.call("bob", Ping(1), expect=Pong)
    assert backoffs == []  # no second attempt
    assert alice.call("bob", Query(), expect=Pong) == Pong(1)
    assert backoffs[0] == 0.3 and bob.calls == 1
    na.close()
    nb.close()


def test_message_size_limit(pki: dict[str, TlsIdentity]) -> None:
    roster = {"alice": Peer("127.0.0.1:0", role="caller"), "bob": Peer("127.0.0.1:0", role="echo")}
    small = TransportOptions(max_message_bytes=4096, retries=0)
    nb = GrpcNetwork(pki["bob"], roster, options=small)
    Echo("bob", nb)
    roster["bob"] = Peer(f"127.0.0.1:{nb.start()}", role="echo")
    na = GrpcNetwork(pki["alice"], roster, options=small)
    alice = Caller("alice", na)
    assert alice.call("bob", Ping(0, b"x" * 1000), expect=Pong) == Pong(1001)
    with pytest.raises(ProtocolError, match="size limit"):
        alice.call("bob", Ping(0, b"x" * 10_000), expect=Pong)
    na.close()
    nb.close()


def test_control_requests_only_from_the_operator(
        pki: dict[str, TlsIdentity], pair: Pair) -> None:
    na, _, _, _, roster = pair
    op_net = GrpcNetwork(pki["operator"], roster)
    op = Operator("operator", op_net)
    reply = op.control("bob", "double")
    assert reply.info == {"who": "bob"} and reply.arrays["v"].tolist() == [0, 2, 4]
    with pytest.raises(ParameterError, match="no control action"):
        op.control("bob", "__class__")
    with pytest.raises(UnauthorizedSender, match="only operator may"):
        na.call("alice", "bob", ControlRequest("double"))
    op_net.close()


def test_identity_checks(tmp_path: Path) -> None:
    paths = make_test_pki(["alice", "bob"], tmp_path, {"alice": b"a", "bob": b"b"})
    with pytest.raises(ParameterError, match="wrong passphrase"):
        load_identity("alice", tmp_path / "ca.pem", *paths["alice"], b"nope")
    with pytest.raises(AuthenticationError, match="not 'bob'"):
        load_identity("bob", tmp_path / "ca.pem", paths["alice"][0], paths["bob"][1], b"b")
    with pytest.raises(AuthenticationError, match="does not match"):
        load_identity("alice", tmp_path / "ca.pem", paths["alice"][0], paths["bob"][1], b"b")
    with pytest.raises(ParameterError, match="DNS label"):
        make_test_pki(["Not_A_Label"], tmp_path / "x", {"Not_A_Label": b"a"})
    ident = load_identity("alice", tmp_path / "ca.pem", *paths["alice"], b"a")
    assert b"PRIVATE" not in repr(ident).encode() and "PRIVATE" in ident.key_pem.decode()
    assert b"ENCRYPTED PRIVATE KEY" in paths["alice"][1].read_bytes()


def test_key_files(tmp_path: Path) -> None:
    f = tmp_path / "u1.keys"
    write_key_file(f, "u1", {"weak": b"\x01" * 40, "session": b"s" * 16}, b"pass")
    assert open_key_file(f, "u1", b"pass") == {"weak": b"\x01" * 40, "session": b"s" * 16}
    assert b"s" * 16 not in f.read_bytes()
    with pytest.raises(DecodeError):
        open_key_file(f, "u1", b"wrong")
    with pytest.raises(KeyMismatchError):
        open_key_file(f, "u2", b"pass")
    data = bytearray(f.read_bytes())
    data[-1] ^= 1
    f.write_bytes(bytes(data))
    with pytest.raises(DecodeError):
        open_key_file(f, "u1", b"pass")


def test_a_restarted_peer_is_reachable_at_the_next_call(pki: dict[str, TlsIdentity], held_ports: Ports) -> None:
    roster = {"alice": Peer("127.0.0.1:0", role="caller"), "bob": Peer(f"127.0.0.1:{held_ports(1)[0]}", role="echo")}
    opts = TransportOptions(deadline=DEADLINE, retries=0)
    nb = GrpcNetwork(pki["bob"], roster, options=opts)
    Echo("bob", nb)
    nb.start()
    na = GrpcNetwork(pki["alice"], roster, options=opts)
    alice = Caller("alice", na)
    assert alice.call("bob", Ping(1), expect=Pong) == Pong(2)
    nb.close(grace=None)
    with pytest.raises(PartyUnavailable):
        alice.call("bob", Ping(1), expect=Pong)
    nb2 = GrpcNetwork(pki["bob"], roster, options=opts)  # bob's process restarted on its address
    Echo("bob", nb2)
    nb2.start()
    assert alice.call("bob", Ping(2), expect=Pong) == Pong(3)  # no reconnect backoff to wait out
    na.close()
    nb2.close()


def test_wait_for_returns_only_once_the_peer_serves_its_party(pki: dict[str, TlsIdentity], held_ports: Ports) -> None:
    """Readiness is an answer from the peer's server hosting its party, not a connected channel.
    The waits that must succeed allow 60 s for what takes half a second (a loaded machine only
    makes them slower); the one that must time out cannot succeed whatever the load."""
    roster = {"alice": Peer("127.0.0.1:0", role="caller"), "bob": Peer(f"127.0.0.1:{held_ports(1)[0]}", role="echo")}
    nb = GrpcNetwork(pki["bob"], roster)
    nb.start()  # listening with TLS, but hosting no party yet
    na = GrpcNetwork(pki["alice"], roster)
    alice = Caller("alice", na)
    with pytest.raises(PeerTimeout):
        na.wait_for(["bob"], 1.5)
    Echo("bob", nb)
    na.wait_for(["bob"], 60.0)
    assert alice.call("bob", Ping(1), expect=Pong) == Pong(2)
    nb.close(grace=None)  # bob's process dies; a new one comes up on its address a little later
    nb2 = GrpcNetwork(pki["bob"], roster)
    Echo("bob", nb2)
    threading.Timer(0.5, nb2.start).start()
    na.wait_for(["bob"], 60.0)
    assert alice.call("bob", Ping(2), expect=Pong) == Pong(3)  # serving when the wait ended
    na.close()
    nb2.close()


def test_wait_for_retries_after_pauses_doubling_from_five_milliseconds(
        pki: dict[str, TlsIdentity], held_ports: Ports, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a fake clock: a peer that is not up is asked again after 5, 10, 20 ms..., the pause capped
    at a quarter of a second, the last one cut to the deadline; a peer that comes up during the
    third pause (started from the pause itself) is found by the next attempt, not after gRPC's
    one-second reconnect backoff."""
    roster = {"alice": Peer("127.0.0.1:0", role="caller"), "bob": Peer(f"127.0.0.1:{held_ports(1)[0]}", role="echo")}
    na = GrpcNetwork(pki["alice"], roster)
    nb = GrpcNetwork(pki["bob"], roster)
    Echo("bob", nb)
    clock = [0.0]
    pauses: list[float] = []

    def pause(seconds: float) -> None:
        pauses.append(seconds)
        clock[0] += seconds

    monkeypatch.setattr(transport, "time", SimpleNamespace(sleep=pause, monotonic=lambda: clock[0]))
    with pytest.raises(PeerTimeout):
        na.wait_for(["bob"], 2.0)
    assert pauses[:7] == [0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.25]
    assert max(pauses) == 0.25 and sum(pauses) == pytest.approx(2.0)
    doubling = [min(0.005 * 2**i, 0.25) for i in range(64)]

    def pause_then_start(seconds: float) -> None:
        pause(seconds)
        if len(pauses) == 3:
            nb.start()

    pauses.clear()
    monkeypatch.setattr(transport, "time", SimpleNamespace(sleep=pause_then_start, monotonic=lambda: clock[0]))
    na.wait_for(["bob"], 60.0)
    # three pauses, unless a loaded machine made the first call to the live server miss its 1 s deadline
    assert len(pauses) >= 3 and pauses == doubling[: len(pauses)]
    na.close()
    nb.close()


def test_a_call_cancelled_by_a_stopping_server_means_the_party_is_unavailable() -> None:
    """A server that stops while a call is open (a party switching roles, or shutting down) answers
    CANCELLED: callers that wait for a party to come back (``finish_alignment``) must see
    :class:`PartyUnavailable`, not a remote failure."""
    import grpc

    from securetrees.net.transport import _error_from_status

    assert isinstance(_error_from_status("u1", grpc.StatusCode.CANCELLED, "CANCELLED"), PartyUnavailable)
    assert isinstance(_error_from_status("u1", grpc.StatusCode.UNAVAILABLE, "down"), PartyUnavailable)
    assert not isinstance(_error_from_status("u1", grpc.StatusCode.INTERNAL, "boom"), PartyUnavailable)
