"""Key separation in DT-PKC: one weak key does not open another's ciphertexts, one
strong-key share decrypts nothing, and a revoked key stops being served."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from securetrees._nt import invert, mpz
from securetrees.dtpkc import Ciphertext, decrypt_weak, encrypt, hencref, parhdec2, psdec1, psdec2
from securetrees.dtpkc.scheme import PartialDecryption, l_function
from securetrees.errors import InvalidCiphertext, KeyMismatchError
from securetrees.testing.dtpkc import dtpkc_test_keys

KEYS = dtpkc_test_keys(512)
N, N2 = KEYS.params.n, KEYS.params.n2
values = st.integers(-(2**128), 2**128)


@given(m=values)
def test_a_weak_key_does_not_open_another_keys_ciphertext(m: int) -> None:
    c = encrypt(KEYS.pk("u1"), m)
    with pytest.raises(KeyMismatchError):
        decrypt_weak(KEYS.weak["u2"], c)
    forced = Ciphertext(KEYS.pk("u2"), c.t1, c.t2)  # relabelled: the math refuses too
    with pytest.raises(InvalidCiphertext):
        decrypt_weak(KEYS.weak["u2"], forced)


@given(m=values)
def test_one_weak_key_does_not_open_a_joint_ciphertext(m: int) -> None:
    joint = KEYS.pk("u1").joint(KEYS.pk("u2"))
    c = encrypt(joint, m)
    for who in ("u1", "u2"):
        forced = Ciphertext(KEYS.pk(who), c.t1, c.t2)
        with pytest.raises(InvalidCiphertext):
            parhdec2(KEYS.weak[who], forced)


@given(m=values)
def test_psdec_needs_both_shares(m: int) -> None:
    c = encrypt(KEYS.pk("u3"), m)
    part = psdec1(KEYS.cs_share, c)
    assert psdec2(KEYS.cc_share, part) == m
    for share in (KEYS.cs_share, KEYS.cc_share):  # one share alone: T1^λi is not 1 mod N
        with pytest.raises(InvalidCiphertext):
            l_function(share.t1_pow(c.t1), N)
    with pytest.raises(InvalidCiphertext):  # the CC with a fake CS contribution of 1
        psdec2(KEYS.cc_share, PartialDecryption(part.t1, 1))
    with pytest.raises(InvalidCiphertext):  # the CS's share used twice
        psdec2(KEYS.cc_share, PartialDecryption(part.t1, int(invert(KEYS.cc_share.t1_pow(mpz(part.t1)), N2)
                                                             * KEYS.cs_share.t1_pow(mpz(part.t1)) ** 2 % N2)))


@given(m=values)
def test_refreshed_ciphertext_needs_the_refresh_key(m: int) -> None:
    """FRF-Revoc's HEncRef: after the refresh, the old weak key alone opens nothing."""
    c = encrypt(KEYS.pk("u1"), m)
    refreshed, _ = hencref(c)
    forced = Ciphertext(KEYS.pk("u1"), refreshed.t1, refreshed.t2)
    with pytest.raises(InvalidCiphertext):
        decrypt_weak(KEYS.weak["u1"], forced)
