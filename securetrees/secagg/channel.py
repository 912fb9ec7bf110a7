"""Share encryption: AES-256-GCM between two parties, relayed by the server (Bonawitz et al. 2017, ShareKeys).

The key of the pair comes from their session agreement keys through
:func:`~securetrees.secagg.keyagree.derive_key` (purpose ``"share-enc"``); the
associated data binds session, round, kind of payload, sender, recipient and the
sender's round public key, so the server cannot redirect a ciphertext to another
recipient, pass it off as another sender's, replay it in another round or
session, or show the recipient another round key for the sender: each of these
fails authentication and raises :class:`~securetrees.errors.InvalidCiphertext`.
"""

from __future__ import annotations

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from securetrees.errors import InvalidCiphertext, ParameterError
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.secagg.keyagree import KEY_BYTES, encode_fields

__all__ = ["NONCE_BYTES", "associated_data", "open_sealed", "seal"]

NONCE_BYTES = 12
_TAG_BYTES = 16


def associated_data(
    session: bytes, round: int, kind: str, sender: str, recipient: str, sender_key: bytes
) -> bytes:
    """What every share ciphertext is bound to (``sender_key``: the sender's round public key)."""
    return encode_fields(
        b"securetrees/secagg/share", session, round, kind, sender, recipient, sender_key
    )


def seal(key: bytes, plaintext: bytes, ad: bytes, *, rng: RandomSource = SYSTEM_RANDOM) -> bytes:
    """``nonce || AES-256-GCM(key, nonce, plaintext, ad)`` with a random 96-bit nonce."""
    if len(key) != KEY_BYTES:
        raise ParameterError("a share-encryption key has 32 bytes")
    nonce = rng.token_bytes(NONCE_BYTES)
    return nonce + AESGCM(key).encrypt(nonce, plaintext, ad)


def open_sealed(key: bytes, blob: bytes, ad: bytes) -> bytes:
    """Decrypt and authenticate; tampered, redirected or replayed blobs raise InvalidCiphertext."""
    if len(key) != KEY_BYTES:
        raise ParameterError("a share-encryption key has 32 bytes")
    if len(blob) < NONCE_BYTES + _TAG_BYTES:
        raise InvalidCiphertext("share ciphertext is truncated")
    try:
        return AESGCM(key).decrypt(blob[:NONCE_BYTES], blob[NONCE_BYTES:], ad)
    except InvalidTag as exc:
        raise InvalidCiphertext(
            "share ciphertext failed authentication (tampered, misrouted or replayed)"
        ) from exc
