"""The base of every protocol role.

A role owns its state and keys and talks to other roles only through its
:class:`~securetrees.runtime.network.Network`.  Incoming messages are routed
by type to methods marked with :func:`handles`; a message type the role does
not accept raises :class:`~securetrees.errors.UnexpectedMessage`.  Each subclass
names its ``role``; the network admits a message only from a sender whose role
the message's type declares (see :mod:`securetrees.runtime.messages`).

Each subclass gets ``logger``, named ``securetrees.<protocol>.<role>``
(:func:`securetrees.log.role_logger_name`): roles log their protocol steps on it at
INFO, and the network logs every message it delivers to the party at DEBUG.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

from securetrees.errors import ParameterError, UnexpectedMessage
from securetrees.log import get_logger, role_logger_name
from securetrees.runtime.messages import Message, check_role
from securetrees.runtime.network import Network

__all__ = ["Party", "handles"]

M = TypeVar("M", bound=Message)
R = TypeVar("R", bound=Message)
Handler = Callable[[Any, str, Any], "Message | None"]

_PARTY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")


def handles(*types: type[Message]) -> Callable[[Callable[[Any, str, M], R | None]], Callable[[Any, str, M], R | None]]:
    """Mark a method ``(self, sender, msg) -> reply | None`` as the handler of these message types."""

    def mark(fn: Callable[[Any, str, M], R | None]) -> Callable[[Any, str, M], R | None]:
        fn._handles = types  # type: ignore[attr-defined]
        return fn

    return mark


class Party:
    """A protocol role reachable on a network under ``name``."""

    _handlers: ClassVar[dict[type[Message], str]] = {}
    role: ClassVar[str] = ""
    """The kind of party (``"cs"``, ``"participant"``, ``"client"`` ...): what message
    declarations name.  Every party that joins a network has one."""
    logger: ClassVar[logging.Logger] = get_logger("runtime.party")
    """This role's logger, ``securetrees.<protocol>.<role>`` (set for each subclass)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        table: dict[type[Message], str] = {}
        for klass in reversed(cls.__mro__):
            for attr, value in vars(klass).items():
                for msg_type in getattr(value, "_handles", ()):
                    table[msg_type] = attr
        cls._handlers = table
        if "logger" not in vars(cls):  # a subclass may name its logger itself
            cls.logger = logging.getLogger(role_logger_name(cls.__module__, cls.role or cls.__name__.lower()))

    def __init__(self, name: str, network: Network) -> None:
        if not isinstance(name, str) or not _PARTY_NAME.match(name):
            raise ParameterError(f"invalid party name {name!r}")
        check_role(self.role, type(self).__name__)
        self.name = name
        self.network = network
        network.register(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"

    def dispatch(self, sender: str, msg: Message) -> Message | None:
        """Route an incoming message to its handler (called by :meth:`Network.receive`, which
        has already checked the sender's role)."""
        attr = self._handlers.get(type(msg))
        if attr is None:
            raise UnexpectedMessage(f"{self.name} does not accept {msg.wire_type or type(msg).__name__} messages")
        result: Message | None = getattr(self, attr)(sender, msg)
        return result

    @staticmethod
    def _check_reply(peer: str, reply: Message | None, expect: type[R]) -> R:
        if not isinstance(reply, expect):
            got = "no reply" if reply is None else reply.wire_type
            raise UnexpectedMessage(f"expected {expect.wire_type or expect.__name__} from {peer}, got {got}")
        return reply

    def call(self, receiver: str, msg: Message, *, expect: type[R]) -> R:
        """Send ``msg`` to ``receiver`` and return its reply, which must be an ``expect``; one round."""
        return self._check_reply(receiver, self.network.call(self.name, receiver, msg), expect)

    def call_many(
        self, requests: Mapping[str, Message], *, expect: type[R], allow_missing: bool = False
    ) -> dict[str, R]:
        """One message to each of several parties in one round; their replies by name."""
        replies = self.network.call_many(self.name, requests, allow_missing=allow_missing)
        return {peer: self._check_reply(peer, reply, expect) for peer, reply in replies.items()}

    def send(self, receiver: str, msg: Message) -> None:
        """A one-way message (the receiver's handler returns None)."""
        self.network.send(self.name, receiver, msg)
