"""Fixtures for the Paillier tests: cached small keys (512 bits) and a tiny known-answer key."""

from __future__ import annotations

import pytest

from securetrees.paillier import PrivateKey, PublicKey
from securetrees.testing.paillier import keypair_from_primes, small_keypair

TINY_P = 2147483659  # both ≡ 3 (mod 4), gcd(p-1, q-1) = 2
TINY_Q = 2148532271


@pytest.fixture(scope="session")
def keys() -> tuple[PublicKey, PrivateKey]:
    return small_keypair(512)


@pytest.fixture(scope="session")
def other_keys() -> tuple[PublicKey, PrivateKey]:
    return small_keypair(520)


@pytest.fixture(scope="session")
def tiny_keys() -> tuple[PublicKey, PrivateKey]:
    return keypair_from_primes(TINY_P, TINY_Q)
