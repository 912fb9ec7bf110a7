"""Test-only checks on X25519 u-coordinates (the PSI's points), independent of the code under test.

:func:`in_prime_order_subgroup` maps a u-coordinate back to Ed25519 with the birational map
``y = (u - 1)/(u + 1)`` (field arithmetic done here, in a test helper, only to *check* points;
the library itself never does curve arithmetic) and lets libsodium decide whether that point is
on the curve and in the subgroup of prime order ℓ.  :func:`on_twist` is Euler's criterion on
``u³ + A·u² + u``; :func:`u_of_edwards` the forward map without any check.
"""

from __future__ import annotations

from typing import Final

import nacl.bindings as sodium

__all__ = ["FIELD_PRIME", "MONTGOMERY_A", "in_prime_order_subgroup", "on_twist", "u_of_edwards"]

FIELD_PRIME: Final = 2**255 - 19
MONTGOMERY_A: Final = 486662


def in_prime_order_subgroup(u_bytes: bytes) -> bool:
    """Whether ``u_bytes`` is the canonical u-coordinate of a point of order ℓ on Curve25519."""
    if len(u_bytes) != 32:
        return False
    u = int.from_bytes(u_bytes, "little")
    if u >= FIELD_PRIME or (u + 1) % FIELD_PRIME == 0:
        return False
    y = (u - 1) * pow(u + 1, -1, FIELD_PRIME) % FIELD_PRIME
    edwards = y.to_bytes(32, "little")  # sign bit 0: either sign names the same u
    if not sodium.crypto_core_ed25519_is_valid_point(edwards):
        return False
    back: bytes = sodium.crypto_sign_ed25519_pk_to_curve25519(edwards)
    return back == u_bytes


def on_twist(u: int) -> bool:
    """Whether ``u`` is the u-coordinate of a point on the quadratic twist of Curve25519."""
    p = FIELD_PRIME
    rhs = (u**3 + MONTGOMERY_A * u * u + u) % p
    return rhs != 0 and pow(rhs, (p - 1) // 2, p) == p - 1


def u_of_edwards(edwards: bytes) -> bytes:
    """``u = (1 + y)/(1 - y)`` of an Ed25519 encoding, with no check of the point at all (unlike
    libsodium's map): to build test points outside the prime-order subgroup."""
    p = FIELD_PRIME
    y = int.from_bytes(edwards, "little") & ((1 << 255) - 1)
    u = (1 + y) * pow(1 - y, -1, p) % p
    return u.to_bytes(32, "little")
