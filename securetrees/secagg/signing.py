"""Ed25519 signatures: advertised keys and the consistency round (Bonawitz et al. 2017, malicious model).

Each party's verification key is registered out of band in the run's roster, so
the relaying server can neither substitute a party's advertised keys nor show
different survivor sets to different parties without being caught.
"""

from __future__ import annotations

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from securetrees.errors import ParameterError, ProtocolError
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.secagg.keyagree import encode_fields

__all__ = ["SigningKey", "make_roster", "verify"]


class SigningKey:
    """An Ed25519 signing key; the repr shows only the verification key."""

    __slots__ = ("_private", "public")

    def __init__(self, private: Ed25519PrivateKey) -> None:
        self._private = private
        self.public: bytes = private.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )

    @classmethod
    def generate(cls, *, rng: RandomSource = SYSTEM_RANDOM) -> SigningKey:
        return cls(Ed25519PrivateKey.from_private_bytes(rng.token_bytes(32)))

    def sign(self, *fields: bytes | str | int) -> bytes:
        """Sign the unambiguous encoding of ``fields``."""
        return self._private.sign(encode_fields(b"securetrees/secagg/sig", *fields))

    def __repr__(self) -> str:
        return f"SigningKey(public={self.public.hex()[:16]}...)"


def verify(public: bytes, signature: bytes, *fields: bytes | str | int) -> None:
    """Raise :class:`ProtocolError` unless ``signature`` signs ``fields`` under ``public``."""
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(
            signature, encode_fields(b"securetrees/secagg/sig", *fields)
        )
    except (InvalidSignature, ValueError) as exc:
        raise ProtocolError("invalid signature") from exc


def make_roster(
    names: list[str] | tuple[str, ...], *, rng: RandomSource = SYSTEM_RANDOM
) -> tuple[dict[str, bytes], dict[str, SigningKey]]:
    """Fresh signing keys for ``names``: the public roster and each party's private key."""
    if len(set(names)) != len(names):
        raise ParameterError("roster names must be distinct")
    keys = {name: SigningKey.generate(rng=rng) for name in names}
    return {name: key.public for name, key in keys.items()}, keys

