"""The group of private set intersection: Curve25519 through libsodium only (X25519 blinding).

Every group operation is a libsodium call through PyNaCl's low-level bindings; this module
does no curve arithmetic of its own (``specs/psi.md``, "Group").  Points are X25519
u-coordinates of points of the subgroup of prime order ℓ (a point and its negative share one).

* :func:`hash_ids`: ``H(x) = to_curve25519(from_uniform(h[:32]) + from_uniform(h[32:]))`` with
  ``h = SHA-512(domain || session || id)``: two independent Elligator 2 images added on Ed25519,
  the random-oracle form (one image alone reaches only about half of the group, non-uniformly);
  ``from_uniform`` clears the cofactor, so the sum lies in the subgroup of order ℓ, and
  ``crypto_sign_ed25519_pk_to_curve25519`` (libsodium's birational map, with its own subgroup
  check) gives its u-coordinate.
* :func:`random_scalar`: ``scalar_reduce`` of 64 fresh random bytes (statistically uniform
  mod ℓ), drawn again in the case (probability below 2^-126) that it has no X25519 encoding.
* :func:`x25519_scalar`: the 32 bytes ``8·t`` with ``t ≡ ±s/8 (mod ℓ)`` in ``[2^251, 2^252)``:
  X25519's clamping leaves them unchanged, so X25519 multiplies by exactly ``±s`` on the
  subgroup, and the sign does not show on a u-coordinate.
* :func:`blind`: ``crypto_scalarmult`` (X25519) by that encoding.  A non-canonical encoding
  (libsodium would reduce it) and a point libsodium refuses (small order: its result is all
  zeros) raise :class:`PointRefusedError`: the run aborts, nothing is dropped.

Points travel as one ``bytes`` blob of 32-byte u-coordinates (:func:`split_points`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Final

import nacl.bindings as sodium
import nacl.exceptions
import numpy as np

from securetrees.errors import DecodeError, DuplicateIdError, ParameterError, PointRefusedError, SetSizeError
from securetrees.rand import SYSTEM_RANDOM, RandomSource

__all__ = [
    "DOMAIN",
    "POINT_BYTES",
    "SESSION_BYTES",
    "Id",
    "blind",
    "encode_id",
    "encode_ids",
    "hash_ids",
    "join_points",
    "random_scalar",
    "split_points",
    "x25519_scalar",
]

POINT_BYTES: Final = sodium.crypto_scalarmult_BYTES  # 32: an X25519 u-coordinate
SCALAR_BYTES: Final = sodium.crypto_core_ed25519_SCALARBYTES  # 32
SESSION_BYTES: Final = 16
DOMAIN: Final = b"securetrees.psi.v2.hash-to-curve25519"
"""Domain separation: no other hash of the library has this prefix (v1 was the Ed25519 form)."""

_INV8: Final[bytes] = sodium.crypto_core_ed25519_scalar_invert((8).to_bytes(SCALAR_BYTES, "little"))
_CLAMPED_LOW: Final = 1 << 251
"""An X25519 scalar is ``8·t`` with ``t`` in ``[2^251, 2^252)`` once clamped."""
_P_LOW_BYTE: Final = 0xED
"""``p = 2^255 - 19`` is ``ed ff .. ff 7f`` little-endian: the lowest non-canonical u-coordinate."""


Id = str | bytes | int
"""A row id: text, raw bytes or an integer; each kind is tagged, so ``"7"``, ``b"7"`` and
``7`` are three different ids."""


def encode_id(value: Id) -> bytes:
    """The canonical bytes of one id: a kind tag (``s``, ``b``, ``i``) then its content."""
    if isinstance(value, bool):
        raise ParameterError("a row id is a str, bytes or int, not a bool")
    if isinstance(value, str):
        return b"s" + value.encode("utf-8")
    if isinstance(value, (bytes, bytearray)):
        return b"b" + bytes(value)
    if isinstance(value, int):
        return b"i" + str(value).encode("ascii")
    raise ParameterError(f"a row id is a str, bytes or int, not {type(value).__name__}")


def encode_ids(ids: Iterable[Id], max_set_size: int) -> list[bytes]:
    """Canonical bytes of each id; raises :class:`SetSizeError` above ``max_set_size`` and
    :class:`DuplicateIdError` if an id repeats."""
    out = [encode_id(v) for v in ids]
    if len(out) > max_set_size:
        raise SetSizeError(f"{len(out)} ids exceed the run's max_set_size {max_set_size}")
    if len(set(out)) != len(out):
        raise DuplicateIdError("the id set holds the same id more than once")
    return out


def _check_session(session: bytes) -> None:
    if not isinstance(session, bytes) or len(session) != SESSION_BYTES:
        raise ParameterError(f"the session id is {SESSION_BYTES} bytes")


def hash_ids(session: bytes, encoded: Sequence[bytes]) -> list[bytes]:
    """``H(x)`` for each canonical id (see the module docstring).  Reveals nothing: local.

    Raises :class:`PointRefusedError` if libsodium refuses a sum (the two images cancel or
    meet in a small-order point: probability about 2^-250 per id)."""
    _check_session(session)
    prefix = hashlib.sha512(DOMAIN + len(session).to_bytes(1, "big") + session)
    from_uniform, add = sodium.crypto_core_ed25519_from_uniform, sodium.crypto_core_ed25519_add
    to_curve = sodium.crypto_sign_ed25519_pk_to_curve25519
    out = []
    try:
        for x in encoded:
            h = prefix.copy()
            h.update(x)
            d = h.digest()
            out.append(to_curve(add(from_uniform(d[:32]), from_uniform(d[32:]))))
    except nacl.exceptions.RuntimeError:
        raise PointRefusedError("libsodium refused the hash of an id (a small-order sum)") from None
    return out


def x25519_scalar(scalar: bytes) -> bytes | None:
    """The X25519 encoding of a reduced scalar ``s``: ``8·t`` (32 bytes, little-endian) with
    ``t ≡ ±s·8⁻¹ (mod ℓ)`` in ``[2^251, 2^252)``, the sign that lands there.  Clamping (clear
    bits 0-2 and 255, set bit 254) leaves such bytes unchanged, so X25519 by them maps the
    u-coordinate of ``P`` to that of ``±s·P = s·P`` up to sign, for every ``P`` of order ℓ.
    ``None`` when neither sign lands in the range (``s = 0``, or with probability below
    2^-126 for a uniform ``s``).  The scalar arithmetic is libsodium's."""
    t = sodium.crypto_core_ed25519_scalar_mul(scalar, _INV8)
    for c in (t, sodium.crypto_core_ed25519_scalar_negate(t)):
        v = int.from_bytes(c, "little")
        if _CLAMPED_LOW <= v < 2 * _CLAMPED_LOW:
            return (8 * v).to_bytes(SCALAR_BYTES, "little")
    return None


def random_scalar(rng: RandomSource = SYSTEM_RANDOM) -> bytes:
    """A blinding scalar: ``scalar_reduce`` of 64 random bytes, drawn again while it has no
    X25519 encoding (zero included).  Fresh per run and per peer; it never leaves the party."""
    while True:
        s: bytes = sodium.crypto_core_ed25519_scalar_reduce(rng.token_bytes(64))
        if x25519_scalar(s) is not None:
            return s


def _check_points(points: Sequence[bytes]) -> None:
    """:class:`DecodeError` unless every point is 32 bytes; :class:`PointRefusedError` for a
    non-canonical u-coordinate (bit 255 set, or at least ``p = 2^255 - 19``), which X25519
    would silently reduce: one value, one encoding on the wire."""
    if not points:
        return
    if any(not isinstance(p, bytes) or len(p) != POINT_BYTES for p in points):
        raise DecodeError(f"a point is not {POINT_BYTES} bytes")
    a = np.frombuffer(b"".join(points), dtype=np.uint8).reshape(-1, POINT_BYTES)
    high = a[:, 31] >= 0x80
    at_least_p = (a[:, 31] == 0x7F) & (a[:, 1:31] == 0xFF).all(axis=1) & (a[:, 0] >= _P_LOW_BYTE)
    if bool((high | at_least_p).any()):
        raise PointRefusedError("a point is not a canonical u-coordinate (bit 255 set, or p or above)")


def blind(scalar: bytes, points: Sequence[bytes]) -> list[bytes]:
    """``s · P`` (u-coordinates) for each point, by libsodium's X25519 under the encoding of
    :func:`x25519_scalar`; a non-canonical encoding or a point libsodium refuses (small order:
    an all-zero result) raises :class:`PointRefusedError` (the run aborts, nothing is dropped)."""
    if not isinstance(scalar, bytes) or len(scalar) != SCALAR_BYTES or not any(scalar):
        raise ParameterError("a blinding scalar is 32 non-zero bytes")
    k = x25519_scalar(scalar)
    if k is None:
        raise ParameterError("the blinding scalar has no X25519 encoding: draw it with random_scalar")
    _check_points(points)
    mult = sodium.crypto_scalarmult
    try:
        return [mult(k, p) for p in points]
    except nacl.exceptions.RuntimeError:
        raise PointRefusedError("libsodium refused a point: of small order (an all-zero X25519 result)") from None


def split_points(blob: bytes, count: int | None = None) -> list[bytes]:
    """A blob of concatenated 32-byte points as a list; :class:`DecodeError` on a ragged blob
    or (with ``count``) a wrong number of points."""
    if not isinstance(blob, bytes) or len(blob) % POINT_BYTES:
        raise DecodeError(f"a point blob is a whole number of {POINT_BYTES}-byte points")
    n = len(blob) // POINT_BYTES
    if count is not None and n != count:
        raise DecodeError(f"expected {count} points, found {n}")
    return [blob[i:i + POINT_BYTES] for i in range(0, len(blob), POINT_BYTES)]


def join_points(points: Sequence[bytes]) -> bytes:
    """The wire blob of a list of points."""
    return b"".join(points)
