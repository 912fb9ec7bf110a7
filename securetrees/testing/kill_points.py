"""Kill points: a role of an in-process run dies at one chosen delivery, for the resume tests.

Each protocol's ``tests/<protocol>/test_kill_points.py`` fits once on a :class:`KillNet` to log every
delivery, then, for each delivery of the window it tests and each of its two roles, fits again on a
:class:`KillNet` given a :class:`Kill` there: the role dies before the receiver handles the message
(the message is lost) or right after (the reply is lost), and the call raises
(:meth:`KillNet.death`).  The other roles keep what they hold in memory, as processes that did not
die do; the test builds the dead role again from its own checkpoint files (registering it under the
same name replaces the dead one, as its restarted process), resumes, and compares the model with
the uninterrupted run's.  The multi-process counterpart is :mod:`securetrees.testing.interrupt`.
"""

from __future__ import annotations

from dataclasses import dataclass

from securetrees.errors import PartyUnavailable
from securetrees.runtime import InProcessNetwork, Message, Party

__all__ = ["Kill", "KillNet"]


@dataclass(frozen=True)
class Kill:
    """Where a role dies: at delivery number ``at`` of the run (counted from 0 on its network)."""

    at: int
    victim: str
    after: bool
    """False: it dies before the receiver handles the message; True: after (the reply is lost)."""


class KillNet(InProcessNetwork):
    """An in-process network whose ``kill`` makes a role die at one delivery (once); ``log`` holds
    every delivery ``(sender, receiver, message)`` and ``replies`` the reply to each (``None``
    when there was none or the receiver died before handling it).  A party registered under a name
    already taken replaces the one registered before."""

    def __init__(self, kill: Kill | None = None) -> None:
        super().__init__()
        self.kill = kill
        self.log: list[tuple[str, str, Message]] = []
        self.replies: list[Message | None] = []

    def register(self, party: Party) -> None:
        self._parties[party.name] = party

    def death(self, victim: str) -> Exception:
        """What the delivery raises when ``victim`` dies: :class:`PartyUnavailable`, as a caller
        sees a peer whose process is gone.  A test whose driving role must stop where a peer's
        death would be survived overrides it."""
        return PartyUnavailable(f"{victim} died")

    def _deliver(self, round_: int, sender: str, receiver: str, msg: Message) -> Message | None:
        k, kill = len(self.log), self.kill
        self.log.append((sender, receiver, msg))
        self.replies.append(None)
        if kill is not None and kill.at == k and not kill.after:
            self.kill = None
            raise self.death(kill.victim)
        reply = super()._deliver(round_, sender, receiver, msg)
        self.replies[k] = reply
        if kill is not None and kill.at == k:
            self.kill = None
            raise self.death(kill.victim)
        return reply
