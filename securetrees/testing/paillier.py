"""Test-only Paillier keys: from given primes, and small cached key pairs.

Outside the size policy on purpose, and built from
:class:`~securetrees.rand.DeterministicRandom`: never protect data with them.
Other areas' tests import :func:`small_keypair` for cheap protocol runs.
"""

from __future__ import annotations

from functools import lru_cache

import gmpy2

from securetrees._nt import is_probable_prime, mpz, random_prime
from securetrees.errors import ParameterError
from securetrees.paillier.keys import PrivateKey, PublicKey, keypair_from_factors
from securetrees.paillier.wire import decode_public_key
from securetrees.rand import DeterministicRandom, RandomSource

__all__ = ["keypair_from_primes", "load_test_public_key", "small_keypair"]


def keypair_from_primes(
    p: int, q: int, *, rng: RandomSource | None = None
) -> tuple[PublicKey, PrivateKey]:
    """A key pair with ``N = pq`` for any two distinct odd primes (no size or DJN checks).

    ``hs`` is drawn from ``rng`` (default: a fixed :class:`DeterministicRandom`), so
    the same primes give the same key.  With primes that are not 3 mod 4 the
    DJN mode still decrypts correctly; only its security argument needs them.
    """
    p_, q_ = mpz(p), mpz(q)
    if p_ == q_ or p_ < 3 or q_ < 3 or not (is_probable_prime(p_) and is_probable_prime(q_)):
        raise ParameterError("need two distinct odd primes")
    return keypair_from_factors(p_, q_, rng or DeterministicRandom(f"testing/paillier/{p}/{q}"))


@lru_cache(maxsize=8)
def small_keypair(bits: int = 512) -> tuple[PublicKey, PrivateKey]:
    """A cached DJN-ready key pair of ``bits`` bits from fixed deterministic primes."""
    if bits < 64 or bits % 2:
        raise ParameterError("bits must be even and at least 64")
    rng = DeterministicRandom(f"securetrees/testing/paillier/small/{bits}")
    half = bits // 2
    p = random_prime(half, rng=rng, congruent_3_mod_4=True)
    while True:
        q = random_prime(half, rng=rng, congruent_3_mod_4=True)
        if q != p and gmpy2.gcd(p - 1, q - 1) == 2:
            break
    return keypair_from_factors(p, q, rng)


def load_test_public_key(data: bytes) -> PublicKey:
    """Decode a public key of any size (format checks only): for tests with small keys."""
    n, hs = decode_public_key(data)
    return PublicKey._unchecked(n, hs)
