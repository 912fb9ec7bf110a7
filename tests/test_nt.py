from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from securetrees import _nt
from securetrees.errors import ParameterError
from securetrees.rand import DeterministicRandom


def test_small_primes() -> None:
    primes = _nt.small_primes(50).tolist()
    assert primes == [3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47]


@pytest.mark.parametrize("bits", [16, 64, 256, 512])
def test_safe_prime_is_safe(bits: int) -> None:
    p = _nt.safe_prime(bits, rng=DeterministicRandom(f"safe{bits}"))
    assert p.bit_length() == bits
    assert p >> (bits - 2) == 3  # top two bits set, so a product of two has exactly 2*bits bits
    assert _nt.is_probable_prime(p)
    assert _nt.is_probable_prime((p - 1) // 2)


def test_safe_prime_known_answer() -> None:
    """The search is a deterministic function of the random source."""
    a = _nt.safe_prime(128, rng=DeterministicRandom(b"kat"))
    b = _nt.safe_prime(128, rng=DeterministicRandom(b"kat"))
    assert a == b


def test_safe_prime_pair_parallel_distinct() -> None:
    p, q = _nt.safe_prime_pair(256)
    assert p != q
    for x in (p, q):
        assert x.bit_length() == 256
        assert _nt.is_probable_prime(x) and _nt.is_probable_prime((x - 1) // 2)
    assert (p * q).bit_length() == 512


@pytest.mark.parametrize("blum", [False, True])
def test_random_prime(blum: bool) -> None:
    p = _nt.random_prime(256, rng=DeterministicRandom(b"rp"), congruent_3_mod_4=blum)
    assert p.bit_length() == 256 and _nt.is_probable_prime(p)
    if blum:
        assert p % 4 == 3


@pytest.mark.parametrize("bits", [0, 8, 15])
def test_prime_sizes_refused(bits: int) -> None:
    with pytest.raises(ParameterError):
        _nt.safe_prime(bits)
    with pytest.raises(ParameterError):
        _nt.random_prime(bits)


@given(st.integers(min_value=0, max_value=2**200 - 1), st.integers(min_value=1, max_value=9))
def test_fixed_base_table_matches_powmod(e: int, window: int) -> None:
    m = 2**255 - 19
    table = _nt.FixedBaseTable.build(7, m, 200, window=window)
    assert table.pow(e) == pow(7, e, m)


def test_fixed_base_table_refuses_big_exponent() -> None:
    table = _nt.FixedBaseTable.build(3, 1009, 8)
    with pytest.raises(ParameterError):
        table.pow(256)
    with pytest.raises(ParameterError):
        table.pow(-1)


@given(st.integers(min_value=0, max_value=10**6), st.integers(min_value=1, max_value=10**6))
def test_powmod_sec_matches_pow(e: int, b: int) -> None:
    m = 1000003
    assert _nt.powmod_sec(b, e, m) == pow(b, e, m) == _nt.powmod(b, e, m)


def test_powmod_sec_rejects_negative_exponent() -> None:
    with pytest.raises(ParameterError):
        _nt.powmod_sec(3, -1, 7)


def test_sieve_never_strikes_out_small_primes() -> None:
    """Regression: a sieve prime as large as the candidate struck the candidate itself out."""
    for bits in (16, 17, 18, 20):
        assert _nt.is_probable_prime(_nt.random_prime(bits, rng=DeterministicRandom(f"small{bits}")))
        p = _nt.safe_prime(bits, rng=DeterministicRandom(f"small{bits}"))
        assert _nt.is_probable_prime((p - 1) // 2)


def test_crt_pair() -> None:
    p, q = _nt.mpz(1009), _nt.mpz(1013)
    qinv = _nt.invert(q, p)
    for x in (0, 1, 5, 1009 * 1013 - 1, 123456):
        assert _nt.crt_pair(_nt.mpz(x % p), _nt.mpz(x % q), p, q, qinv) == x


def test_invert_raises_typed_error() -> None:
    with pytest.raises(ParameterError):
        _nt.invert(6, 9)


@given(st.lists(st.integers(min_value=1, max_value=10**6), min_size=0, max_size=12))
def test_batch_invert_matches_invert(xs: list[int]) -> None:
    mod = _nt.mpz(2**61 - 1)  # prime: every value below it is a unit
    assert _nt.batch_invert([_nt.mpz(x) for x in xs], mod) == [_nt.invert(x, mod) for x in xs]


def test_batch_invert_refuses_a_non_unit() -> None:
    with pytest.raises(ParameterError):
        _nt.batch_invert([_nt.mpz(3), _nt.mpz(6), _nt.mpz(5)], _nt.mpz(36))
