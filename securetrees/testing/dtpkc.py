"""Cached small DT-PKC keys for tests (outside the key-size policy on purpose).

Primes, generator and keys come from :class:`DeterministicRandom` streams with
fixed labels, so every run and every machine gets the same keys, and known-answer
tests can pin exact numbers.  Never use these keys to protect data.

    keys = dtpkc_test_keys(512)          # cached per size
    keys.weak["u1"], keys.cs_share, keys.cc_share, keys.strong
    kgc = dtpkc_test_kgc(512)            # a fresh KGC over the same system (for revocation)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from securetrees._nt import safe_prime_pair
from securetrees.dtpkc.keys import (
    KGC,
    PublicKey,
    StrongKeyShare,
    StrongSecretKey,
    SystemParams,
    TableCache,
    WeakSecretKey,
    generate_weak_key,
    split_strong_key,
    system_from_primes,
)
from securetrees.errors import ParameterError
from securetrees.rand import SYSTEM_RANDOM, DeterministicRandom

__all__ = [
    "TEST_PARTIES",
    "DTPKCTestKeys",
    "ScriptedRandom",
    "decode_test_public_key",
    "dtpkc_test_keys",
    "dtpkc_test_kgc",
    "dtpkc_test_system",
]

TEST_PARTIES = ("cs", "cc", "u1", "u2", "u3")
"""The parties that get a weak key in :func:`dtpkc_test_keys`."""


@dataclass(frozen=True)
class DTPKCTestKeys:
    params: SystemParams
    strong: StrongSecretKey
    cs_share: StrongKeyShare
    cc_share: StrongKeyShare
    weak: dict[str, WeakSecretKey]

    def pk(self, party: str) -> PublicKey:
        return self.weak[party].public

    def directory(self) -> dict[str, PublicKey]:
        return {name: sk.public for name, sk in self.weak.items()}


@lru_cache(maxsize=8)
def dtpkc_test_system(bits: int = 512, label: str = "dtpkc-test") -> tuple[SystemParams, StrongSecretKey]:
    """A deterministic ``bits``-bit system (N, g) and its strong key; tables off by
    default below 1024 bits, where a plain exponentiation is already cheap."""
    rng = DeterministicRandom(f"securetrees/testing/dtpkc/{label}/{bits}")
    p, q = safe_prime_pair(bits // 2, rng=rng)
    tables = TableCache(None) if bits < 1024 else TableCache()
    return system_from_primes(p, q, rng=rng, tables=tables)


@lru_cache(maxsize=8)
def dtpkc_test_keys(bits: int = 512, label: str = "dtpkc-test") -> DTPKCTestKeys:
    """The system of :func:`dtpkc_test_system` with both shares and a weak key per test party."""
    params, strong = dtpkc_test_system(bits, label)
    rng = DeterministicRandom(f"securetrees/testing/dtpkc/{label}/{bits}/keys")
    s1, s2 = split_strong_key(strong, rng=rng)
    weak = {name: generate_weak_key(params, rng=rng) for name in TEST_PARTIES}
    return DTPKCTestKeys(params, strong, s1, s2, weak)


def dtpkc_test_kgc(bits: int = 512, label: str = "dtpkc-test") -> KGC:
    """A fresh KGC (no parties yet) over the cached test system, drawing deterministically."""
    params, strong = dtpkc_test_system(bits, label)
    return KGC(params, strong, rng=DeterministicRandom(f"securetrees/testing/dtpkc/{label}/{bits}/kgc"))


def decode_test_public_key(data: bytes, params: SystemParams | None = None) -> PublicKey:
    """``wire.decode_public_key`` without the key-size policy, for the small test keys."""
    from securetrees.dtpkc.wire import _decode_public_key

    return _decode_public_key(data, params)


class ScriptedRandom:
    """A RandomSource whose first ``randbelow`` answers are scripted, then the OS CSPRNG:
    lets a test pin HoLT's coin α and blinding r, or HoEnc's r (which is ``randbelow(N/4) + 1``)."""

    def __init__(self, *values: int) -> None:
        self.values = list(values)

    def randbelow(self, n: int, /) -> int:
        if self.values:
            v = self.values.pop(0)
            if not 0 <= v < n:
                raise ParameterError(f"scripted value {v} outside [0, {n})")
            return v
        return SYSTEM_RANDOM.randbelow(n)

    def randbits(self, k: int, /) -> int:
        return SYSTEM_RANDOM.randbits(k)

    def token_bytes(self, k: int, /) -> bytes:
        return SYSTEM_RANDOM.token_bytes(k)
