"""What RevFRF's parties sign (with :mod:`securetrees.signing`): canonical digests of
node records and revocation requests.

A node's provider signs ``(session, tree, node, epoch, T1, T2)`` when it uploads the
node's encrypted split (FOS-Find line 8) and again at each new forest epoch; a
participant signs ``(session, participant, epoch, level, nonce)`` to ask for its
revocation (FRF-Revoc line 1).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from securetrees.protocols.revfrf.errors import RevocationRefused
from securetrees.protocols.revfrf.messages import RevokeRequest
from securetrees.signing import verify

__all__ = ["node_message", "revocation_message", "verify_revocation"]


def _int_field(v: int) -> bytes:
    raw = int(v).to_bytes((int(v).bit_length() + 8) // 8 or 1, "big", signed=True)
    return len(raw).to_bytes(4, "big") + raw


def _bytes_field(b: bytes) -> bytes:
    return len(b).to_bytes(4, "big") + b


def node_message(session: bytes, tree: int, node: int, epoch: int, t1: int, t2: int) -> bytes:
    """What a provider signs for one node: domain, session, tree, node, epoch, T1, T2 (hashed)."""
    h = hashlib.sha256(b"securetrees/revfrf/node/v1")
    h.update(_bytes_field(session))
    for v in (tree, node, epoch, t1, t2):
        h.update(_int_field(v))
    return h.digest()


def revocation_message(session: bytes, participant: str, epoch: int, level: int, nonce: bytes) -> bytes:
    """What a participant signs to ask for its own revocation."""
    h = hashlib.sha256(b"securetrees/revfrf/revoke/v1")
    h.update(_bytes_field(session))
    h.update(_bytes_field(participant.encode()))
    h.update(_int_field(epoch))
    h.update(_int_field(level))
    h.update(_bytes_field(nonce))
    return h.digest()


def verify_revocation(verify_keys: Mapping[str, bytes], session: bytes, msg: RevokeRequest) -> None:
    """FRF-Revoc line 2 (at the CS, the CC, the KGC and each remaining participant): the
    request is signed by the registered key of the participant it names.  Raises
    :class:`RevocationRefused` otherwise.  Reveals nothing beyond the request itself."""
    key = verify_keys.get(msg.participant)
    if key is None:
        raise RevocationRefused(f"no verification key registered for {msg.participant!r}")
    verify(key, msg.signature, revocation_message(session, msg.participant, msg.epoch, msg.level, msg.nonce),
           RevocationRefused, "revocation request")
