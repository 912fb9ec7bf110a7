"""Regression tests for the RevFRF appendix errata (specs/dtpkc.md "Errata").

Each erratum is implemented here, inside the test, exactly as printed, and shown to give
wrong answers on known inputs where the library gives right ones.
"""

from __future__ import annotations

import pytest

from securetrees._nt import invert, mpz, powmod
from securetrees.dtpkc import Ciphertext, WeakSecretKey, decrypt_strong, encrypt
from securetrees.dtpkc.keys import PublicKey
from securetrees.dtpkc.scheme import PartialDecryption, l_function, psdec2_residue
from securetrees.dtpkc.twoserver import HoLTParams, holt_blind, holt_decide, holt_finish
from securetrees.errors import InvalidCiphertext
from securetrees.testing.dtpkc import ScriptedRandom, dtpkc_test_keys

KEYS = dtpkc_test_keys(512)
N, N2 = KEYS.params.n, KEYS.params.n2
OUT = KEYS.pk("cs").joint(KEYS.pk("u2"))


def _strong_residue(t1: mpz) -> mpz:
    return psdec2_residue(KEYS.cc_share, PartialDecryption(int(t1), int(KEYS.cs_share.t1_pow(t1))))


def seed_doubling_holt(m1: int, m2: int, alpha: int) -> int:
    """E1 as printed: ``[[2m1+1]] = [[m1]]²·[[m1]]·[[1]]`` (which is [[3m1+1]]), then the
    rest of HoLT done right (threshold rule, r = 1)."""
    c1, c2 = encrypt(KEYS.pk("u1"), m1), encrypt(KEYS.pk("u2"), m2)
    a = c1.t1 * c1.t1 * c1.t1 % N2 * (1 + N) % N2
    b = c2.t1 * c2.t1 % N2
    d = a * invert(b, N2) % N2 if alpha == 1 else b * invert(a, N2) % N2
    u = int(_strong_residue(d) > N // 2)
    return u if alpha == 1 else 1 - u


def library_holt(m1: int, m2: int, alpha: int, params: HoLTParams | None = None, *, top: bool = False) -> int:
    """The library's HoLT with the coin pinned; ``top`` pins ρ and ν at the top of their ranges."""
    params = params or HoLTParams()
    c1, c2 = encrypt(KEYS.pk("u1"), m1), encrypt(KEYS.pk("u2"), m2)
    script = (alpha, params.spread - 1, (1 << (params.sigma + params.spread - 2)) - 1, 0,
              2 * params.nu_bound) if top else (alpha,)
    pend, part = holt_blind(KEYS.cs_share, c1, c2, OUT, params=params, rng=ScriptedRandom(*script))
    return decrypt_strong(KEYS.strong, holt_finish(pend, holt_decide(KEYS.cc_share, part, OUT, params=params)))


@pytest.mark.parametrize(("m1", "m2"), [(-5, -5), (10, 12)])
@pytest.mark.parametrize("alpha", [0, 1])
def test_e1_printed_doubling_is_wrong_and_the_fix_is_right(m1: int, m2: int, alpha: int) -> None:
    truth = int(m1 < m2)
    assert seed_doubling_holt(m1, m2, alpha) != truth
    assert library_holt(m1, m2, alpha) == truth


def _encrypt_with(pk: PublicKey, m: int, r: int) -> Ciphertext:
    """HoEnc with a chosen randomness r (encrypt draws r - 1 + 1 from the scripted source)."""
    return encrypt(pk, m, rng=ScriptedRandom(r - 1))


def seed_strong_decrypt(c: Ciphertext) -> int:
    """E6: strong decryption with λ' = lcm(p-1, q-1)/2."""
    lam_half = KEYS.strong.lam // 2
    x = l_function(powmod(c.t1, lam_half, N2), N)
    return int(x * invert(lam_half, N) % N)


@pytest.mark.parametrize("m", [0, 1, 12345, -9])
def test_e6_half_lcm_strong_key_fails_exactly_when_theta_r_is_odd(m: int) -> None:
    odd_theta = WeakSecretKey(PublicKey(KEYS.params, powmod(KEYS.params.g, 1001, N2)), mpz(1001))
    even_theta = WeakSecretKey(PublicKey(KEYS.params, powmod(KEYS.params.g, 1000, N2)), mpz(1000))
    odd = _encrypt_with(odd_theta.public, m, 77)
    with pytest.raises(InvalidCiphertext):
        seed_strong_decrypt(odd)  # T1^(λ/2) = -(1 + m(λ/2)N): L() is not defined
    assert decrypt_strong(KEYS.strong, odd) == m
    for sk, r in ((odd_theta, 78), (even_theta, 77), (even_theta, 78)):  # θ·r even: it works
        c = _encrypt_with(sk.public, m, r)
        assert seed_strong_decrypt(c) % N == m % N
        assert decrypt_strong(KEYS.strong, c) == m


def seed_bit_length_decide(beta: mpz) -> int:
    """E3: u = 1 iff ||β'|| > ||N||/2."""
    return int(beta.bit_length() > N.bit_length() // 2)


def seed_blinded(m1: int, m2: int, r: int) -> mpz:
    """The seed's blinded value ``β' = r·(2(m1 - m2) + 1)`` as the CC decrypts it (α = 1)."""
    return _strong_residue(encrypt(KEYS.pk("u1"), r * (2 * (m1 - m2) + 1)).t1)


def test_e3_bit_length_rule_holds_at_its_bound_and_fails_one_bit_past_it() -> None:
    quarter = N.bit_length() // 4 - 1  # the seed's bound: ||R1||, ||r|| <= ||N||/4 - 1 = 127 here
    r1, r = 1 << quarter, (1 << quarter) - 1
    for m1, m2 in ((r1 - 1, -(r1 - 1)), (-(r1 - 1), r1 - 1), (3, 3)):
        beta = seed_blinded(m1, m2, r)
        assert seed_bit_length_decide(beta) == int(m1 < m2)
        assert int(beta > N // 2) == int(m1 < m2)  # the threshold rule agrees there
    # one bit past: 128-bit inputs and a 128-bit r
    m1, m2, r = (1 << 128) - 1, -((1 << 128) - 1), (1 << 128) - 1
    beta = seed_blinded(m1, m2, r)
    assert seed_bit_length_decide(beta) != int(m1 < m2)  # the printed rule is wrong
    assert int(beta > N // 2) == int(m1 < m2)  # the threshold rule is right
    # and the library, with ρ and ν at the top of their ranges and the extreme inputs
    for alpha in (0, 1):
        assert library_holt(m1, m2, alpha, top=True) == int(m1 < m2)
        assert library_holt(m2, m1, alpha, top=True) == int(m2 < m1)
