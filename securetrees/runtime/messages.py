"""Protocol messages: frozen dataclasses registered under a unique wire type name.

A message class is declared once and used by both ends::

    @message("dtpkc.holt.request")
    @dataclass(frozen=True)
    class HoLTRequest(Message):
        beta: tuple[int, ...]

The wire codec (:mod:`securetrees.runtime.codec`) looks classes up by their
wire name when decoding and checks every field against its annotation, so a
peer cannot make the receiver instantiate anything but a registered message
with fields of the declared types.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from securetrees.errors import ParameterError

__all__ = ["Message", "message", "message_class", "message_fields", "registered_messages"]

_NAME = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$")
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

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.wire_type = ""  # set by @message; an unregistered subclass cannot be sent


def message(name: str) -> Callable[[type[M]], type[M]]:
    """Register a frozen dataclass as a message with the wire type ``name`` (dotted, lower case)."""
    if not _NAME.match(name) or len(name) > 128:
        raise ParameterError(f"invalid wire type name {name!r}")

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
