"""Shared fixtures for the DT-PKC tests: the cached deterministic 512-bit test keys."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from securetrees.rand import SYSTEM_RANDOM
from securetrees.testing.dtpkc import DTPKCTestKeys, dtpkc_test_keys


@pytest.fixture(scope="session")
def keys() -> DTPKCTestKeys:
    return dtpkc_test_keys(512)


class ScriptedRandom:
    """A RandomSource whose first ``randbelow`` answers are scripted (then the OS CSPRNG):
    lets a test pin the coin α, the blinding r or the encryption randomness."""

    def __init__(self, *values: int) -> None:
        self.values = list(values)

    def randbelow(self, n: int, /) -> int:
        if self.values:
            v = self.values.pop(0)
            if not 0 <= v < n:
                raise ValueError(f"scripted value {v} outside [0, {n})")
            return v
        return SYSTEM_RANDOM.randbelow(n)

    def randbits(self, k: int, /) -> int:
        return SYSTEM_RANDOM.randbits(k)

    def token_bytes(self, k: int, /) -> bytes:
        return SYSTEM_RANDOM.token_bytes(k)


@pytest.fixture
def scripted() -> Iterator[type[ScriptedRandom]]:
    yield ScriptedRandom
