"""Byte formats of Paillier public keys and ciphertexts (private keys are sealed by
:mod:`securetrees.sealing`).

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

from securetrees._nt import mpz
from securetrees.errors import DecodeError

__all__ = [
    "KEY_ID_BYTES",
    "VERSION",
    "decode_ciphertext",
    "decode_public_key",
    "encode_ciphertext",
    "encode_public_key",
    "key_id",
]

VERSION: Final = 1
KEY_ID_BYTES: Final = 16
MAX_MODULUS_BYTES: Final = 2048  # 16384-bit N: far above any size anyone should use

PK_MAGIC: Final = b"STPK"
CT_MAGIC: Final = b"STCT"

_PK_HEAD = struct.Struct(">4sBH")  # magic, version, |N| in bytes


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
