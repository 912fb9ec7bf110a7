"""Networks carry messages between parties as bytes and record them.

:class:`Network` is the interface role code talks to (through
:class:`~securetrees.runtime.party.Party`); :class:`InProcessNetwork` is the
default implementation, which still encodes every message to bytes at the
sender and decodes it at the receiver, so that nothing is shared by
reference, sizes are real, and a networked transport can replace it without
touching role code.

Every network lets a message in through :meth:`Network.receive` only: the
sender's role (from the run's roster) must be one the message's type declares
(:func:`~securetrees.runtime.messages.message`), else the message is refused
with :class:`UnauthorizedSender`, recorded as a refusal and never delivered.
Replies pass :meth:`Network.accept_reply`: only a reply declared for the request, and only
one bound to it: every request carries a fresh 16-byte request id, the replier's network
prefixes its reply frame with :func:`reply_binding` over the request, and the caller refuses a
reply whose binding is not the one it computes itself (:class:`UnboundReply`).
"""

from __future__ import annotations

import hashlib
import hmac
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final

from securetrees.errors import (
    DecodeError,
    PartyUnavailable,
    ProtocolError,
    UnauthorizedSender,
    UnboundReply,
    UnexpectedMessage,
)
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.runtime import codec
from securetrees.runtime.messages import Message, authorize_reply, authorize_request
from securetrees.runtime.transcript import Transcript

if TYPE_CHECKING:
    from securetrees.runtime.party import Party

__all__ = ["BINDING_BYTES", "REQUEST_ID_BYTES", "InProcessNetwork", "Network", "new_request_id", "reply_binding"]

REQUEST_ID_BYTES: Final = 16
"""Length of the random id every request carries (from :mod:`securetrees.rand`)."""
BINDING_BYTES: Final = 32
"""Length of the binding (SHA-256) that prefixes every reply frame."""
_BINDING_LABEL: Final = b"securetrees.reply.v1"


def reply_binding(caller: str, replier: str, request_id: bytes, request: bytes) -> bytes:
    """SHA-256 over a label, the caller's and the replier's names, the request id and the
    request's frame, each length-prefixed (8 bytes, big-endian) so that no two inputs hash alike.

    Keyless: it ties a reply to one request and authenticates nobody (the channel does: mutual
    TLS over gRPC).  It reveals nothing the request did not: both ends already hold every input."""
    h = hashlib.sha256(_BINDING_LABEL)
    for part in (caller.encode("utf-8"), replier.encode("utf-8"), request_id, request):
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.digest()


def new_request_id(rng: RandomSource = SYSTEM_RANDOM) -> bytes:
    """A fresh request id: 16 bytes from the library's CSPRNG (unpredictable, so no reply can be
    bound to a request before the caller sends it)."""
    return rng.token_bytes(REQUEST_ID_BYTES)


class Network(ABC):
    """What a party needs from a transport: register, call one peer, call several at once."""

    transcript: Transcript

    @abstractmethod
    def register(self, party: Party) -> None:
        """Make ``party`` reachable under ``party.name``."""

    @abstractmethod
    def call(self, sender: str, receiver: str, msg: Message) -> Message | None:
        """Deliver ``msg`` and return the receiver's reply (None for a one-way message); one round."""

    @abstractmethod
    def call_many(
        self, sender: str, requests: Mapping[str, Message], *, allow_missing: bool = False
    ) -> dict[str, Message | None]:
        """Deliver one message to each of several parties in one round; replies by party.

        With ``allow_missing`` an unavailable party is left out of the result
        instead of raising :class:`PartyUnavailable` (dropout-tolerant protocols).
        """

    @abstractmethod
    def role_of(self, name: str) -> str | None:
        """The role of the run's party ``name`` (from the run's roster), or None if it has none."""

    def bytes_sent(self, party: str) -> int:
        """Codec-frame bytes ``party`` has sent on this network so far (requests and replies)."""
        return self.transcript.bytes_sent(party)

    def receive(self, round_: int, sender: str, party: Party, data: bytes) -> Message | None:
        """The one way into a party: from the frame's header alone, check that ``sender``'s role
        may send this message type to ``party``'s role; then decode, record the delivery and run
        the handler.  A refused message is recorded as a
        :class:`~securetrees.runtime.transcript.Refusal`, raises :class:`UnauthorizedSender`,
        and is neither decoded nor seen by the party."""
        kind = codec.message_type(data)
        try:
            authorize_request(kind, sender, self.role_of(sender), party.role)
        except UnauthorizedSender as exc:
            self.transcript.refuse(round_, sender, party.name, kind.wire_type, len(data), str(exc))
            raise
        msg = codec.decode(data)
        self.transcript.record(round_, sender, party.name, msg, data)
        party.logger.debug("%s received %s from %s (%d bytes, round %d)", party.name, kind.wire_type, sender,
                           len(data), round_)
        return party.dispatch(sender, msg)

    def bind(self, caller: str, replier: str, request_id: bytes, request: bytes) -> bytes:
        """The binding of a reply to this request (:func:`reply_binding`); both ends compute it."""
        return reply_binding(caller, replier, request_id, request)

    def answer(self, round_: int, sender: str, party: Party, request_id: bytes, data: bytes) -> bytes | None:
        """The replier's side of a call: :meth:`receive` the request, then return the reply as it
        travels, its binding to this request followed by its frame (None for a one-way message)."""
        reply = self.receive(round_, sender, party, data)
        if reply is None:
            return None
        return self.bind(sender, party.name, request_id, data) + codec.encode(reply)

    def accept_reply(self, round_: int, replier: str, caller: str, request: type[Message], request_id: bytes,
                     request_frame: bytes, answer: bytes) -> Message:
        """The caller's side of a call: split ``answer`` into binding and frame; refuse a binding
        other than the one this caller computes for the request it sent (:class:`UnboundReply`),
        then a reply type not declared as an answer to ``request`` (:class:`UnauthorizedSender`),
        each recorded as a refusal; decode and record the reply in the caller's view."""
        if len(answer) <= BINDING_BYTES:
            raise DecodeError(f"the reply from {replier!r} is shorter than its binding")
        binding, data = answer[:BINDING_BYTES], answer[BINDING_BYTES:]
        kind = codec.message_type(data)
        if not hmac.compare_digest(binding, self.bind(caller, replier, request_id, request_frame)):
            reason = f"the reply from {replier!r} is not bound to the request {caller!r} sent"
            self.transcript.refuse(round_, replier, caller, kind.wire_type, len(data), reason)
            raise UnboundReply(reason)
        try:
            authorize_reply(request, kind)
        except UnauthorizedSender as exc:
            self.transcript.refuse(round_, replier, caller, kind.wire_type, len(data), str(exc))
            raise
        reply = codec.decode(data)
        self.transcript.record(round_, replier, caller, reply, data)
        return reply

    def close(self) -> None:  # noqa: B027 - an optional hook, not abstract
        """Stop serving and release connections (nothing to release in process)."""

    def send(self, sender: str, receiver: str, msg: Message) -> None:
        """Deliver a one-way message; a reply is a protocol violation."""
        if self.call(sender, receiver, msg) is not None:
            raise UnexpectedMessage(f"{receiver} replied to the one-way message {msg.wire_type}")


class InProcessNetwork(Network):
    """All parties in one process; every message still crosses as bytes.

    :meth:`disconnect` makes a party unavailable from then on (to simulate a
    dropout); calls to it raise :class:`PartyUnavailable`.
    """

    def __init__(self, *, transcript: Transcript | None = None, keep_payloads: bool = True) -> None:
        self.transcript = transcript if transcript is not None else Transcript(keep_payloads=keep_payloads)
        self._parties: dict[str, Party] = {}
        self._down: set[str] = set()

    @property
    def parties(self) -> tuple[str, ...]:
        return tuple(self._parties)

    def register(self, party: Party) -> None:
        if party.name in self._parties:
            raise ProtocolError(f"a party named {party.name!r} is already on this network")
        self._parties[party.name] = party

    def disconnect(self, name: str) -> None:
        """Simulate ``name`` dropping out: every later call to or from it fails."""
        self._party(name)
        self._down.add(name)

    def reconnect(self, name: str) -> None:
        self._down.discard(name)

    def is_up(self, name: str) -> bool:
        return name in self._parties and name not in self._down

    def role_of(self, name: str) -> str | None:
        party = self._parties.get(name)
        return None if party is None else party.role

    def _party(self, name: str) -> Party:
        party = self._parties.get(name)
        if party is None:
            raise PartyUnavailable(f"no party named {name!r} on this network")
        return party

    def _deliver(self, round_: int, sender: str, receiver: str, msg: Message) -> Message | None:
        for name in (sender, receiver):
            if name in self._down:
                raise PartyUnavailable(f"party {name!r} has dropped out")
        target = self._party(receiver)
        data, request_id = codec.encode(msg), new_request_id()
        answer = self.answer(round_, sender, target, request_id, data)
        if answer is None:
            return None
        if receiver in self._down:  # dropped while handling
            raise PartyUnavailable(f"party {receiver!r} has dropped out")
        return self.accept_reply(round_, receiver, sender, type(msg), request_id, data, answer)

    def call(self, sender: str, receiver: str, msg: Message) -> Message | None:
        return self._deliver(self.transcript.new_round(), sender, receiver, msg)

    def call_many(
        self, sender: str, requests: Mapping[str, Message], *, allow_missing: bool = False
    ) -> dict[str, Message | None]:
        round_ = self.transcript.new_round()
        replies: dict[str, Message | None] = {}
        for receiver, msg in requests.items():
            try:
                replies[receiver] = self._deliver(round_, sender, receiver, msg)
            except PartyUnavailable:
                if not allow_missing or sender in self._down:
                    raise
        return replies
