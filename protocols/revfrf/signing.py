"""Ed25519 signatures over canonical byte strings: node records and revocation requests.

A node's provider signs ``(session, tree, node, epoch, T1, T2)`` when it uploads the
node's encrypted split (FOS-Find line 8) and again at each new forest epoch; a
participant signs ``(session, participant, epoch, level, nonce)`` to ask for its
revocation (FRF-Revoc line 1).  Verification raises the caller's typed error, never
returns a bool.
"""

from __future__ import annotations

import hashlib

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from securetrees.errors import ProtocolError

__all__ = [
    "SigningKey",
    "node_message",
    "revocation_message",
    "verify",
    "verify_key_bytes",
]

SigningKey = Ed25519PrivateKey


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


def verify_key_bytes(key: SigningKey) -> bytes:
    """The 32-byte raw Ed25519 public key registered at set-up."""
    return key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def verify(
    public: bytes, signature: bytes, data: bytes, error: type[ProtocolError], what: str
) -> None:
    """Verify ``signature``; raise ``error`` (a ProtocolError subclass) if it does not hold."""
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(signature, data)
    except (InvalidSignature, ValueError) as exc:
        raise error(f"invalid signature on {what}") from exc
