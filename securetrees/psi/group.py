"""The group of private set intersection: Ed25519's prime-order subgroup, through libsodium only.

Every group operation is a libsodium call through PyNaCl's low-level bindings; this module
does no curve arithmetic of its own (``specs/psi.md``, "Group").

* :func:`hash_ids`: ``H(x) = from_uniform(h[:32]) + from_uniform(h[32:])`` with
  ``h = SHA-512(domain || session || id)``: two independent Elligator 2 images added, the
  random-oracle form (one image alone reaches only about half of the group, non-uniformly).
  ``from_uniform`` clears the cofactor, so ``H(x)`` lies in the subgroup of order ℓ.
* :func:`random_scalar`: ``scalar_reduce`` of 64 fresh random bytes (statistically uniform
  mod ℓ), drawn again in the negligible case that it is zero.
* :func:`blind`: ``crypto_scalarmult_ed25519_noclamp``, which refuses a non-canonical
  encoding, a point not on the curve, of small order (the identity included) or outside the
  prime-order subgroup, and a zero result; a refusal raises :class:`PointRefusedError`.

Points travel as one ``bytes`` blob of 32-byte encodings (:func:`split_points`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Final

import nacl.bindings as sodium
import nacl.exceptions

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
]

POINT_BYTES: Final = sodium.crypto_core_ed25519_BYTES  # 32
SCALAR_BYTES: Final = sodium.crypto_core_ed25519_SCALARBYTES  # 32
SESSION_BYTES: Final = 16
DOMAIN: Final = b"securetrees.psi.v1.hash-to-ed25519"
"""Domain separation: no other hash of the library has this prefix."""

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
    """``H(x)`` for each canonical id (see the module docstring).  Reveals nothing: local."""
    _check_session(session)
    prefix = hashlib.sha512(DOMAIN + len(session).to_bytes(1, "big") + session)
    from_uniform, add = sodium.crypto_core_ed25519_from_uniform, sodium.crypto_core_ed25519_add
    out = []
    for x in encoded:
        h = prefix.copy()
        h.update(x)
        d = h.digest()
        out.append(add(from_uniform(d[:32]), from_uniform(d[32:])))
    return out


def random_scalar(rng: RandomSource = SYSTEM_RANDOM) -> bytes:
    """A blinding scalar: ``scalar_reduce`` of 64 random bytes, never zero.  Fresh per run and
    per peer; it never leaves the party."""
    while True:
        s: bytes = sodium.crypto_core_ed25519_scalar_reduce(rng.token_bytes(64))
        if any(s):
            return s


def blind(scalar: bytes, points: Sequence[bytes]) -> list[bytes]:
    """``scalar · P`` for each point, by libsodium; a point it refuses raises
    :class:`PointRefusedError` (the run aborts, nothing is dropped)."""
    if not isinstance(scalar, bytes) or len(scalar) != SCALAR_BYTES or not any(scalar):
        raise ParameterError("a blinding scalar is 32 non-zero bytes")
    mult = sodium.crypto_scalarmult_ed25519_noclamp
    try:
        return [mult(scalar, p) for p in points]
    except nacl.exceptions.RuntimeError:
        raise PointRefusedError("libsodium refused a point: not canonical, not on the curve, of small order, "
                                "outside the prime-order subgroup, or giving the identity") from None
    except (nacl.exceptions.TypeError, nacl.exceptions.ValueError) as exc:
        raise DecodeError(f"a point is not {POINT_BYTES} bytes: {exc}") from None


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
