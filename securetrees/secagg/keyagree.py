"""X25519 key agreement and HKDF-SHA256 key derivation bound to a context (``specs/secagg.md``).

Every symmetric key of the secure-aggregation code comes from :func:`derive_key`:
HKDF-SHA256 over the full 32-byte X25519 shared secret, salted with the public
session id and with an ``info`` string that binds the round, the purpose and the
(unordered) pair of parties.  Two purposes or two rounds never share a key, and
both ends of a pair derive the same key.
"""

from __future__ import annotations

from dataclasses import dataclass

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from securetrees.errors import ParameterError, ProtocolError
from securetrees.rand import SYSTEM_RANDOM, RandomSource

__all__ = [
    "KEY_BYTES",
    "AgreementKey",
    "KeyContext",
    "derive_key",
    "derive_own_key",
    "encode_fields",
    "public_key_bytes",
    "shared_secret",
]

KEY_BYTES = 32
_DOMAIN = b"securetrees/secagg/v1"


def encode_fields(*fields: bytes | str | int) -> bytes:
    """Unambiguous concatenation: every field is tagged and length-prefixed."""
    out = bytearray()
    for field in fields:
        if isinstance(field, bool):
            raise ParameterError("booleans are not context fields")
        if isinstance(field, int):
            if field < 0:
                raise ParameterError(f"context integers must be non-negative, got {field}")
            tag, raw = b"i", field.to_bytes((field.bit_length() + 7) // 8 or 1, "big")
        elif isinstance(field, str):
            tag, raw = b"s", field.encode()
        else:
            tag, raw = b"b", bytes(field)
        out += tag + len(raw).to_bytes(4, "big") + raw
    return bytes(out)


@dataclass(frozen=True, slots=True)
class KeyContext:
    """What a derived key is bound to: session, round, purpose and the pair of parties.

    ``pair`` is unordered (it is sorted), so both ends derive the same key.
    """

    session: bytes
    round: int
    purpose: str
    pair: tuple[str, str]

    def __post_init__(self) -> None:
        if len(self.session) < 16:
            raise ParameterError("a session id must have at least 16 bytes")
        if self.pair[0] == self.pair[1]:
            raise ParameterError("a pairwise key needs two distinct parties")
        if not self.purpose:
            raise ParameterError("a key purpose must be named")
        object.__setattr__(self, "pair", tuple(sorted(self.pair)))

    def info(self) -> bytes:
        """The HKDF ``info`` string."""
        return encode_fields(_DOMAIN, self.round, self.purpose, self.pair[0], self.pair[1])


class AgreementKey:
    """An X25519 key pair; the repr shows only the public key."""

    __slots__ = ("_private", "public")

    def __init__(self, private: X25519PrivateKey) -> None:
        self._private = private
        self.public: bytes = public_key_bytes(private.public_key())

    @classmethod
    def generate(cls, *, rng: RandomSource = SYSTEM_RANDOM) -> AgreementKey:
        """A fresh key pair; the scalar is 32 bytes from ``rng`` (clamped by X25519)."""
        return cls.from_secret(rng.token_bytes(KEY_BYTES))

    @classmethod
    def from_secret(cls, secret: bytes) -> AgreementKey:
        """The key pair of a 32-byte secret (e.g. one reconstructed from Shamir shares)."""
        if len(secret) != KEY_BYTES:
            raise ParameterError(f"an X25519 secret has {KEY_BYTES} bytes, got {len(secret)}")
        return cls(X25519PrivateKey.from_private_bytes(secret))

    def secret(self) -> bytes:
        """The raw 32-byte scalar (only for secret sharing it; never put it in a message)."""
        return self._private.private_bytes(
            serialization.Encoding.Raw,
            serialization.PrivateFormat.Raw,
            serialization.NoEncryption(),
        )

    def agree(self, peer_public: bytes) -> bytes:
        """The 32-byte X25519 shared secret with ``peer_public``."""
        return shared_secret(self._private, peer_public)

    def __repr__(self) -> str:
        return f"AgreementKey(public={self.public.hex()[:16]}...)"


def public_key_bytes(key: X25519PublicKey) -> bytes:
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def shared_secret(private: X25519PrivateKey, peer_public: bytes) -> bytes:
    """X25519; rejects malformed and low-order peer keys with :class:`ProtocolError`."""
    if not isinstance(peer_public, bytes) or len(peer_public) != KEY_BYTES:
        raise ProtocolError("an X25519 public key has exactly 32 bytes")
    try:
        return private.exchange(X25519PublicKey.from_public_bytes(peer_public))
    except ValueError as exc:  # all-zero output: a low-order point
        raise ProtocolError("peer public key is a low-order point") from exc


def derive_key(shared: bytes, context: KeyContext, *, length: int = KEY_BYTES) -> bytes:
    """HKDF-SHA256(salt = session id, ikm = full shared secret, info = context)."""
    if len(shared) != KEY_BYTES:
        raise ParameterError("the input keying material must be a 32-byte shared secret")
    return HKDF(
        algorithm=hashes.SHA256(), length=length, salt=context.session, info=context.info()
    ).derive(shared)


def derive_own_key(
    secret: bytes, *, session: bytes, round: int, purpose: str, party: str
) -> bytes:
    """HKDF-SHA256 of a party's own 32-byte secret (its self-mask seed) bound to a context."""
    if len(secret) != KEY_BYTES:
        raise ParameterError("a seed has 32 bytes")
    if len(session) < 16:
        raise ParameterError("a session id must have at least 16 bytes")
    info = encode_fields(_DOMAIN, b"own", round, purpose, party)
    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=session, info=info).derive(secret)
