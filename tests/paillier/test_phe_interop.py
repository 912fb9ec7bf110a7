"""Conversions to and from python-paillier (``securetrees.paillier.phe_interop``).

The phe side is built directly from the factors (``phe.PaillierPrivateKey(pk, p, q)``),
not through the functions under test, so each direction is checked against phe itself.
The 2048-bit test key meets the size policy; smaller keys appear only where the size
policy is the point.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Any

import phe
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from securetrees._nt import random_prime
from securetrees.encoding import FixedPoint
from securetrees.errors import (
    EncodingOverflowError,
    InsecureParameterWarning,
    InvalidCiphertext,
    KeyMismatchError,
    MissingDependencyError,
    ParameterError,
    TypeMismatchError,
)
from securetrees.paillier import Ciphertext, FixedCiphertext, RandomnessPool, phe_interop
from securetrees.paillier.phe_interop import (
    ciphertext_from_phe,
    ciphertext_to_phe,
    derived_hs,
    fixed_ciphertext_from_phe,
    fixed_ciphertext_to_phe,
    private_key_from_phe,
    private_key_to_phe,
    public_key_from_phe,
    public_key_to_phe,
)
from securetrees.rand import DeterministicRandom
from securetrees.testing.paillier import small_keypair

PK, SK = small_keypair(2048)
P, Q = int(SK._p), int(SK._q)
PPK = phe.PaillierPublicKey(PK.n)
PSK = phe.PaillierPrivateKey(PPK, P, Q)
OTHER_PK, _ = small_keypair(2050)
OTHER_PPK = phe.PaillierPublicKey(OTHER_PK.n)

BOUND = PK.n // 3  # both libraries: |m| < N // 3, i.e. |m| <= phe's max_int
assert PPK.max_int == BOUND - 1
signed = st.integers(-(BOUND - 1), BOUND - 1)
small = st.integers(-(2**64), 2**64)
FP = FixedPoint(32)  # 2^-32 = 16^-8: phe exponent -8
reals = st.floats(-1e9, 1e9, allow_nan=False, allow_infinity=False)
FEW = settings(max_examples=20)  # each example costs phe's 2048-bit encryptions


def _prime(label: str, residue_mod_4: int, *, mod_3: int | None = None) -> int:
    """A deterministic 1024-bit prime ≡ residue (mod 4) (and ≡ mod_3 (mod 3) if given)."""
    rng = DeterministicRandom(f"tests/phe_interop/{label}")
    while True:
        p = int(random_prime(1024, rng=rng))
        if p % 4 == residue_mod_4 and (mod_3 is None or p % 3 == mod_3):
            return p


def _phe_pair(p: int, q: int) -> Any:
    return phe.PaillierPrivateKey(phe.PaillierPublicKey(p * q), p, q)


# -- public keys ---------------------------------------------------------------------------


def test_public_key_phe_to_ours_to_phe() -> None:
    pk = public_key_from_phe(PPK)
    assert pk.n == PK.n and pk.hs == derived_hs(PK.n)
    back = public_key_to_phe(pk)
    assert isinstance(back, phe.PaillierPublicKey)
    assert back == PPK and back.g == PPK.g == PK.n + 1


def test_public_key_conversion_is_the_same_on_every_party() -> None:
    """Two parties converting the same phe key get the same key id (hs derived from N)."""
    a, b = public_key_from_phe(PPK), public_key_from_phe(phe.PaillierPublicKey(PK.n))
    assert a == b and a.key_id == b.key_id
    assert derived_hs(PK.n) != derived_hs(OTHER_PK.n)


def test_public_key_ours_to_phe_to_ours() -> None:
    """phe keeps no hs: the key comes back exactly with its hs, else with the derived one."""
    assert public_key_from_phe(public_key_to_phe(PK), hs=PK.hs) == PK
    derived = public_key_from_phe(public_key_to_phe(PK))
    assert derived.n == PK.n and derived != PK  # same N, another DJN base: another key id


# -- private keys --------------------------------------------------------------------------


def test_private_key_phe_to_ours_to_phe() -> None:
    sk = private_key_from_phe(PSK)
    assert sk.public_key == public_key_from_phe(PPK)
    back = private_key_to_phe(sk)
    assert isinstance(back, phe.PaillierPrivateKey)
    assert (back.p, back.q) == (PSK.p, PSK.q) and back.public_key == PPK
    assert "secret=<hidden>" in repr(sk) and str(P) not in repr(sk)


def test_private_key_ours_to_phe_to_ours() -> None:
    sk = private_key_from_phe(private_key_to_phe(SK), hs=PK.hs)
    assert sk.public_key == PK
    assert sk.decrypt(PK.encrypt(-12345)) == -12345
    assert SK.decrypt(sk.encrypt(678)) == 678


# -- ciphertexts both ways ------------------------------------------------------------------


@FEW
@given(signed)
@example(BOUND - 1)
@example(-(BOUND - 1))
@example(0)
def test_phe_ciphertexts_decrypt_with_our_key(m: int) -> None:
    c = ciphertext_from_phe(PPK.encrypt(m), PK)
    assert SK.decrypt(c) == m
    assert not c.fresh  # it arrived from elsewhere: re-randomised when it leaves


@FEW
@pytest.mark.parametrize("encrypt", ["djn", "djn-short", "classic", "owner-djn", "owner-classic", "pool"])
@given(m=signed)
@example(m=BOUND - 1)
@example(m=-(BOUND - 1))
def test_our_ciphertexts_decrypt_with_phe_key(encrypt: str, m: int) -> None:
    if encrypt == "pool":
        pool = RandomnessPool(PK)
        pool.fill(1)
        c = PK.encrypt(m, pool=pool)
    elif encrypt.startswith("owner-"):
        c = SK.encrypt(m, mode=encrypt.removeprefix("owner-"))  # type: ignore[arg-type]
    else:
        c = PK.encrypt(m, mode=encrypt)  # type: ignore[arg-type]
    e = ciphertext_to_phe(c)
    assert isinstance(e, phe.EncryptedNumber) and e.exponent == 0 and e.public_key == PPK
    assert e.ciphertext(be_secure=False) == c.value  # fresh: leaves as it is
    assert PSK.decrypt(e) == m


@FEW
@given(signed)
def test_ciphertext_round_trips(m: int) -> None:
    c = PK.encrypt(m)
    again = ciphertext_from_phe(ciphertext_to_phe(c), PK)
    assert again.value == c.value and SK.decrypt(again) == m
    e = PPK.encrypt(m)
    back = ciphertext_to_phe(ciphertext_from_phe(e, PK))  # not fresh on our side: re-randomised
    assert back.ciphertext(be_secure=False) != e.ciphertext(be_secure=False)
    assert PSK.decrypt(back) == m


@pytest.mark.parametrize(
    ("residue", "expected"),
    [(BOUND - 1, BOUND - 1), (PK.n - (BOUND - 1), -(BOUND - 1)), (BOUND, None), (PK.n - BOUND, None),
     (PK.n // 2, None)],
)
def test_same_signed_band_as_phe(residue: int, expected: int | None) -> None:
    """Both libraries read a residue alike, and both refuse the overflow band."""
    e = phe.EncryptedNumber(PPK, PPK.raw_encrypt(residue))
    c = ciphertext_from_phe(e, PK)
    if expected is None:
        with pytest.raises(EncodingOverflowError):
            SK.decrypt(c)
        with pytest.raises(OverflowError):
            PSK.decrypt(e)
    else:
        assert SK.decrypt(c) == PSK.decrypt(e) == expected


# -- homomorphic operations across the boundary ----------------------------------------------


@FEW
@given(small, small, st.integers(-(2**32), 2**32))
def test_phe_operations_then_convert(a: int, b: int, k: int) -> None:
    ea, eb = PPK.encrypt(a), PPK.encrypt(b)
    assert SK.decrypt(ciphertext_from_phe(ea + eb, PK)) == a + b
    assert SK.decrypt(ciphertext_from_phe(ea * k - eb, PK)) == a * k - b
    mixed = ciphertext_from_phe(ea, PK) + PK.encrypt(b)  # a phe ciphertext in our arithmetic
    assert SK.decrypt(mixed * k) == (a + b) * k


@FEW
@given(small, small, st.integers(-(2**32), 2**32))
def test_our_operations_then_convert(a: int, b: int, k: int) -> None:
    e = ciphertext_to_phe(PK.encrypt(a) * k + PK.encrypt(b))
    assert PSK.decrypt(e) == a * k + b
    assert PSK.decrypt(e + PPK.encrypt(b) - 1) == a * k + 2 * b - 1  # our ciphertext in phe's arithmetic


# -- fixed point: phe exponents ---------------------------------------------------------------


@FEW
@given(reals, reals)
def test_phe_fixed_point_to_ours(x: float, y: float) -> None:
    ex, ey = PPK.encrypt(x, precision=16.0**-8), PPK.encrypt(y, precision=16.0**-8)
    assert ex.exponent == -8
    c = fixed_ciphertext_from_phe(ex + ey, PK, 32)
    assert isinstance(c, FixedCiphertext) and c.frac_bits == 32
    assert SK.decrypt_fixed(c) == PSK.decrypt(ex + ey) == FP.decode(FP.encode(x) + FP.encode(y))
    # and it adds to our own fixed-point ciphertexts at the same scale
    assert SK.decrypt_fixed(c + PK.encrypt_fixed(FP.fixed(y))) == FP.decode(FP.encode(x) + 2 * FP.encode(y))


@FEW
@given(reals, reals)
def test_our_fixed_point_to_phe(x: float, y: float) -> None:
    c = PK.encrypt_fixed(FP.fixed(x)) + PK.encrypt_fixed(FP.fixed(y))
    e = fixed_ciphertext_to_phe(c)
    assert e.exponent == -8
    assert PSK.decrypt(e) == FP.decode(FP.encode(x) + FP.encode(y))
    assert fixed_ciphertext_from_phe(e, PK, 32).frac_bits == 32


def test_lowering_the_exponent_in_phe_makes_it_convertible() -> None:
    e = PPK.encrypt(3)  # exponent 0
    c = fixed_ciphertext_from_phe(e.decrease_exponent_to(-8), PK, 32)
    assert SK.decrypt_fixed(c) == 3.0
    coarse = phe.EncryptedNumber(PPK, PPK.raw_encrypt(5), 2)  # 5·16^2
    assert SK.decrypt(ciphertext_from_phe(coarse.decrease_exponent_to(0), PK)) == 5 * 256


# -- re-randomisation of ciphertexts that leave for phe ----------------------------------------


def _leaves_rerandomised(convert: Callable[[Any], Any], make: Callable[[int], Any]) -> bool:
    """A derived (not fresh) ciphertext leaves with a new value and the same plaintext.

    Its value before conversion is the product of values a peer may have seen; sent
    unchanged, that peer could link it to its inputs.
    """
    c = make(5) + make(6)
    out = convert(c)
    before = (c.ciphertext if isinstance(c, FixedCiphertext) else c).value
    return bool(out.ciphertext(be_secure=False) != before and PSK.decrypt(out) in (11, 11.0 / 2**32))


CONVERTERS = [(ciphertext_to_phe, PK.encrypt),
              (fixed_ciphertext_to_phe, lambda v: PK.encrypt_fixed(FixedPoint(32).fixed(v * 2.0**-32)))]


@pytest.mark.parametrize(("convert", "make"), CONVERTERS)
def test_outgoing_ciphertexts_are_rerandomised(convert: Callable[[Any], Any], make: Callable[[int], Any]) -> None:
    assert _leaves_rerandomised(convert, make)


@pytest.mark.parametrize(("convert", "make"), CONVERTERS)
def test_planted_leak_outgoing_not_rerandomised(
    monkeypatch: pytest.MonkeyPatch, convert: Callable[[Any], Any], make: Callable[[int], Any]
) -> None:
    """Companion: a converter that forwards derived ciphertexts as they are fails the check."""
    monkeypatch.setattr(phe_interop, "_leaving", lambda c, rng: c)
    assert not _leaves_rerandomised(convert, make)


# -- rejections --------------------------------------------------------------------------------


def test_ciphertext_under_another_key_is_refused() -> None:
    with pytest.raises(KeyMismatchError):
        ciphertext_from_phe(OTHER_PPK.encrypt(1), PK)
    with pytest.raises(KeyMismatchError):
        fixed_ciphertext_from_phe(OTHER_PPK.encrypt(1.5, precision=16.0**-8), PK, 32)
    with pytest.raises(KeyMismatchError):  # a converted ciphertext stays bound to its key
        ciphertext_from_phe(PPK.encrypt(1), PK) + OTHER_PK.encrypt(1)


@pytest.mark.parametrize("exponent", [-1, 1, -8])
def test_nonzero_exponent_is_refused(exponent: int) -> None:
    e = phe.EncryptedNumber(PPK, PPK.raw_encrypt(7), exponent)
    with pytest.raises(ParameterError, match="exponent"):
        ciphertext_from_phe(e, PK)


@pytest.mark.parametrize(("exponent", "frac_bits"), [(0, 32), (-7, 32), (-9, 32), (-8, 30), (-8, -32)])
def test_fixed_scale_mismatch_is_refused(exponent: int, frac_bits: int) -> None:
    e = phe.EncryptedNumber(PPK, PPK.raw_encrypt(7), exponent)
    with pytest.raises(ParameterError):
        fixed_ciphertext_from_phe(e, PK, frac_bits)


def test_scale_that_is_not_a_power_of_16_is_refused() -> None:
    with pytest.raises(ParameterError, match="power of 16"):
        fixed_ciphertext_to_phe(PK.encrypt_fixed(FixedPoint(30).fixed(1.5)))


@pytest.mark.parametrize("value", [0, -1, PK.n_square, PK.n_square + 5, P * 12345, Q])
def test_out_of_range_or_non_unit_ciphertext_is_refused(value: int) -> None:
    with pytest.raises(InvalidCiphertext):
        ciphertext_from_phe(phe.EncryptedNumber(PPK, value), PK)


def test_factors_that_do_not_multiply_to_n_are_refused() -> None:
    tampered = phe.PaillierPrivateKey(PPK, P, Q)
    tampered.q = Q + 2  # phe checks p·q = n only in its constructor
    with pytest.raises(KeyMismatchError):
        private_key_from_phe(tampered)
    tampered.p, tampered.q = 1, PK.n  # the trivial factorisation
    with pytest.raises(KeyMismatchError):
        private_key_from_phe(tampered)


def test_composite_factor_is_refused() -> None:
    """N = (r·s)·q: phe takes it (p·q = N); our check of the factors does not."""
    r, s = _prime("r", 3), _prime("s", 1)
    fake = _phe_pair(r * s, Q)
    assert public_key_from_phe(fake.public_key).n == r * s * Q  # nothing public shows it
    with pytest.raises(ParameterError, match="not prime"):
        private_key_from_phe(fake)


def test_phe_keys_without_the_djn_conditions_are_refused() -> None:
    p1, p2, p3 = _prime("a", 1), _prime("b", 1), _prime("c", 3)
    with pytest.raises(ParameterError, match="3 \\(mod 4\\)"):  # N ≡ 3 (mod 4): visible publicly
        public_key_from_phe(phe.PaillierPublicKey(p1 * p3))
    with pytest.raises(ParameterError, match="DJN"):  # p ≡ q ≡ 1 (mod 4): only the factors show it
        private_key_from_phe(_phe_pair(p1, p2))
    g1, g2 = _prime("d", 3, mod_3=1), _prime("e", 3, mod_3=1)  # gcd(p-1, q-1) >= 6
    with pytest.raises(ParameterError, match="DJN"):
        private_key_from_phe(_phe_pair(g1, g2))


@pytest.mark.filterwarnings("ignore::securetrees.errors.InsecureParameterWarning")
def test_keys_like_phes_convert_exactly_when_they_meet_the_djn_conditions() -> None:
    """Primes drawn as phe draws them (any residue mod 4), from fixed seeds: a key converts
    iff p ≡ q ≡ 3 (mod 4) and gcd(p-1, q-1) = 2; the others raise ParameterError."""
    outcomes = set()
    for i in range(12):
        rng = DeterministicRandom(f"tests/phe_interop/like-phe/{i}")
        p, q = int(random_prime(512, rng=rng)), int(random_prime(512, rng=rng))
        djn = p % 4 == q % 4 == 3 and math.gcd(p - 1, q - 1) == 2
        phe_sk = _phe_pair(p, q)
        if djn:
            sk = private_key_from_phe(phe_sk, allow_insecure=True)
            assert sk.decrypt(ciphertext_from_phe(phe_sk.public_key.encrypt(-9), sk.public_key)) == -9
        else:
            with pytest.raises(ParameterError):
                private_key_from_phe(phe_sk, allow_insecure=True)
        outcomes.add(djn)
    assert outcomes == {True, False}  # the fixed sample exercises both branches


def test_hs_that_does_not_fit_the_factors_is_refused() -> None:
    """An hs that passes the public checks but is not an N-th residue (hs·(1+N))."""
    bad = derived_hs(PK.n) * (1 + PK.n) % PK.n_square
    public_key_from_phe(PPK, hs=bad)  # the public checks cannot tell
    with pytest.raises(KeyMismatchError):
        private_key_from_phe(PSK, hs=bad)
    with pytest.raises(ParameterError):  # an hs that is not a unit fails publicly
        public_key_from_phe(PPK, hs=P)


def test_g_other_than_n_plus_1_is_refused() -> None:
    odd = phe.PaillierPublicKey(PK.n)
    odd.g = PK.n + 2
    with pytest.raises(ParameterError, match="g"):
        public_key_from_phe(odd)
    with pytest.raises(ParameterError, match="g"):
        ciphertext_from_phe(phe.EncryptedNumber(odd, PPK.raw_encrypt(1)), PK)


def test_insecure_size_needs_the_flag() -> None:
    _, sk1024 = small_keypair(1024)
    phe_sk = _phe_pair(int(sk1024._p), int(sk1024._q))
    with pytest.raises(ParameterError, match="allow_insecure"):
        public_key_from_phe(phe_sk.public_key)
    with pytest.raises(ParameterError, match="allow_insecure"):
        private_key_from_phe(phe_sk)
    with pytest.warns(InsecureParameterWarning):
        sk = private_key_from_phe(phe_sk, allow_insecure=True)
    assert sk.decrypt(ciphertext_from_phe(phe_sk.public_key.encrypt(-3), sk.public_key)) == -3
    _, sk512 = small_keypair(512)
    with pytest.raises(ParameterError, match="too small"):
        private_key_from_phe(_phe_pair(int(sk512._p), int(sk512._q)), allow_insecure=True)


@pytest.mark.parametrize(
    "call",
    [lambda: public_key_from_phe(PK), lambda: public_key_to_phe(PPK), lambda: private_key_from_phe(PPK),
     lambda: private_key_to_phe(PK), lambda: ciphertext_from_phe(PK.encrypt(1), PK),
     lambda: ciphertext_from_phe(PPK.encrypt(1), PPK), lambda: fixed_ciphertext_from_phe(PK.encrypt(1), PK, 0),
     lambda: ciphertext_to_phe(PK.encrypt_fixed(FP.fixed(1.0))), lambda: ciphertext_to_phe(PPK.encrypt(1)),
     lambda: fixed_ciphertext_to_phe(PK.encrypt(1))],
)
def test_wrong_types_are_refused(call: Callable[[], object]) -> None:
    with pytest.raises(TypeMismatchError):
        call()


@pytest.mark.parametrize(
    "call",
    [lambda: public_key_from_phe(None), lambda: public_key_to_phe(PK), lambda: private_key_from_phe(None),
     lambda: private_key_to_phe(SK), lambda: ciphertext_from_phe(None, PK),
     lambda: fixed_ciphertext_from_phe(None, PK, 32), lambda: ciphertext_to_phe(PK.encrypt(1)),
     lambda: fixed_ciphertext_to_phe(PK.encrypt_fixed(FP.fixed(1.0)))],
)
def test_missing_phe_raises_with_install_hint(monkeypatch: pytest.MonkeyPatch, call: Callable[[], object]) -> None:
    monkeypatch.setitem(sys.modules, "phe", None)  # `import phe` now raises ImportError
    with pytest.raises(MissingDependencyError, match=r"securetrees\[phe\]"):
        call()


def test_derived_hs_refuses_a_degenerate_modulus() -> None:
    with pytest.raises(ParameterError):
        derived_hs(1)
    assert isinstance(ciphertext_from_phe(PPK.encrypt(0), PK), Ciphertext)
