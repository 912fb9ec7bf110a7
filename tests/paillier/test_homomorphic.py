"""Hypothesis: round trips over the whole signed range and every homomorphic identity."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from securetrees.errors import EncodingOverflowError, KeyMismatchError
from securetrees.paillier import MODES, PrivateKey, PublicKey, sum_ciphertexts
from securetrees.testing.paillier import small_keypair

PK, SK = small_keypair(512)
BOUND = PK.n // 3  # |m| < N // 3 (specs/paillier.md, "Plaintext range")
signed = st.integers(-(BOUND - 1), BOUND - 1)
small = st.integers(-(2**64), 2**64)
scalars = st.integers(-(2**80), 2**80)


@given(signed)
@example(BOUND - 1)
@example(-(BOUND - 1))
@example(0)
def test_round_trip_whole_range(m: int) -> None:
    assert SK.decrypt(PK.encrypt(m)) == m


@given(signed, st.sampled_from(MODES))
def test_every_mode_decrypts_the_same(m: int, mode: str) -> None:
    assert SK.decrypt(PK.encrypt(m, mode=mode)) == m  # type: ignore[arg-type]
    assert SK.decrypt(SK.encrypt(m, mode=mode)) == m  # type: ignore[arg-type]
    assert SK.decrypt(PK.encrypt(m, mode=mode), constant_time=False) == m  # type: ignore[arg-type]


@pytest.mark.parametrize("m", [BOUND, -BOUND, BOUND + 1, PK.n])
def test_encrypt_refuses_out_of_range(m: int) -> None:
    with pytest.raises(EncodingOverflowError):
        PK.encrypt(m)


@given(small, small)
def test_add_ciphertexts(a: int, b: int) -> None:
    assert SK.decrypt(PK.encrypt(a) + PK.encrypt(b)) == a + b


@given(small, small)
def test_add_and_subtract_constants(a: int, k: int) -> None:
    c = PK.encrypt(a)
    assert SK.decrypt(c + k) == a + k
    assert SK.decrypt(k + c) == a + k
    assert SK.decrypt(c - k) == a - k
    assert SK.decrypt(k - c) == k - a


@given(small, small)
def test_subtract_and_negate(a: int, b: int) -> None:
    ca, cb = PK.encrypt(a), PK.encrypt(b)
    assert SK.decrypt(ca - cb) == a - b
    assert SK.decrypt(-ca) == -a


@given(small, scalars)
def test_scalar_multiplication(a: int, k: int) -> None:
    c = PK.encrypt(a)
    assert SK.decrypt(c * k) == a * k
    assert SK.decrypt(k * c) == a * k


@given(st.lists(small, min_size=1, max_size=12))
def test_sum_matches_plain_sum(values: list[int]) -> None:
    cts = [PK.encrypt(v) for v in values]
    assert SK.decrypt(sum_ciphertexts(cts)) == sum(values)
    assert SK.decrypt(sum(cts)) == sum(values)  # builtin sum starts with 0 + c


@given(small, small, scalars)
def test_distributivity(a: int, b: int, k: int) -> None:
    ca, cb = PK.encrypt(a), PK.encrypt(b)
    assert SK.decrypt((ca + cb) * k) == SK.decrypt(ca * k + cb * k) == (a + b) * k


@given(st.integers(1, BOUND - 1))
def test_overflow_detected_never_wrapped(m: int) -> None:
    """Sums of two in-range values land in range or in the band, never on the other side."""
    c = PK.encrypt(m) + PK.encrypt(m)
    if 2 * m < BOUND:
        assert SK.decrypt(c) == 2 * m
    else:
        with pytest.raises(EncodingOverflowError):
            SK.decrypt(c)


def test_band_edges() -> None:
    n = PK.n
    for residue, expected in [(BOUND - 1, BOUND - 1), (n - BOUND + 1, -(BOUND - 1))]:
        assert SK.decrypt(PK.encrypt_residue(residue)) == expected
    for residue in (BOUND, n - BOUND, n // 2):
        with pytest.raises(EncodingOverflowError):
            SK.decrypt(PK.encrypt_residue(residue))
        assert SK.decrypt_residue(PK.encrypt_residue(residue)) == residue


def test_freshness_of_results() -> None:
    c = PK.encrypt(3)
    assert c.fresh
    for derived in (c + c, c + 1, c * 2, -c, c - c, sum_ciphertexts([c, c])):
        assert not derived.fresh
        r = derived.rerandomize()
        assert r.fresh and r.value != derived.value
        assert SK.decrypt(r) == SK.decrypt(derived)


def test_cross_key_operations_raise(other_keys: tuple[PublicKey, PrivateKey]) -> None:
    opk, osk = other_keys
    a, b = PK.encrypt(1), opk.encrypt(1)
    for op in (lambda: a + b, lambda: b + a, lambda: a - b, lambda: sum_ciphertexts([a, b]),
               lambda: SK.decrypt(b), lambda: osk.decrypt(a)):
        with pytest.raises(KeyMismatchError):
            op()


def test_unsupported_operands() -> None:
    c = PK.encrypt(1)
    for op in (lambda: c * c, lambda: c + 0.5, lambda: c * 1.5, lambda: c + "1"):
        with pytest.raises(TypeError):
            op()  # type: ignore[operator]


def test_immutable() -> None:
    c = PK.encrypt(1)
    with pytest.raises(AttributeError):
        c._c = 5  # type: ignore[misc]
    with pytest.raises(AttributeError):
        PK._n = 5  # type: ignore[misc]
    with pytest.raises(AttributeError):
        SK._p = 5  # type: ignore[misc]
