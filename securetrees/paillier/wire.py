"""Byte formats of Paillier public keys, ciphertexts and passphrase-sealed private keys.

Every format starts with a 4-byte magic and a 1-byte version, has one exact
length, and carries integers as fixed-width big-endian fields (no pickle, no
JSON numbers).  Decoders check magic, version, length and key id and raise
:class:`~securetrees.errors.DecodeError`; the value checks (range, unit) belong
to the key that receives the value.  Layouts are in ``specs/paillier.md``
("Wire format").
"""

from __future__ import annotations

import hashlib
import struct
from typing import Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from securetrees._nt import mpz
from securetrees.errors import DecodeError, ParameterError
from securetrees.rand import RandomSource

__all__ = [
    "KEY_ID_BYTES",
    "SCRYPT_LOG2_N_DEFAULT",
    "VERSION",
    "decode_ciphertext",
    "decode_public_key",
    "encode_ciphertext",
    "encode_public_key",
    "key_id",
    "open_private_key",
    "seal_private_key",
]

VERSION: Final = 1
KEY_ID_BYTES: Final = 16
MAX_MODULUS_BYTES: Final = 2048  # 16384-bit N: far above any size anyone should use

PK_MAGIC: Final = b"STPK"
CT_MAGIC: Final = b"STCT"
SK_MAGIC: Final = b"STSK"

SCRYPT_LOG2_N_DEFAULT: Final = 17
SCRYPT_LOG2_N_RANGE: Final = (14, 18)  # 16 MiB .. 256 MiB with r = 8: bounds a hostile file
SCRYPT_R: Final = 8
SCRYPT_P: Final = 1
SALT_BYTES: Final = 16
NONCE_BYTES: Final = 12

_PK_HEAD = struct.Struct(">4sBH")  # magic, version, |N| in bytes
_SK_HEAD = struct.Struct(">4sBBBB16s12s16sI")  # magic, version, log2 n, r, p, salt, nonce, key id, |pk|


def _int_bytes(x: int | mpz, width: int) -> bytes:
    return int(x).to_bytes(width, "big")


def modulus_bytes(n: int | mpz) -> int:
    """Width in bytes of N; ciphertexts and ``hs`` use twice this width."""
    return (int(n).bit_length() + 7) // 8


def key_id(n: int | mpz, hs: int | mpz) -> bytes:
    """The key id: the first 16 bytes of SHA-256 over a label, N and hs (fixed widths)."""
    w = modulus_bytes(n)
    h = hashlib.sha256(b"securetrees/paillier/public-key/v1\x00")
    h.update(struct.pack(">H", w))
    h.update(_int_bytes(n, w))
    h.update(_int_bytes(hs, 2 * w))
    return h.digest()[:KEY_ID_BYTES]


def encode_public_key(n: int | mpz, hs: int | mpz) -> bytes:
    """``STPK | version | width (u16) | N (width) | hs (2 width)``."""
    w = modulus_bytes(n)
    return _PK_HEAD.pack(PK_MAGIC, VERSION, w) + _int_bytes(n, w) + _int_bytes(hs, 2 * w)


def _check_header(data: bytes, magic: bytes, minimum: int) -> None:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise DecodeError(f"expected bytes, got {type(data).__name__}")
    if len(data) < minimum:
        raise DecodeError(f"truncated input: {len(data)} bytes, need at least {minimum}")
    if bytes(data[:4]) != magic:
        raise DecodeError(f"wrong magic: expected {magic!r}")
    if data[4] != VERSION:
        raise DecodeError(f"unsupported format version {data[4]} (this library reads {VERSION})")


def decode_public_key(data: bytes) -> tuple[mpz, mpz]:
    """``(N, hs)`` from :func:`encode_public_key` output; format checks only."""
    _check_header(data, PK_MAGIC, _PK_HEAD.size)
    _, _, w = _PK_HEAD.unpack_from(data)
    if not 1 <= w <= MAX_MODULUS_BYTES:
        raise DecodeError(f"modulus width {w} bytes is out of range")
    if len(data) != _PK_HEAD.size + 3 * w:
        raise DecodeError(f"public key must be {_PK_HEAD.size + 3 * w} bytes, got {len(data)}")
    body = bytes(data[_PK_HEAD.size :])
    if body[0] == 0:
        raise DecodeError("modulus field has a leading zero byte (non-canonical width)")
    return mpz(int.from_bytes(body[:w], "big")), mpz(int.from_bytes(body[w:], "big"))


def encode_ciphertext(kid: bytes, width: int, c: int | mpz) -> bytes:
    """``STCT | version | key id (16) | c (2 width)``."""
    return CT_MAGIC + bytes([VERSION]) + kid + _int_bytes(c, 2 * width)


def ciphertext_length(width: int) -> int:
    return 5 + KEY_ID_BYTES + 2 * width


def decode_ciphertext(data: bytes, kid: bytes, width: int) -> mpz:
    """The integer of a ciphertext encoded under the key with id ``kid``; format checks only."""
    _check_header(data, CT_MAGIC, 5)
    expected = ciphertext_length(width)
    if len(data) != expected:
        raise DecodeError(f"ciphertext must be {expected} bytes for this key, got {len(data)}")
    if bytes(data[5 : 5 + KEY_ID_BYTES]) != kid:
        raise DecodeError("ciphertext was made under another key (key id differs)")
    return mpz(int.from_bytes(bytes(data[5 + KEY_ID_BYTES :]), "big"))


def _passphrase_bytes(passphrase: str | bytes) -> bytes:
    raw = passphrase.encode("utf-8") if isinstance(passphrase, str) else bytes(passphrase)
    if not raw:
        raise ParameterError("the passphrase must not be empty")
    return raw


def _derive(passphrase: bytes, salt: bytes, log2_n: int) -> bytes:
    return Scrypt(salt=salt, length=32, n=1 << log2_n, r=SCRYPT_R, p=SCRYPT_P).derive(passphrase)


def seal_private_key(
    public_key_bytes: bytes,
    kid: bytes,
    secret: bytes,
    passphrase: str | bytes,
    *,
    rng: RandomSource,
    log2_n: int = SCRYPT_LOG2_N_DEFAULT,
) -> bytes:
    """Encrypt ``secret`` with AES-256-GCM under an scrypt key; header and key id are the AD.

    ``STSK | version | log2 n | r | p | salt | nonce | key id | |pk| (u32) | pk | AEAD(secret)``.
    """
    lo, hi = SCRYPT_LOG2_N_RANGE
    if not isinstance(log2_n, int) or not lo <= log2_n <= hi:
        raise ParameterError(f"scrypt log2 n must be an integer in [{lo}, {hi}]")
    salt = rng.token_bytes(SALT_BYTES)
    nonce = rng.token_bytes(NONCE_BYTES)
    head = _SK_HEAD.pack(
        SK_MAGIC, VERSION, log2_n, SCRYPT_R, SCRYPT_P, salt, nonce, kid, len(public_key_bytes)
    )
    ad = head + public_key_bytes
    key = _derive(_passphrase_bytes(passphrase), salt, log2_n)
    return ad + AESGCM(key).encrypt(nonce, secret, ad)


def open_private_key(data: bytes, passphrase: str | bytes) -> tuple[bytes, bytes, bytes]:
    """``(public key bytes, key id, secret)`` from :func:`seal_private_key` output.

    Raises :class:`DecodeError` on a malformed file, a wrong passphrase or any
    modified byte (the AEAD tag covers the whole header and the public key).
    """
    _check_header(data, SK_MAGIC, _SK_HEAD.size)
    raw = bytes(data)
    _, _, log2_n, r, p, salt, nonce, kid, pk_len = _SK_HEAD.unpack_from(raw)
    lo, hi = SCRYPT_LOG2_N_RANGE
    if not lo <= log2_n <= hi or r != SCRYPT_R or p != SCRYPT_P:
        raise DecodeError("unsupported scrypt parameters in the private-key file")
    body_start = _SK_HEAD.size + pk_len
    if pk_len > 8 + 3 * MAX_MODULUS_BYTES or len(raw) < body_start + 16:
        raise DecodeError("truncated private-key file")
    ad = raw[:body_start]
    key = _derive(_passphrase_bytes(passphrase), salt, log2_n)
    try:
        secret = AESGCM(key).decrypt(nonce, raw[body_start:], ad)
    except InvalidTag as exc:
        raise DecodeError("wrong passphrase, or the private-key file was modified") from exc
    return raw[_SK_HEAD.size : body_start], kid, secret
