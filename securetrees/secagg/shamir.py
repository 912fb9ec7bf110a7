"""Shamir t-of-n secret sharing over the prime field GF(2^256 + 297) (``specs/secagg.md``).

The field holds every 32-byte secret (self-mask seeds, X25519 scalars).  Share
``x`` of a party is its 1-based index in the sorted roster.  Reconstruction
interpolates at zero from ``t`` shares and checks every further share against
the same polynomial, so a wrong share is detected whenever more than ``t``
shares arrive.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import gmpy2

from securetrees._nt import mpz
from securetrees.errors import ParameterError, ProtocolError
from securetrees.rand import SYSTEM_RANDOM, RandomSource

__all__ = ["PRIME", "SHARE_BYTES", "reconstruct", "share_from_bytes", "share_to_bytes", "split"]

PRIME = (1 << 256) + 297
SHARE_BYTES = 33
_P = mpz(PRIME)


def split(
    secret: bytes, threshold: int, xs: Sequence[int], *, rng: RandomSource = SYSTEM_RANDOM
) -> dict[int, int]:
    """Shares ``{x: f(x)}`` of a 32-byte secret with a random polynomial of degree ``t - 1``."""
    if len(secret) != 32:
        raise ParameterError("Shamir secrets here are exactly 32 bytes")
    points = list(xs)
    if len(set(points)) != len(points) or any(not 0 < x < PRIME for x in points):
        raise ParameterError("share points must be distinct non-zero field elements")
    if not 1 <= threshold <= len(points):
        raise ParameterError(f"threshold {threshold} must be in [1, {len(points)}]")
    coeffs = [mpz(int.from_bytes(secret, "big"))]
    coeffs += [mpz(rng.randbelow(PRIME)) for _ in range(threshold - 1)]
    shares: dict[int, int] = {}
    for x in points:
        acc = mpz(0)
        for c in reversed(coeffs):  # Horner
            acc = (acc * x + c) % _P
        shares[x] = int(acc)
    return shares


def _interpolate(points: Sequence[tuple[int, int]], at: int) -> mpz:
    total = mpz(0)
    for i, (xi, yi) in enumerate(points):
        num, den = mpz(1), mpz(1)
        for j, (xj, _) in enumerate(points):
            if i != j:
                num = num * (at - xj) % _P
                den = den * (xi - xj) % _P
        total = (total + yi * num * gmpy2.invert(den, _P)) % _P
    return total


def reconstruct(shares: Mapping[int, int], threshold: int) -> bytes:
    """The 32-byte secret behind at least ``threshold`` shares.

    Raises :class:`ProtocolError` if there are too few shares, if the shares do not
    lie on one polynomial of degree ``t - 1``, or if the result is not a 32-byte value.
    """
    if threshold < 1:
        raise ParameterError("threshold must be positive")
    if len(shares) < threshold:
        raise ProtocolError(f"{len(shares)} shares cannot reconstruct a {threshold}-of-n secret")
    items = sorted(shares.items())
    for x, y in items:
        if not (0 < x < PRIME and 0 <= y < PRIME):
            raise ProtocolError("a share lies outside the field")
    base = items[:threshold]
    for x, y in items[threshold:]:
        if _interpolate(base, x) != y:
            raise ProtocolError(f"share {x} is inconsistent with the others")
    value = int(_interpolate(base, 0))
    if value >> 256:
        raise ProtocolError("the reconstructed value is not a 32-byte secret")
    return value.to_bytes(32, "big")


def share_to_bytes(value: int) -> bytes:
    if not 0 <= value < PRIME:
        raise ParameterError("a share value lies in [0, PRIME)")
    return value.to_bytes(SHARE_BYTES, "big")


def share_from_bytes(data: bytes) -> int:
    if len(data) != SHARE_BYTES:
        raise ProtocolError(f"a share has {SHARE_BYTES} bytes")
    value = int.from_bytes(data, "big")
    if value >= PRIME:
        raise ProtocolError("a share lies outside the field")
    return value
