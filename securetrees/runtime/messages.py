"""Protocol messages: frozen dataclasses registered under a unique wire type name.

A message class is declared once and used by both ends, with who may send it::

    @message("dtpkc.holt.request", sender="cs", receiver="cc")
    @dataclass(frozen=True)
    class HoLTRequest(Message):
        beta: tuple[int, ...]

    @message("dtpkc.holt.reply", reply_to=HoLTRequest)
    @dataclass(frozen=True)
    class HoLTReply(Message):
        t1: tuple[int, ...]

A *request* names the roles that may send it and the roles that may receive it;
a *reply* names the requests it answers (and may travel only as their reply); a
message with neither is never sent on its own (a nested part, a stored record).
Networks check every delivery against these declarations before any handler runs
(:func:`authorize_request`, :func:`authorize_reply`).

The wire codec (:mod:`securetrees.runtime.codec`) looks classes up by their
wire name when decoding and checks every field against its annotation, so a
peer cannot make the receiver instantiate anything but a registered message
with fields of the declared types.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Callable, Iterable
from typing import Any, ClassVar, Final, TypeVar

from securetrees.errors import ParameterError, UnauthorizedSender

__all__ = [
    "ANY_ROLE",
    "Message",
    "authorize_reply",
    "authorize_request",
    "check_role",
    "message",
    "message_class",
    "message_fields",
    "registered_messages",
]

ANY_ROLE: Final = "*"
"""As a receiver role: every role of the run may receive the request (the control plane)."""

_NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$")
_ROLE = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
_REGISTRY: dict[str, type[Message]] = {}
_FIELDS: dict[type[Message], tuple[tuple[str, Any], ...]] = {}

M = TypeVar("M", bound="Message")


class Message:
    """Base class of every protocol message (subclasses are frozen dataclasses)."""

    wire_type: ClassVar[str] = ""
    idempotent: ClassVar[bool] = False
    """True when delivering the message twice has the same effect as once (a query):
    networked transports may then retry it after a transient failure."""
    long_running: ClassVar[bool] = False
    """True for a request whose handling runs a whole protocol phase (a control request):
    networked transports then wait without a deadline, relying on keepalive to notice a dead peer."""

    sent_by: ClassVar[frozenset[str]] = frozenset()
    """A request: the roles that may send it (set by :func:`message`)."""
    sent_to: ClassVar[frozenset[str]] = frozenset()
    """A request: the roles that may receive it, or :data:`ANY_ROLE`."""
    replies_to: ClassVar[frozenset[str]] = frozenset()
    """A reply: the wire types of the requests it may answer."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.wire_type = ""  # set by @message; an unregistered subclass cannot be sent
        cls.sent_by = cls.sent_to = cls.replies_to = frozenset()


Roles = str | Iterable[str]


def check_role(role: object, what: str = "party") -> str:
    """``role`` if it is a valid role name (lower case, 1-32 characters), else :class:`ParameterError`."""
    if not (isinstance(role, str) and _ROLE.match(role)):
        raise ParameterError(f"invalid {what} role {role!r}")
    return role


def _roles(value: Roles, what: str, *, any_ok: bool) -> frozenset[str]:
    names = frozenset((value,) if isinstance(value, str) else value)
    return frozenset(r if any_ok and r == ANY_ROLE else check_role(r, what) for r in names)


def _requests(value: type[Message] | str | Iterable[type[Message] | str]) -> frozenset[str]:
    items = (value,) if isinstance(value, (str, type)) else tuple(value)
    names = set()
    for item in items:
        name = item if isinstance(item, str) else getattr(item, "wire_type", "")
        if not isinstance(name, str) or not _NAME.match(name):
            raise ParameterError(f"reply_to names {item!r}, which is not a registered request")
        names.add(name)
    return frozenset(names)


def message(
    name: str,
    *,
    sender: Roles = (),
    receiver: Roles = (),
    reply_to: type[Message] | str | Iterable[type[Message] | str] = (),
) -> Callable[[type[M]], type[M]]:
    """Register a frozen dataclass as a message with the wire type ``name`` (dotted, lower case).

    A request declares the roles that may send it (``sender``) and receive it (``receiver``,
    :data:`ANY_ROLE` for every role); a reply declares the requests it answers (``reply_to``:
    classes or wire names).  A message declaring neither can never be sent on its own.
    """
    if not _NAME.match(name) or len(name) > 128:
        raise ParameterError(f"invalid wire type name {name!r}")
    senders = _roles(sender, "sender", any_ok=False)
    receivers = _roles(receiver, "receiver", any_ok=True)
    answers = _requests(reply_to)
    if bool(senders) != bool(receivers):
        raise ParameterError(f"{name}: a request declares both its sender and its receiver roles")
    if senders and answers:
        raise ParameterError(f"{name}: a message is a request or a reply, not both")

    def register(cls: type[M]) -> type[M]:
        if not (isinstance(cls, type) and issubclass(cls, Message)):
            raise ParameterError(f"{cls!r} must subclass Message")
        params = getattr(cls, "__dataclass_params__", None)
        if params is None or not params.frozen:
            raise ParameterError(f"{cls.__name__} must be a frozen dataclass (apply @dataclass(frozen=True) first)")
        existing = _REGISTRY.get(name)
        if existing is not None and existing.__qualname__ != cls.__qualname__:
            raise ParameterError(f"wire type {name!r} is already registered to {existing.__qualname__}")
        cls.wire_type = name
        cls.sent_by, cls.sent_to, cls.replies_to = senders, receivers, answers
        _REGISTRY[name] = cls
        _FIELDS.pop(cls, None)
        return cls

    return register


def message_class(name: str) -> type[Message] | None:
    """The message class registered under ``name``, or None."""
    return _REGISTRY.get(name)


def registered_messages() -> dict[str, type[Message]]:
    """A copy of the registry (wire name to class)."""
    return dict(_REGISTRY)


def message_fields(cls: type[Message]) -> tuple[tuple[str, Any], ...]:
    """``(name, resolved type)`` of each field of a message class, in declaration order."""
    cached = _FIELDS.get(cls)
    if cached is None:
        hints = typing.get_type_hints(cls)
        cached = tuple((f.name, hints[f.name]) for f in dataclasses.fields(cls))  # type: ignore[arg-type]
        _FIELDS[cls] = cached
    return cached


def authorize_request(cls: type[Message], sender: str, sender_role: str | None, receiver_role: str) -> None:
    """Raise :class:`UnauthorizedSender` unless a party of ``sender_role`` (None: not in the
    run's roster) may send a ``cls`` request to a party of ``receiver_role``."""
    kind = cls.wire_type or cls.__name__
    if not cls.sent_by:
        what = "a reply" if cls.replies_to else "never sent on its own"
        raise UnauthorizedSender(f"{kind} is {what}, not a request {sender!r} may send")
    if sender_role is None:
        raise UnauthorizedSender(f"{sender!r} has no role in this run; {kind} refused")
    if sender_role not in cls.sent_by:
        raise UnauthorizedSender(
            f"{sender!r} ({sender_role}) may not send {kind}; only {', '.join(sorted(cls.sent_by))} may")
    if ANY_ROLE not in cls.sent_to and receiver_role not in cls.sent_to:
        raise UnauthorizedSender(f"{kind} is not addressed to a {receiver_role or 'role-less party'}")


def authorize_reply(request: type[Message], reply: type[Message]) -> None:
    """Raise :class:`UnauthorizedSender` unless ``reply`` is declared as an answer to ``request``."""
    if not request.wire_type or request.wire_type not in reply.replies_to:
        raise UnauthorizedSender(
            f"{reply.wire_type or reply.__name__} is not a reply to {request.wire_type or request.__name__}")
