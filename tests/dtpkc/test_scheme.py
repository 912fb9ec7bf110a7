"""DT-PKC scheme identities (specs/dtpkc.md "Operations")."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from securetrees.dtpkc import (
    Ciphertext,
    decrypt_strong,
    decrypt_weak,
    encrypt,
    hencref,
    hreenc,
    parhdec1,
    parhdec2,
    psdec1,
    psdec2,
)
from securetrees.dtpkc.scheme import PartialDecryption, encrypt_residue, l_function
from securetrees.encoding import FixedPoint, SignedRange
from securetrees.errors import EncodingOverflowError, InvalidCiphertext, KeyMismatchError, ParameterError
from securetrees.testing.dtpkc import DTPKCTestKeys, dtpkc_test_keys

KEYS = dtpkc_test_keys(512)
BOUND = int(KEYS.params.n) // 3  # the default signed range |m| < N/3
EDGES = [0, 1, -1, BOUND - 1, -(BOUND - 1)]
HALF = BOUND // 2
signed = st.one_of(st.integers(-(BOUND - 1), BOUND - 1), st.sampled_from(EDGES))
small = st.one_of(st.integers(-(HALF - 1), HALF - 1), st.sampled_from([0, 1, -1, HALF - 1, -(HALF - 1)]))
parties = st.sampled_from(["u1", "u2", "u3", "cs", "cc"])


@given(m=signed, who=parties)
def test_weak_strong_and_two_server_decryption_agree(m: int, who: str) -> None:
    sk = KEYS.weak[who]
    c = encrypt(sk.public, m)
    assert decrypt_weak(sk, c) == m
    assert decrypt_strong(KEYS.strong, c) == m
    assert psdec2(KEYS.cc_share, psdec1(KEYS.cs_share, c)) == m


@given(a=small, b=small, who=parties)
def test_same_key_addition_and_subtraction(a: int, b: int, who: str) -> None:
    sk = KEYS.weak[who]
    ca, cb = encrypt(sk.public, a), encrypt(sk.public, b)
    assert decrypt_weak(sk, ca + cb) == a + b
    assert decrypt_weak(sk, ca - cb) == a - b


@given(m=st.integers(-(2**100), 2**100), k=st.integers(-(2**60), 2**60))
def test_scalar_multiplication_with_signed_scalars(m: int, k: int) -> None:
    sk = KEYS.weak["u1"]
    c = encrypt(sk.public, m)
    assert decrypt_weak(sk, c * k) == m * k
    assert decrypt_weak(sk, k * c) == m * k


@given(m=signed)
def test_negation_by_inverse(m: int) -> None:
    sk = KEYS.weak["u2"]
    assert decrypt_weak(sk, -encrypt(sk.public, m)) == -m


@given(m=small, c=small)
def test_adding_a_public_constant(m: int, c: int) -> None:
    sk = KEYS.weak["u3"]
    out = encrypt(sk.public, m).add_constant(c)
    assert not out.fresh
    assert decrypt_weak(sk, out) == m + c


@given(m=signed)
def test_rerandomisation_keeps_plaintext_and_changes_both_parts(m: int) -> None:
    sk = KEYS.weak["u1"]
    c = encrypt(sk.public, m)
    r = c.rerandomize()
    assert r.fresh and r.pk == c.pk
    assert r.t1 != c.t1 and r.t2 != c.t2
    assert decrypt_weak(sk, r) == m


@given(m=signed, i=parties, j=parties)
def test_joint_key_parhdec_in_either_order(m: int, i: str, j: str) -> None:
    if i == j:
        return
    ski, skj = KEYS.weak[i], KEYS.weak[j]
    joint = ski.public.joint(skj.public)
    assert joint == skj.public.joint(ski.public)  # h_i·h_j = h_j·h_i
    c = encrypt(joint, m)
    assert parhdec2(skj, parhdec1(ski, c)) == m
    assert parhdec2(ski, parhdec1(skj, c)) == m
    assert decrypt_strong(KEYS.strong, c) == m
    assert psdec2(KEYS.cc_share, psdec1(KEYS.cs_share, c)) == m


@given(m=signed)
def test_parhdec1_output_is_a_ciphertext_under_the_other_key(m: int) -> None:
    ski, skj = KEYS.weak["u1"], KEYS.weak["cs"]
    rest = parhdec1(ski, encrypt(ski.public.joint(skj.public), m))
    assert rest.pk == skj.public
    assert decrypt_weak(skj, rest) == m


@given(m=small, a=small)
def test_hreenc_moves_to_the_joint_key_and_rerandomises(m: int, a: int) -> None:
    u1, cs = KEYS.weak["u1"], KEYS.weak["cs"]
    c = encrypt(u1.public, m)
    moved = hreenc(cs, c)
    assert moved.pk == u1.public.joint(cs.public)
    assert moved.fresh and moved.t2 != c.t2  # re-randomised: T2 no longer links the two
    assert parhdec2(cs, parhdec1(u1, moved)) == m
    # homomorphic under the joint key too
    other = encrypt(moved.pk, a)
    assert decrypt_strong(KEYS.strong, moved + other) == m + a


@given(m=signed)
def test_hencref_moves_to_theta_plus_rho(m: int) -> None:
    u2 = KEYS.weak["u2"]
    c = encrypt(u2.public, m)
    refreshed, rho = hencref(c)
    assert refreshed.pk == u2.public.joint(rho.public)
    assert parhdec2(rho, parhdec1(u2, refreshed)) == m
    assert decrypt_strong(KEYS.strong, refreshed) == m
    with pytest.raises(KeyMismatchError):
        decrypt_weak(u2, refreshed)  # θ alone no longer opens it


@given(x=st.floats(-1e6, 1e6, allow_nan=False))
def test_fixed_point_values(x: float) -> None:
    fp = FixedPoint(32)
    sk = KEYS.weak["u1"]
    got = fp.decode(decrypt_weak(sk, encrypt(sk.public, fp.encode(x))))
    assert abs(got - x) <= fp.precision


def test_ciphertexts_are_immutable_and_key_bound() -> None:
    u1, u2 = KEYS.weak["u1"], KEYS.weak["u2"]
    c = encrypt(u1.public, 5)
    with pytest.raises(AttributeError):
        c.t1 = c.t2  # type: ignore[misc]
    with pytest.raises(KeyMismatchError):
        _ = c + encrypt(u2.public, 1)
    with pytest.raises(KeyMismatchError):
        decrypt_weak(u2, c)
    with pytest.raises(TypeError):
        _ = c * c  # type: ignore[operator]


def test_overflow_band_and_range_checks() -> None:
    sk = KEYS.weak["u1"]
    with pytest.raises(EncodingOverflowError):
        encrypt(sk.public, BOUND)
    with pytest.raises(EncodingOverflowError):
        decrypt_weak(sk, encrypt_residue(sk.public, BOUND))  # a residue in the band
    # a caller-chosen narrower range is checked both ways
    narrow = SignedRange.bits(int(KEYS.params.n), 16)
    with pytest.raises(EncodingOverflowError):
        encrypt(sk.public, 1 << 16, signed=narrow)
    with pytest.raises(EncodingOverflowError):
        decrypt_weak(sk, encrypt(sk.public, 1 << 16), signed=narrow)
    with pytest.raises(ParameterError):
        encrypt(sk.public, 1, signed=SignedRange.bits(1 << 80, 16))
    with pytest.raises(ParameterError):
        encrypt(sk.public, True)  # type: ignore[arg-type]


def test_wrong_key_does_not_decrypt_even_when_forced() -> None:
    """Security property: relabelled to another weak key, L() refuses it."""
    u1, u2 = KEYS.weak["u1"], KEYS.weak["u2"]
    c = encrypt(u1.public, 42)
    forced = Ciphertext(u2.public, c.t1, c.t2)
    with pytest.raises(InvalidCiphertext):
        decrypt_weak(u2, forced)


def test_parhdec1_with_a_non_component_key() -> None:
    c = encrypt(KEYS.pk("u1").joint(KEYS.pk("u2")), 3)
    with pytest.raises(KeyMismatchError):
        parhdec1(KEYS.weak["u3"], c)
    with pytest.raises(KeyMismatchError):
        parhdec1(KEYS.weak["u1"], encrypt(KEYS.pk("u1"), 3))  # nothing would be left


def test_other_system_is_refused() -> None:
    other: DTPKCTestKeys = dtpkc_test_keys(512, label="other-system")
    c = encrypt(other.pk("u1"), 1)
    with pytest.raises(KeyMismatchError):
        decrypt_strong(KEYS.strong, c)
    with pytest.raises(KeyMismatchError):
        psdec1(KEYS.cs_share, c)
    with pytest.raises(KeyMismatchError):
        hreenc(KEYS.weak["cs"], c)
    with pytest.raises(KeyMismatchError):
        KEYS.pk("u1").joint(other.pk("u1"))


def test_psdec2_validates_peer_values() -> None:
    c = encrypt(KEYS.pk("u1"), 9)
    part = psdec1(KEYS.cs_share, c)
    n2 = int(KEYS.params.n2)
    for bad in (PartialDecryption(0, part.share), PartialDecryption(part.t1, n2),
                PartialDecryption(part.t1, int(KEYS.params.n))):
        with pytest.raises(InvalidCiphertext):
            psdec2(KEYS.cc_share, bad)


def test_l_function_is_exact() -> None:
    n = KEYS.params.n
    assert l_function(1 + 7 * n, n) == 7
    with pytest.raises(InvalidCiphertext):
        l_function(2 + 7 * n, n)


@given(a=small, b=small, k=st.integers(-(2**40), 2**40), c=small, i=parties, j=parties)
def test_homomorphic_identities_under_joint_keys(a: int, b: int, k: int, c: int, i: str, j: str) -> None:
    if i == j:
        return
    ski, skj = KEYS.weak[i], KEYS.weak[j]
    joint = ski.public.joint(skj.public)

    def opened(ct: Ciphertext) -> int:
        assert ct.pk == joint
        return parhdec2(skj, parhdec1(ski, ct))

    ca, cb = encrypt(joint, a), encrypt(joint, b)
    assert opened(ca + cb) == a + b
    assert opened(ca - cb) == a - b
    assert opened(-ca) == -a
    assert opened(ca.add_constant(c)) == a + c
    assert opened(ca.rerandomize()) == a
    small_a = a % (1 << 64) - (1 << 63)
    assert opened(encrypt(joint, small_a) * k) == small_a * k
    assert psdec2(KEYS.cc_share, psdec1(KEYS.cs_share, ca + cb)) == a + b


def test_key_types_are_checked_at_runtime_too() -> None:
    """mypy rejects these calls; at run time they raise KeyMismatchError rather than misbehave."""
    c = encrypt(KEYS.pk("u1"), 1)
    with pytest.raises(KeyMismatchError):
        decrypt_strong(KEYS.cs_share, c)  # type: ignore[arg-type]  # a share is not λ
    with pytest.raises(KeyMismatchError):
        psdec1(KEYS.strong, c)  # type: ignore[arg-type]
    with pytest.raises(KeyMismatchError):
        psdec2(KEYS.weak["u1"], psdec1(KEYS.cs_share, c))  # type: ignore[arg-type]
    with pytest.raises(KeyMismatchError):
        decrypt_weak(KEYS.cc_share, c)  # type: ignore[arg-type]
    with pytest.raises(KeyMismatchError):
        parhdec1(KEYS.strong, c)  # type: ignore[arg-type]
    with pytest.raises(KeyMismatchError):
        hreenc(KEYS.cs_share, c)  # type: ignore[arg-type]
