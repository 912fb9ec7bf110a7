"""Encoded floats: one public scale, scale tracked through products, overflow raised."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from securetrees.encoding import Fixed, FixedPoint
from securetrees.errors import EncodingOverflowError, ParameterError
from securetrees.testing.paillier import small_keypair

PK, SK = small_keypair(512)
FP = FixedPoint(32)
reals = st.floats(-1e9, 1e9, allow_nan=False, allow_infinity=False)


@given(reals)
def test_round_trip_within_precision(x: float) -> None:
    assert abs(SK.decrypt_fixed(PK.encrypt_fixed(FP.fixed(x))) - x) <= FP.precision


@given(reals, reals)
def test_sum_within_precision(x: float, y: float) -> None:
    c = PK.encrypt_fixed(FP.fixed(x)) + PK.encrypt_fixed(FP.fixed(y))
    assert abs(SK.decrypt_fixed(c) - (x + y)) <= 2 * FP.precision + 1e-15 * abs(x + y)
    d = c - FP.fixed(y)
    assert abs(SK.decrypt_fixed(d) - x) <= 3 * FP.precision + 1e-15 * abs(x)


@given(reals, st.floats(-1e3, 1e3, allow_nan=False))
def test_product_with_plaintext_tracks_the_scale(x: float, w: float) -> None:
    c = PK.encrypt_fixed(FP.fixed(x)) * FP.fixed(w)
    assert c.frac_bits == 64
    exact = float(FP.fixed(x)) * float(FP.fixed(w))
    assert math.isclose(SK.decrypt_fixed(c), exact, rel_tol=1e-12, abs_tol=1e-15)
    assert (PK.encrypt_fixed(FP.fixed(x)) * 3).frac_bits == 32


def test_mixed_scales_refused() -> None:
    a = PK.encrypt_fixed(FP.fixed(1.0))
    b = a * FP.fixed(2.0)
    with pytest.raises(ParameterError):
        _ = a + b
    with pytest.raises(ParameterError):
        _ = a + Fixed(1, 16)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, np.float64("nan")])
def test_nan_and_inf_refused(bad: float) -> None:
    with pytest.raises(ParameterError):
        PK.encrypt_fixed(FP.fixed(bad))


def test_non_integers_refused_by_encrypt() -> None:
    for bad in (1.5, "3", True, None):
        with pytest.raises(ParameterError):
            PK.encrypt(bad)  # type: ignore[arg-type]
    with pytest.raises(ParameterError):
        PK.encrypt_fixed(1.5)  # type: ignore[arg-type]


def test_product_into_the_band_is_caught() -> None:
    """A product that leaves the range by less than a factor 2 lands in the band and raises.

    (A product by a large factor can wrap past the band: the scale budget of
    specs/encoding.md is what prevents that, not the band.)
    """
    half = (PK.n // 3) // 2 + 1  # 2 * half is just above the bound
    c = PK.encrypt_fixed(Fixed(half, 32))
    assert SK.decrypt_fixed(c) == half / 2**32
    with pytest.raises(EncodingOverflowError):
        SK.decrypt_fixed(c * 2)
    with pytest.raises(EncodingOverflowError):
        SK.decrypt_fixed(c + c)


def test_numpy_integer_scalars_accepted() -> None:
    assert SK.decrypt(PK.encrypt(np.int64(-5))) == -5  # type: ignore[arg-type]
    assert SK.decrypt(PK.encrypt(3) * np.int32(4)) == 12
