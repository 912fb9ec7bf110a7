"""Wire messages of private set intersection (``specs/psi.md``); wire names ``psi.<step>``.

Points travel as one ``bytes`` blob of 32-byte X25519 u-coordinates per chunk, so a message
stays far below gRPC's limits whatever the set size (``chunk_size`` points per message).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from securetrees.runtime import Message, message

__all__ = ["LEADER_ROLE", "MEMBER_ROLE", "Exchange", "ExchangeReply", "Hello", "HelloReply", "Result"]

LEADER_ROLE = "psi_leader"
MEMBER_ROLE = "psi_member"


@message("psi.hello", sender=LEADER_ROLE, receiver=MEMBER_ROLE)
@dataclass(frozen=True)
class Hello(Message):
    """Leader → member: a fresh session id (domain separation of this run's hash), the
    leader's set size and the chunk size.  Reveals the leader's set size."""

    session: bytes
    leader_size: int
    chunk_size: int


@message("psi.hello_reply", reply_to=Hello)
@dataclass(frozen=True)
class HelloReply(Message):
    """Member → leader: the member's set size.  Reveals it."""

    member_size: int


@message("psi.exchange", sender=LEADER_ROLE, receiver=MEMBER_ROLE)
@dataclass(frozen=True)
class Exchange(Message):
    """Leader → member: chunk ``index`` of ``a·H(x)`` over the leader's ids, in its row order
    (empty once the leader's chunks are exhausted).  Reveals nothing but the count (DDH)."""

    index: int
    points: bytes


@message("psi.exchange_reply", reply_to=Exchange)
@dataclass(frozen=True)
class ExchangeReply(Message):
    """Member → leader: ``b·(a·H(x))`` for the chunk received, in the same order, and chunk
    ``index`` of ``b·H(y)`` over the member's ids in a secret random order (empty once
    exhausted).  Reveals the double-blinded values (compared, never inverted) and counts."""

    index: int
    double: bytes
    own: bytes


@message("psi.result.notice", sender=LEADER_ROLE, receiver=MEMBER_ROLE)
@dataclass(frozen=True)
class Result(Message):
    """Leader → member: the agreed order of the global intersection, as positions in the
    member's shuffled list.  Reveals which of the member's ids are in every party's set."""

    positions: np.ndarray
