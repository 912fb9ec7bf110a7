"""Key separation in DT-PKC: one weak key does not open another's ciphertexts, one
strong-key share decrypts nothing, and a refreshed ciphertext needs the refresh key.

Each property is a check function; its planted-leak companion builds the leaky key material
(shared weak keys, a joint key that is one party's key, a split that gives one server the
whole key, a refresh that does not move the key) and shows the same check fails.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from securetrees._nt import invert, mpz
from securetrees.dtpkc import (
    Ciphertext,
    PublicKey,
    WeakSecretKey,
    decrypt_weak,
    encrypt,
    hencref,
    parhdec2,
    psdec1,
    psdec2,
)
from securetrees.dtpkc.keys import StrongKeyShare, generate_weak_key, split_strong_key
from securetrees.dtpkc.scheme import PartialDecryption, l_function
from securetrees.errors import EncodingOverflowError, InvalidCiphertext, KeyMismatchError
from securetrees.rand import DeterministicRandom
from securetrees.testing.dtpkc import ScriptedRandom, dtpkc_test_keys

KEYS = dtpkc_test_keys(512)
N, N2 = KEYS.params.n, KEYS.params.n2
values = st.integers(-(2**128), 2**128)


def _opens(attempt: Callable[[], object]) -> bool:
    """True if ``attempt`` decrypts instead of being refused."""
    try:
        attempt()
    except (InvalidCiphertext, KeyMismatchError, EncodingOverflowError):
        return False
    return True


def check_weak_key_does_not_open(other: WeakSecretKey, c: Ciphertext) -> None:
    """``other`` opens ``c`` neither as labelled nor relabelled as its own (the math refuses too)."""
    forced = Ciphertext(other.public, c.t1, c.t2)
    assert not _opens(lambda: decrypt_weak(other, c)), "another party's weak key opens the ciphertext"
    assert not _opens(lambda: decrypt_weak(other, forced)), "another party's weak key opens the ciphertext"


@given(m=values)
def test_a_weak_key_does_not_open_another_keys_ciphertext(m: int) -> None:
    check_weak_key_does_not_open(KEYS.weak["u2"], encrypt(KEYS.pk("u1"), m))


def test_weak_keys_from_a_repeated_stream_are_caught() -> None:
    """Planted leak: a KGC whose weak keys come from a fixed seed gives two parties one key."""
    u1 = generate_weak_key(KEYS.params, rng=DeterministicRandom("leaky-kgc"))
    u2 = generate_weak_key(KEYS.params, rng=DeterministicRandom("leaky-kgc"))
    with pytest.raises(AssertionError, match="opens the ciphertext"):
        check_weak_key_does_not_open(u2, encrypt(u1.public, 12345))


def check_one_key_does_not_open_joint(joint: PublicKey, m: int) -> None:
    c = encrypt(joint, m)
    for who in ("u1", "u2"):
        forced = Ciphertext(KEYS.pk(who), c.t1, c.t2)
        assert not _opens(lambda f=forced, w=who: parhdec2(KEYS.weak[w], f)), f"{who}'s key alone opens the joint"


@given(m=values)
def test_one_weak_key_does_not_open_a_joint_ciphertext(m: int) -> None:
    check_one_key_does_not_open_joint(KEYS.pk("u1").joint(KEYS.pk("u2")), m)


def test_a_joint_key_that_is_one_partys_key_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planted leak: ``joint`` forgets the other components (the result is u1's own key)."""
    monkeypatch.setattr(PublicKey, "joint", lambda self, *others: self)
    with pytest.raises(AssertionError, match="u1's key alone opens the joint"):
        check_one_key_does_not_open_joint(KEYS.pk("u1").joint(KEYS.pk("u2")), 77)


def check_psdec_needs_both_shares(cs_share: StrongKeyShare, cc_share: StrongKeyShare, m: int) -> None:
    c = encrypt(KEYS.pk("u3"), m)
    part = psdec1(cs_share, c)
    assert psdec2(cc_share, part) == m
    for share in (cs_share, cc_share):  # one share alone: T1^λi is not 1 mod N
        assert not _opens(lambda s=share: l_function(s.t1_pow(c.t1), N)), "one share alone decrypts"
    # the CC with a fake CS contribution of 1
    assert not _opens(lambda: psdec2(cc_share, PartialDecryption(part.t1, 1))), "the CC decrypts alone"
    doubled = int(invert(cc_share.t1_pow(mpz(part.t1)), N2) * cs_share.t1_pow(mpz(part.t1)) ** 2 % N2)
    assert not _opens(lambda: psdec2(cc_share, PartialDecryption(part.t1, doubled))), "the CS's share twice"


@given(m=values)
def test_psdec_needs_both_shares(m: int) -> None:
    check_psdec_needs_both_shares(KEYS.cs_share, KEYS.cc_share, m)


def test_a_split_giving_one_server_the_whole_key_is_caught() -> None:
    """Planted leak: λ1 drawn as s itself (λ2 = 0): the CS's share alone decrypts."""
    s = KEYS.strong.lam * KEYS.strong.lam_inv % (KEYS.strong.lam * N)
    cs_share, cc_share = split_strong_key(KEYS.strong, rng=ScriptedRandom(int(s)))
    with pytest.raises(AssertionError, match="one share alone decrypts"):
        check_psdec_needs_both_shares(cs_share, cc_share, 42)


def check_refresh_moves_the_key(refreshed: Ciphertext, old: WeakSecretKey) -> None:
    forced = Ciphertext(old.public, refreshed.t1, refreshed.t2)
    assert not _opens(lambda: decrypt_weak(old, forced)), "the old weak key opens the refreshed ciphertext"


@given(m=values)
def test_refreshed_ciphertext_needs_the_refresh_key(m: int) -> None:
    """FRF-Revoc's HEncRef: after the refresh, the old weak key alone opens nothing."""
    refreshed, _ = hencref(encrypt(KEYS.pk("u1"), m))
    check_refresh_moves_the_key(refreshed, KEYS.weak["u1"])


def test_a_refresh_that_only_rerandomises_is_caught() -> None:
    """Planted leak: HEncRef replaced by a re-randomisation under the same key."""
    refreshed = encrypt(KEYS.pk("u1"), 99).rerandomize()
    with pytest.raises(AssertionError, match="old weak key opens"):
        check_refresh_moves_the_key(refreshed, KEYS.weak["u1"])
