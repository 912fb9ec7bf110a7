"""Ed25519 signing keys and verification for protocol roles.

Used where a party's statement must survive a relaying server: secure
aggregation's advertised keys and survivor sets, RevFRF's node records and
revocation requests.  Verification keys are registered out of band in the
run's roster.  Each protocol decides what bytes it signs (with its own domain
separation); this module only holds the keys and the check, which raises the
caller's typed error and never returns a bool.
"""

from __future__ import annotations

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from securetrees.errors import ParameterError, ProtocolError
from securetrees.rand import SYSTEM_RANDOM, RandomSource

__all__ = ["SigningKey", "make_roster", "verify"]


class SigningKey:
    """An Ed25519 signing key drawn from a :class:`RandomSource`; the repr shows only the
    32-byte verification key ``public``."""

    __slots__ = ("_private", "public")

    def __init__(self, private: Ed25519PrivateKey) -> None:
        self._private = private
        self.public: bytes = private.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )

    @classmethod
    def generate(cls, *, rng: RandomSource = SYSTEM_RANDOM) -> SigningKey:
        return cls(Ed25519PrivateKey.from_private_bytes(rng.token_bytes(32)))

    @classmethod
    def from_seed(cls, seed: bytes) -> SigningKey:
        """The key whose 32-byte private seed is ``seed`` (a key file's content)."""
        if not isinstance(seed, bytes) or len(seed) != 32:
            raise ParameterError("an Ed25519 seed is 32 bytes")
        return cls(Ed25519PrivateKey.from_private_bytes(seed))

    def seed(self) -> bytes:
        """The 32-byte private seed (to seal into a key file; never to send)."""
        return self._private.private_bytes_raw()

    def sign(self, message: bytes) -> bytes:
        """The signature of ``message`` (the caller's domain-separated encoding)."""
        return self._private.sign(message)

    def __repr__(self) -> str:
        return f"SigningKey(public={self.public.hex()[:16]}...)"


def verify(
    public: bytes, signature: bytes, message: bytes,
    error: type[ProtocolError] = ProtocolError, what: str = "message",
) -> None:
    """Raise ``error`` unless ``signature`` signs ``message`` under the verification key ``public``."""
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(signature, message)
    except (InvalidSignature, ValueError) as exc:
        raise error(f"invalid signature on {what}") from exc


def make_roster(
    names: list[str] | tuple[str, ...], *, rng: RandomSource = SYSTEM_RANDOM
) -> tuple[dict[str, bytes], dict[str, SigningKey]]:
    """Fresh signing keys for ``names``: the public roster and each party's private key."""
    if len(set(names)) != len(names):
        raise ParameterError("roster names must be distinct")
    keys = {name: SigningKey.generate(rng=rng) for name in names}
    return {name: key.public for name, key in keys.items()}, keys
