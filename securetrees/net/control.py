"""The control plane of a networked run: the operator tells roles what to do.

A role process serves its protocol role and, through :class:`Controllable`,
accepts :class:`ControlRequest` messages, which only the ``operator`` role may
send (the message's declaration; the run's configuration gives that role to its
operator alone, and the sender is the TLS-authenticated certificate name).  An action ``x`` runs the
role's method ``control_x(args)``; its reply carries named arrays and strings.
``shutdown`` stops the role's server after the reply has gone out.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from securetrees.errors import ParameterError
from securetrees.runtime import ANY_ROLE, Message, Party, handles, message
from securetrees.runtime.network import Network

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["OPERATOR_ROLE", "ControlReply", "ControlRequest", "Controllable", "Operator"]

OPERATOR_ROLE: Final = "operator"
"""The role of a run's operator: the only role that may send control requests."""


@message("securetrees.control.request", sender=OPERATOR_ROLE, receiver=ANY_ROLE)
@dataclass(frozen=True)
class ControlRequest(Message):
    long_running = True

    action: str
    args: dict[str, str] = field(default_factory=dict)


@message("securetrees.control.reply", reply_to=ControlRequest)
@dataclass(frozen=True)
class ControlReply(Message):
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    info: dict[str, str] = field(default_factory=dict)


class Controllable:
    """Mixin for a :class:`Party` run as a service: the operator may send control requests."""

    name: str
    network: Network

    @handles(ControlRequest)
    def on_control(self, sender: str, msg: ControlRequest) -> ControlReply:
        if msg.action == "shutdown":
            threading.Timer(0.2, self.network.close).start()  # after the reply has gone out
            return ControlReply(info={"status": "stopping"})
        if msg.action == "role":  # which role this process serves now (a deployment's phases)
            return ControlReply(info={"role": str(getattr(self, "role", ""))})
        if msg.action == "stats":
            t = self.network.transcript
            protocol = [r for r in t if not r.type_name.startswith("securetrees.control.")]
            return ControlReply(info={"bytes_received": str(t.total_bytes), "messages": str(len(t)),
                                      "protocol_bytes": str(sum(r.size for r in protocol)),
                                      "protocol_messages": str(len(protocol)), "rounds": str(t.rounds)})
        fn = getattr(self, f"control_{msg.action}", None) if msg.action.isidentifier() else None
        if fn is None:
            raise ParameterError(f"{self.name!r} has no control action {msg.action!r}")
        reply: ControlReply = fn(dict(msg.args))
        return reply


class Operator(Party):
    """The operator's end: sends control requests (and accepts nothing)."""

    role = OPERATOR_ROLE

    def control(self, role: str, action: str, **args: Any) -> ControlReply:
        return self.call(role, ControlRequest(action, {k: str(v) for k, v in args.items()}), expect=ControlReply)

    def control_many(self, roles: list[str], action: str, per_role: Mapping[str, Mapping[str, Any]] | None = None
                     ) -> dict[str, ControlReply]:
        reqs: dict[str, Message] = {
            r: ControlRequest(action, {k: str(v) for k, v in (per_role or {}).get(r, {}).items()}) for r in roles}
        return self.call_many(reqs, expect=ControlReply)
