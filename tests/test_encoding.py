from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from securetrees.encoding import Fixed, FixedPoint, SignedRange
from securetrees.errors import EncodingOverflowError, ParameterError

finite = st.floats(min_value=-(2.0**40), max_value=2.0**40, allow_nan=False, allow_infinity=False)


def test_known_answers() -> None:
    fp = FixedPoint(frac_bits=4)
    assert fp.encode(1.5) == 24
    assert fp.encode(-0.03125) == 0  # -0.5 ulp rounds half to even
    assert fp.encode(0.09375) == 2  # 1.5 ulp rounds half to even
    assert fp.encode(3) == 48
    assert fp.decode(-24) == -1.5
    assert FixedPoint().encode(1.0) == 2**32


@given(finite, st.integers(min_value=0, max_value=64))
def test_round_trip_within_precision(x: float, f: int) -> None:
    fp = FixedPoint(frac_bits=f)
    assert abs(fp.decode(fp.encode(x)) - x) <= fp.precision * (1 + 1e-12) + abs(x) * 2**-52


@given(st.lists(finite, min_size=1, max_size=20))
def test_array_matches_scalar(xs: list[float]) -> None:
    fp = FixedPoint()
    arr = fp.encode(np.array(xs))
    assert arr.dtype == object
    assert list(arr) == [fp.encode(x) for x in xs]
    assert np.allclose(fp.decode(arr), xs, atol=fp.precision * 2)


@given(finite, finite)
def test_scale_is_tracked_through_products(a: float, b: float) -> None:
    fp = FixedPoint(frac_bits=20)
    prod = fp.fixed(a) * fp.fixed(b)
    assert prod.frac_bits == 40
    bound = abs(a) * 2**-21 + abs(b) * 2**-21 + 2**-42 + 1e-9 * abs(a * b)
    assert math.isclose(float(prod), a * b, abs_tol=bound + 1e-6)
    assert (fp.fixed(a) + fp.fixed(b)).frac_bits == 20


def test_adding_different_scales_is_refused() -> None:
    with pytest.raises(ParameterError):
        Fixed(1, 3) + Fixed(1, 4)


@given(st.integers(), st.integers(min_value=0, max_value=40), st.integers(min_value=0, max_value=40))
def test_rescale(v: int, f: int, g: int) -> None:
    x = Fixed(v, f).rescale(g)
    assert abs(float(x) - v / 2**f) <= 2.0 ** -(g + 1) + abs(v) * 2**-50


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, np.float64("nan"), True, "1.0", None])
def test_non_finite_and_non_numbers_rejected(bad: object) -> None:
    with pytest.raises(ParameterError):
        FixedPoint().encode(bad)  # type: ignore[call-overload]


def test_array_with_nan_rejected() -> None:
    with pytest.raises(ParameterError):
        FixedPoint().encode(np.array([1.0, np.nan]))
    with pytest.raises(ParameterError):
        FixedPoint().encode(np.array(["a"]))


def test_numpy_scalars_coerced() -> None:
    fp = FixedPoint(frac_bits=8)
    assert fp.encode(np.int64(3)) == 768 and type(fp.encode(np.int64(3))) is int
    assert fp.encode(np.float32(0.5)) == 128


@given(st.integers(min_value=3, max_value=2**130), st.data())
def test_signed_range_round_trip_and_band(n: int, data: st.DataObject) -> None:
    rng = SignedRange.thirds(n)
    if rng.bound < 1:
        return
    v = data.draw(st.integers(min_value=-rng.bound + 1, max_value=rng.bound - 1))
    assert rng.extract(rng.embed(v)) == v
    # the edges of the valid range decode, the band's edges raise
    assert rng.extract(rng.embed(rng.bound - 1)) == rng.bound - 1
    assert rng.extract(rng.embed(-(rng.bound - 1))) == -(rng.bound - 1)
    for r in (rng.bound, n - rng.bound):
        with pytest.raises(EncodingOverflowError):
            rng.extract(r)
    for v_out in (rng.bound, -rng.bound):
        with pytest.raises(EncodingOverflowError):
            rng.embed(v_out)


def test_signed_range_overflow_never_wraps() -> None:
    """A sum of two in-range values lands in range or in the band, never on the other side."""
    n = 1009
    rng = SignedRange.thirds(n)
    top = rng.bound - 1
    with pytest.raises(EncodingOverflowError):
        rng.extract((rng.embed(top) + rng.embed(top)) % n)
    with pytest.raises(EncodingOverflowError):
        rng.extract((rng.embed(-top) + rng.embed(-top)) % n)


def test_signed_range_parameters() -> None:
    with pytest.raises(ParameterError):
        SignedRange(2, 1)
    with pytest.raises(ParameterError):
        SignedRange(100, 51)
    with pytest.raises(ParameterError):
        FixedPoint(frac_bits=-1)
    assert SignedRange.bits(2**64, 10).bound == 1024
    with pytest.raises(EncodingOverflowError):
        SignedRange(100, 10).extract(100)


@given(st.lists(finite, min_size=1, max_size=20), st.integers(min_value=0, max_value=20))
def test_int64_path_matches_scalar(xs: list[float], f: int) -> None:
    fp = FixedPoint(frac_bits=f)
    out = fp.encode_int64(np.array(xs))
    assert out.dtype == np.int64 and out.tolist() == [fp.encode(x) for x in xs]


def test_int64_path_refusals() -> None:
    with pytest.raises(ParameterError):
        FixedPoint(4).encode_int64(np.array([np.inf]))
    with pytest.raises(EncodingOverflowError):
        FixedPoint(4).encode_int64(np.array([2.0**58]))
