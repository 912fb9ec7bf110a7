"""Passphrase sealing: the one envelope for every secret the library writes to disk.

Paillier private keys, DT-PKC secret keys and shares, and a deployment's key files
(:mod:`securetrees.net.keyfile`) are all sealed here, with one scrypt cost cap and one
check of it::

    "STSK" | version 1 | log2 n | r | p | salt (16) | nonce (12) | key id (16)
           | label length (u32) | label | AES-256-GCM(secret)

The key is scrypt(passphrase, salt, n = 2^log2 n, r, p); the associated data is
everything before the AEAD output, so a modified header, key id or label fails
authentication.  The *label* says what the secret is (a Paillier public key, a DT-PKC
format tag, a key-file tag); the caller checks it.  Opening checks the scrypt
parameters against the cap *before* running scrypt: a hostile header cannot make the
reader spend more than the cap's memory and time.  Layout in ``specs/paillier.md``
("Wire format").
"""

from __future__ import annotations

import struct
from typing import Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from securetrees.errors import DecodeError, ParameterError
from securetrees.rand import RandomSource

__all__ = [
    "KEY_ID_BYTES",
    "MAX_LABEL_BYTES",
    "SCRYPT_LOG2_N_DEFAULT",
    "SCRYPT_LOG2_N_RANGE",
    "check_scrypt_cost",
    "open_sealed",
    "seal",
]

MAGIC: Final = b"STSK"
VERSION: Final = 1
KEY_ID_BYTES: Final = 16
SCRYPT_LOG2_N_DEFAULT: Final = 17
"""scrypt n = 2^17 with r = 8: 128 MiB and a fraction of a second per seal or open."""
SCRYPT_LOG2_N_RANGE: Final = (14, 18)
"""The cap, for sealing and opening alike: 16 MiB .. 256 MiB of scrypt memory with r = 8."""
SCRYPT_R: Final = 8
SCRYPT_P: Final = 1
SALT_BYTES: Final = 16
NONCE_BYTES: Final = 12
MAX_LABEL_BYTES: Final = 8 + 3 * 2048
"""Largest label: a Paillier public key of a 16384-bit N."""
TAG_BYTES: Final = 16

_HEAD: Final = struct.Struct(">4sBBBB16s12s16sI")  # magic, version, log2 n, r, p, salt, nonce, key id, |label|


def check_scrypt_cost(log2_n: object, r: int = SCRYPT_R, p: int = SCRYPT_P, *, opening: bool = False) -> int:
    """``log2_n`` if the scrypt parameters are within the cap; otherwise
    :class:`ParameterError` when sealing, :class:`DecodeError` when opening (``opening=True``)."""
    lo, hi = SCRYPT_LOG2_N_RANGE
    if isinstance(log2_n, int) and not isinstance(log2_n, bool) and lo <= log2_n <= hi \
            and r == SCRYPT_R and p == SCRYPT_P:
        return log2_n
    if opening:
        raise DecodeError(f"unsupported scrypt parameters (log2 n = {log2_n}, r = {r}, p = {p}); "
                          f"this library reads log2 n in [{lo}, {hi}], r = {SCRYPT_R}, p = {SCRYPT_P}")
    raise ParameterError(f"scrypt log2 n must be an integer in [{lo}, {hi}]")


def _passphrase_bytes(passphrase: str | bytes) -> bytes:
    if isinstance(passphrase, str):
        raw = passphrase.encode("utf-8")
    elif isinstance(passphrase, (bytes, bytearray, memoryview)):
        raw = bytes(passphrase)
    else:
        raise ParameterError(f"the passphrase must be str or bytes, not {type(passphrase).__name__}")
    if not raw:
        raise ParameterError("the passphrase must not be empty")
    return raw


def _derive(passphrase: bytes, salt: bytes, log2_n: int) -> bytes:
    """The AES-256 key; only ever called with a cost that passed :func:`check_scrypt_cost`."""
    return Scrypt(salt=salt, length=32, n=1 << log2_n, r=SCRYPT_R, p=SCRYPT_P).derive(passphrase)


def seal(
    label: bytes,
    kid: bytes,
    secret: bytes,
    passphrase: str | bytes,
    *,
    rng: RandomSource,
    log2_n: int = SCRYPT_LOG2_N_DEFAULT,
) -> bytes:
    """``secret`` sealed under ``passphrase``; ``label`` and the 16-byte ``kid`` travel in the
    clear and are authenticated."""
    check_scrypt_cost(log2_n)
    if not isinstance(kid, bytes) or len(kid) != KEY_ID_BYTES:
        raise ParameterError(f"the key id must be {KEY_ID_BYTES} bytes")
    if not isinstance(label, bytes) or len(label) > MAX_LABEL_BYTES:
        raise ParameterError(f"the label must be at most {MAX_LABEL_BYTES} bytes")
    raw_pass = _passphrase_bytes(passphrase)
    salt = rng.token_bytes(SALT_BYTES)
    nonce = rng.token_bytes(NONCE_BYTES)
    ad = _HEAD.pack(MAGIC, VERSION, log2_n, SCRYPT_R, SCRYPT_P, salt, nonce, kid, len(label)) + label
    return ad + AESGCM(_derive(raw_pass, salt, log2_n)).encrypt(nonce, secret, ad)


def open_sealed(data: bytes, passphrase: str | bytes) -> tuple[bytes, bytes, bytes]:
    """``(label, key id, secret)`` from :func:`seal` output.

    Raises :class:`DecodeError` on a malformed envelope, scrypt parameters over the cap
    (checked before any key derivation), a wrong passphrase or any modified byte.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise DecodeError(f"expected bytes, got {type(data).__name__}")
    raw = bytes(data)
    if len(raw) < _HEAD.size:
        raise DecodeError(f"truncated sealed key: {len(raw)} bytes, need at least {_HEAD.size}")
    magic, version, log2_n, r, p, salt, nonce, kid, label_len = _HEAD.unpack_from(raw)
    if magic != MAGIC:
        raise DecodeError(f"wrong magic: expected {MAGIC!r}")
    if version != VERSION:
        raise DecodeError(f"unsupported sealed-key version {version} (this library reads {VERSION})")
    check_scrypt_cost(log2_n, r, p, opening=True)
    body_start = _HEAD.size + label_len
    if label_len > MAX_LABEL_BYTES or len(raw) < body_start + TAG_BYTES:
        raise DecodeError("truncated sealed key")
    ad = raw[:body_start]
    key = _derive(_passphrase_bytes(passphrase), salt, log2_n)
    try:
        secret = AESGCM(key).decrypt(nonce, raw[body_start:], ad)
    except InvalidTag as exc:
        raise DecodeError("wrong passphrase, or the sealed key was modified") from exc
    return raw[_HEAD.size : body_start], kid, secret
