"""Signed binary fixed point, and signed integers embedded in Z_N with an overflow band.

Two small pieces that every scheme shares (RevFRF Appendix A.1, made precise
in ``specs/encoding.md``):

* :class:`FixedPoint` turns real numbers into integers with one public,
  per-protocol scale ``2^frac_bits`` (default 32) and back.  There is no
  per-value exponent: phe's exponent travels in the clear and leaks magnitude.
  :class:`Fixed` carries a scaled integer with its scale, so products
  (scale ``2^(2f)``) and sums (equal scales only) are tracked, not guessed.
* :class:`SignedRange` maps a signed integer ``v`` with ``|v| < bound`` to the
  residue ``v mod N`` and back.  Residues in ``[bound, N - bound]`` form the
  overflow band: reading one raises :class:`EncodingOverflowError` instead of
  wrapping silently.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, overload

import numpy as np
import numpy.typing as npt

from securetrees.errors import EncodingOverflowError, ParameterError

__all__ = ["DEFAULT_FRAC_BITS", "Fixed", "FixedPoint", "SignedRange", "as_int"]

DEFAULT_FRAC_BITS: Final = 32

Real = int | float | np.integer | np.floating


def as_int(value: object) -> int:
    """Coerce a Python or numpy integer (not bool, not float) to ``int``; raise otherwise."""
    if type(value) is int:  # the common case first (a bool's type is bool, not int)
        return value
    if isinstance(value, (bool, np.bool_)):
        raise ParameterError("booleans are not accepted as integers")
    if isinstance(value, numbers.Integral):
        return int(value)
    raise ParameterError(f"expected an integer, got {type(value).__name__}")


def _finite_float(value: object) -> float:
    if isinstance(value, (bool, np.bool_)):
        raise ParameterError("booleans are not accepted as numbers")
    if not isinstance(value, numbers.Real):
        raise ParameterError(f"expected a real number, got {type(value).__name__}")
    try:
        x = float(value)
    except OverflowError as exc:  # an exact rational beyond the float range
        raise EncodingOverflowError(f"{type(value).__name__} value is beyond the float range") from exc
    if not math.isfinite(x):
        raise ParameterError(f"cannot encode a non-finite value ({x})")
    return x


def _scale_float(x: float, frac_bits: int) -> int:
    """``round(x · 2^frac_bits)``, half to even, exactly.  ``ldexp`` is exact unless the result
    leaves the float range; a float that large is already an integer, so shifting it is exact."""
    y = math.ldexp(x, frac_bits) if abs(x) < 2.0 ** (1023 - frac_bits) else math.inf
    return round(y) if math.isfinite(y) else int(x) << frac_bits


@dataclass(frozen=True, slots=True)
class Fixed:
    """A scaled integer ``value / 2^frac_bits``; arithmetic keeps track of the scale."""

    value: int
    frac_bits: int

    def __add__(self, other: Fixed) -> Fixed:
        if not isinstance(other, Fixed):
            return NotImplemented
        if other.frac_bits != self.frac_bits:
            raise ParameterError(
                f"cannot add fixed-point values of scales 2^{self.frac_bits} and 2^{other.frac_bits}"
            )
        return Fixed(self.value + other.value, self.frac_bits)

    def __neg__(self) -> Fixed:
        return Fixed(-self.value, self.frac_bits)

    def __sub__(self, other: Fixed) -> Fixed:
        if not isinstance(other, Fixed):
            return NotImplemented
        return self + (-other)

    def __mul__(self, other: Fixed | int) -> Fixed:
        if isinstance(other, Fixed):
            return Fixed(self.value * other.value, self.frac_bits + other.frac_bits)
        if isinstance(other, numbers.Integral) and not isinstance(other, bool):
            return Fixed(self.value * int(other), self.frac_bits)
        return NotImplemented

    __rmul__ = __mul__

    def __float__(self) -> float:
        return self.value / (1 << self.frac_bits)

    def rescale(self, frac_bits: int) -> Fixed:
        """The same number at scale ``2^frac_bits``, rounding half to even when scaling down."""
        if frac_bits < 0:
            raise ParameterError("frac_bits must be non-negative")
        shift = self.frac_bits - frac_bits
        if shift <= 0:
            return Fixed(self.value << -shift, frac_bits)
        q, r = divmod(self.value, 1 << shift)
        half = 1 << (shift - 1)
        if r > half or (r == half and q & 1):
            q += 1
        return Fixed(q, frac_bits)


@dataclass(frozen=True, slots=True)
class FixedPoint:
    """Signed binary fixed point with the public scale ``2^frac_bits``.

    ``encode`` rounds to the nearest representable value (half to even), so
    ``|decode(encode(x)) - x| <= 2^-(frac_bits + 1)``.  NaN and infinities
    raise :class:`ParameterError`.
    """

    frac_bits: int = DEFAULT_FRAC_BITS

    def __post_init__(self) -> None:
        if not isinstance(self.frac_bits, int) or not 0 <= self.frac_bits <= 256:
            raise ParameterError(f"frac_bits must be an integer in [0, 256], got {self.frac_bits!r}")

    @property
    def scale(self) -> int:
        return 1 << self.frac_bits

    @property
    def precision(self) -> float:
        """The largest rounding error of :meth:`encode` (half a unit in the last place)."""
        return 2.0 ** -(self.frac_bits + 1)

    def fixed(self, x: Real) -> Fixed:
        """``x`` as a :class:`Fixed` at this codec's scale."""
        return Fixed(self.encode_scalar(x), self.frac_bits)

    def encode_scalar(self, x: Real) -> int:
        """``round(x * 2^frac_bits)`` as an exact ``int``; integers are scaled exactly."""
        if isinstance(x, numbers.Integral) and not isinstance(x, (bool, np.bool_)):
            return int(x) << self.frac_bits
        return _scale_float(_finite_float(x), self.frac_bits)

    def encode_array(self, x: Iterable[Real] | np.ndarray) -> np.ndarray:
        """Element-wise :meth:`encode_scalar`; returns an object array of Python ints."""
        arr = np.asarray(x)
        if arr.dtype == object:
            return np.array([self.encode_scalar(v) for v in arr.ravel()], dtype=object).reshape(
                arr.shape
            )
        if arr.dtype.kind in "iu":
            out = np.empty(arr.shape, dtype=object)
            out.ravel()[:] = [int(v) << self.frac_bits for v in arr.ravel().tolist()]
            return out
        if arr.dtype.kind != "f":
            raise ParameterError(f"cannot encode an array of dtype {arr.dtype}")
        if not np.all(np.isfinite(arr)):
            raise ParameterError("cannot encode NaN or infinite values")
        floats = arr.astype(np.float64)
        with np.errstate(over="ignore"):
            scaled = np.rint(np.ldexp(floats, self.frac_bits))
        out = np.empty(arr.shape, dtype=object)
        if np.all(np.isfinite(scaled)):
            out.ravel()[:] = [int(v) for v in scaled.ravel().tolist()]
        else:  # some x·2^f exceed the float range: scale those exactly
            out.ravel()[:] = [_scale_float(v, self.frac_bits) for v in floats.ravel().tolist()]
        return out

    def encode_int64(self, x: Iterable[Real] | np.ndarray) -> npt.NDArray[np.int64]:
        """Element-wise :meth:`encode_scalar` into an ``int64`` array (a vectorised hot path).

        Refuses NaN and infinities (:class:`ParameterError`) and any ``|x·2^f| >= 2^62``
        (:class:`EncodingOverflowError`), which leaves headroom for sums of a few values.
        """
        try:
            arr = np.asarray(x, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ParameterError(f"cannot encode these values as floats: {exc}") from exc
        except OverflowError as exc:
            raise EncodingOverflowError("a value is beyond the float range") from exc
        if not np.all(np.isfinite(arr)):
            raise ParameterError("cannot encode NaN or infinite values")
        with np.errstate(over="ignore"):
            scaled = np.rint(np.ldexp(arr, self.frac_bits))
        if scaled.size and float(np.max(np.abs(scaled))) >= 2.0**62:
            raise EncodingOverflowError("a value does not fit the 62-bit fixed-point range")
        return scaled.astype(np.int64)

    @overload
    def encode(self, x: Real) -> int: ...
    @overload
    def encode(self, x: np.ndarray | list[Any] | tuple[Any, ...]) -> np.ndarray: ...
    def encode(self, x: Any) -> int | np.ndarray:
        """Encode a number (to ``int``) or an array-like (to an object array of ``int``)."""
        if isinstance(x, (np.ndarray, list, tuple)):
            return self.encode_array(x)
        return self.encode_scalar(x)

    def decode(self, v: int | np.ndarray, *, frac_bits: int | None = None) -> Any:
        """``v / 2^frac_bits`` (default: this codec's scale; pass ``2 * f`` after a product)."""
        f = self.frac_bits if frac_bits is None else frac_bits
        if not isinstance(f, int) or f < 0:
            raise ParameterError("frac_bits must be a non-negative integer")
        try:
            if isinstance(v, np.ndarray):
                scale = 1 << f
                return np.array([as_int(e) / scale for e in v.ravel()], dtype=np.float64).reshape(v.shape)
            return as_int(v) / (1 << f)
        except OverflowError as exc:
            raise EncodingOverflowError("the decoded value is beyond the float range") from exc


@dataclass(frozen=True, slots=True)
class SignedRange:
    """Signed integers ``|v| < bound`` embedded in ``Z_modulus``, with an overflow band.

    Positives map to ``[0, bound)``, negatives to ``(modulus - bound, modulus)``;
    every residue in ``[bound, modulus - bound]`` is the overflow band and
    :meth:`extract` raises :class:`EncodingOverflowError` there.  ``bound``
    defaults to ``modulus // 3`` (the band is the middle third), the convention
    of python-paillier: a sum of two in-range values always lands either in
    range or in the band, never on the other side.
    """

    modulus: int
    bound: int

    def __post_init__(self) -> None:
        if self.modulus < 3:
            raise ParameterError("modulus must be at least 3")
        if self.bound < 1 or 2 * self.bound > self.modulus:
            raise ParameterError("bound must satisfy 1 <= bound <= modulus / 2")

    @classmethod
    def thirds(cls, modulus: int) -> SignedRange:
        """The default range: ``|v| < modulus // 3``."""
        return cls(int(modulus), int(modulus) // 3)

    @classmethod
    def bits(cls, modulus: int, bound_bits: int) -> SignedRange:
        """The range ``|v| < 2^bound_bits`` (e.g. HoLT's ``R1 = 2^ℓ``)."""
        return cls(int(modulus), 1 << bound_bits)

    def check(self, v: int) -> int:
        """Return ``v`` if ``|v| < bound``; raise :class:`EncodingOverflowError` otherwise."""
        v = as_int(v)
        if not -self.bound < v < self.bound:
            raise EncodingOverflowError(
                f"value of {v.bit_length()} bits is outside the signed range |v| < bound "
                f"({self.bound.bit_length()} bits)"
            )
        return v

    def embed(self, v: int) -> int:
        """``v mod modulus`` after checking the range."""
        return self.check(v) % self.modulus

    def embed_many(self, values: Sequence[int]) -> list[int]:
        """:meth:`embed` of every value (Python ints), with one range check for the batch."""
        if not values:
            return []
        low, high = min(values), max(values)
        self.check(low)
        self.check(high)
        if low >= 0:
            return list(values)
        m = self.modulus
        return [v % m for v in values]

    def extract(self, residue: int) -> int:
        """The signed integer a residue stands for; raise in the overflow band."""
        r = as_int(residue)
        if not 0 <= r < self.modulus:
            raise EncodingOverflowError("residue is not reduced modulo the modulus")
        if r < self.bound:
            return r
        if r > self.modulus - self.bound:
            return r - self.modulus
        raise EncodingOverflowError("decoded value lies in the overflow band (the computation overflowed)")
