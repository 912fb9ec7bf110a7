"""A role that failed at start-up tells the operator why, instead of leaving it to time out.

When ``securetrees party`` cannot build its role (a bad table, a wrong parameter, a key file that
does not match the run), the process still holds its TLS identity.  It then serves a
:class:`FailedRole` on its address for :data:`FAILED_ROLE_SECONDS`: every message it receives, the
operator's control requests and a peer's protocol messages alike, is answered with the start-up
error's type and its :func:`public_reason`, so the operator's next command (``fit``, ``predict``,
``status``) fails within one round with that typed error rather than a :class:`PeerTimeout` after its
whole timeout.  The operator's ``shutdown`` (``securetrees operator stop``) ends it early.

What the reason reveals: the error's type, the generic sentence that documents that type, and where
the party's own log is; never the error's own message, which may quote a cell of the party's data
or a name from its key file (those stay in the log on its machine).
"""

from __future__ import annotations

import re
import threading
from typing import Final

from securetrees.errors import SecureTreesError
from securetrees.net.control import ControlReply, ControlRequest, Operator
from securetrees.runtime import Message, Party
from securetrees.runtime.network import Network

__all__ = ["FAILED_ROLE_SECONDS", "FailedRole", "check_started", "public_reason"]

FAILED_ROLE_SECONDS: Final = 120.0
"""How long a role that failed at start-up answers with its error before its process exits."""


def public_reason(role: str, exc: SecureTreesError) -> str:
    """What the operator may read of ``role``'s start-up failure ``exc``: its type's documented
    meaning (the first sentence of the class docstring) and where the details are.  Reveals the
    error's type only: its message, which may hold a value of the party's data, is not part of it."""
    doc = " ".join((type(exc).__doc__ or "").split())
    summary = re.split(r"\.(?:\s|$)", doc, maxsplit=1)[0] if doc else type(exc).__name__
    return (f"{role!r} could not start its role: {summary} (the details are in its log on its machine, "
            "logs/" f"{role}.log unless --log-dir or --log-file moved it)")


def _same_kind(exc: SecureTreesError, text: str) -> SecureTreesError:
    """A new error of ``exc``'s type carrying ``text`` (of its nearest base that takes a message alone,
    for a type whose constructor needs more, such as :class:`MissingParameterError`)."""
    for kind in type(exc).__mro__:
        if isinstance(kind, type) and issubclass(kind, SecureTreesError):
            try:
                return kind(text)
            except TypeError:
                continue
    return SecureTreesError(text)  # pragma: no cover - SecureTreesError itself takes a message


class FailedRole(Party):
    """The stand-in a party serves after its role failed to start: it answers every message by
    raising :attr:`error` (the start-up error's type with :func:`public_reason`), except the
    operator's ``shutdown``, which sets :attr:`stopped`.  :meth:`serving` makes one for a role."""

    role = "failed"
    """Replaced by the failed party's roster role in the subclass :meth:`serving` makes (which then
    logs as ``securetrees.net.ROLE``)."""
    error: SecureTreesError
    stopped: threading.Event

    @classmethod
    def serving(cls, role: str, name: str, network: Network, exc: SecureTreesError) -> FailedRole:
        """A :class:`FailedRole` for party ``name`` of ``role`` (its roster role, which the network
        checks), registered on ``network``."""
        kind = type(f"Failed{role.title().replace('_', '')}", (cls,), {"role": role})
        party: FailedRole = kind(name, network)
        party.error = _same_kind(exc, public_reason(name, exc))
        party.stopped = threading.Event()
        return party

    def dispatch(self, sender: str, msg: Message) -> Message | None:
        """Raise :attr:`error` for every message but the operator's ``shutdown``."""
        if isinstance(msg, ControlRequest) and msg.action == "shutdown":
            self.stopped.set()
            return ControlReply(info={"status": "stopping"})
        raise _same_kind(self.error, str(self.error))  # a fresh one: a raised error keeps its traceback


def check_started(operator: Operator, roles: list[str]) -> None:
    """Ask every one of ``roles`` (each answering readiness) for its ``status`` in one round: a role
    that serves a :class:`FailedRole` makes this raise its typed start-up error.  Reveals nothing
    beyond what ``securetrees operator status`` shows."""
    operator.control_many(roles, "status")
