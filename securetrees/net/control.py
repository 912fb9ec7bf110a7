"""The control plane of a networked run: the operator tells roles what to do.

A role process serves its protocol role and, through :class:`Controllable`,
accepts :class:`ControlRequest` messages, which only the ``operator`` role may
send (the message's declaration; the run's configuration gives that role to its
operator alone, and the sender is the TLS-authenticated certificate name).  An action ``x`` runs the
role's method ``control_x(args)``; its reply carries named arrays and strings.
``shutdown`` stops the role's server after the reply has gone out; ``stats`` reports the
role's transcript (messages, bytes, rounds) and its process's peak resident memory.
"""

from __future__ import annotations

import logging
import resource
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Final

import numpy as np

from securetrees.errors import ParameterError
from securetrees.progress import current as current_progress
from securetrees.runtime import ANY_ROLE, Message, Party, handles, message
from securetrees.runtime.network import Network
from securetrees.runtime.steps import logged_step, traffic

FIT_ONCE: Final = ("fit runs once per start of the parties; to train again, stop them (securetrees operator stop) "
                   "and start every party again")
"""What a refused second ``fit`` tells the operator (every deployment's roles are set up for one fit)."""

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

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


def peak_rss_bytes() -> int:
    """This process's peak resident set size so far, in bytes.

    Linux: ``VmHWM`` of ``/proc/self/status``, the high-water mark of this program since it
    started (``getrusage``'s ``ru_maxrss`` would also count the parent's memory at the fork that
    started it).  Elsewhere ``ru_maxrss`` (bytes on macOS, kB on other systems)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024


class Controllable:
    """Mixin for a :class:`Party` run as a service: the operator may send control requests.

    Built-in actions: ``shutdown``; ``stats`` (this process's received messages, bytes and
    rounds); ``status`` (the role, the steps run so far, the last one, what
    :meth:`control_state` adds and, while a step shows progress, ``progress``:
    :func:`securetrees.progress.current`, e.g. ``federated forest 3/10``).  Any other action ``x``
    runs ``control_x(args)`` as a logged step (:func:`~securetrees.runtime.steps.logged_step`: wall time, bytes sent and
    received, rounds on the role's logger)."""

    name: str
    role: ClassVar[str]
    network: Network
    logger: ClassVar[logging.Logger]
    _steps: tuple[int, str] = (0, "")

    def _log_totals(self) -> None:
        """The role's traffic in all, and what it received by message type (a role that works
        inside other roles' steps, e.g. a client during the master's ``fit``, shows it here)."""
        used = traffic(self.network, self.name)
        self.logger.info("%s stopping after %d steps: sent %d B, received %d B, rounds %d in all",
                         self.name, self._steps[0], used.sent, used.received, used.rounds)
        by_type: dict[str, list[int]] = {}
        for r in self.network.transcript.view(self.name):
            entry = by_type.setdefault(r.type_name, [0, 0])
            entry[0] += 1
            entry[1] += r.size
        for type_name, (count, size) in sorted(by_type.items()):
            self.logger.info("%s received %d x %s, %d B", self.name, count, type_name, size)

    def control_state(self) -> dict[str, str]:
        """What ``status`` reports beyond the built-ins (e.g. the number of trees); override."""
        return {}

    @handles(ControlRequest)
    def on_control(self, sender: str, msg: ControlRequest) -> ControlReply:
        if msg.action == "shutdown":
            self._log_totals()
            threading.Timer(0.2, self.network.close).start()  # after the reply has gone out
            return ControlReply(info={"status": "stopping"})
        if msg.action == "role":  # which role this process serves now (a deployment's phases)
            return ControlReply(info={"role": str(getattr(self, "role", ""))})
        if msg.action == "stats":
            t = self.network.transcript
            protocol = [r for r in t if not r.type_name.startswith("securetrees.control.")]
            return ControlReply(info={"bytes_received": str(t.total_bytes), "messages": str(len(t)),
                                      "protocol_bytes": str(sum(r.size for r in protocol)),
                                      "protocol_messages": str(len(protocol)), "rounds": str(t.rounds),
                                      "peak_rss_bytes": str(peak_rss_bytes()),
                                      "bytes_sent": str(self.network.bytes_sent(self.name))})
        if msg.action == "status":
            count, last = self._steps
            running = current_progress()
            return ControlReply(info={**self.control_state(), "role": self.role, "steps": str(count),
                                      "last_step": last or "-", **({"progress": running} if running else {})})
        fn = getattr(self, f"control_{msg.action}", None) if msg.action.isidentifier() else None
        if fn is None:
            raise ParameterError(f"{self.name!r} has no control action {msg.action!r}")
        with logged_step(self.logger, self.name, self.network, msg.action):
            reply: ControlReply = fn(dict(msg.args))
        self._steps = (self._steps[0] + 1, msg.action)
        return reply


class Operator(Party):
    """The operator's end: sends control requests (and accepts nothing)."""

    role = OPERATOR_ROLE

    def control(self, role: str, action: str, **args: Any) -> ControlReply:
        return self.call(role, ControlRequest(action, {k: str(v) for k, v in args.items()}), expect=ControlReply)

    current_step: str = ""
    """The job step running now (``align``, ``fit``), or ``""``: what the operator shows it is on."""

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """A job step of the operator's (``with operator.step("fit"): ...``), logged with its
        wall time, bytes and rounds on the operator's logger; :attr:`current_step` meanwhile."""
        self.current_step = name
        try:
            with logged_step(self.logger, self.name, self.network, name):
                yield
        finally:
            self.current_step = ""

    def control_many(self, roles: list[str], action: str, per_role: Mapping[str, Mapping[str, Any]] | None = None
                     ) -> dict[str, ControlReply]:
        reqs: dict[str, Message] = {
            r: ControlRequest(action, {k: str(v) for k, v in (per_role or {}).get(r, {}).items()}) for r in roles}
        return self.call_many(reqs, expect=ControlReply)
