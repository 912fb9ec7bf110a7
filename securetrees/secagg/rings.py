"""The groups that masked vectors live in: ``Z_{2^k}`` (k <= 64), ``Z_N``, and fixed point on top of ``Z_{2^k}``.

A :class:`Ring` knows how to validate an input vector, add vectors and PRG
streams (each with either sign) to an accumulator, sum vectors, and put vectors on the wire as a
numpy array (raw bytes with dtype and shape).  ``Z_{2^k}`` uses numpy ``uint64``
wrap-around (no per-element Python work); ``Z_N`` uses Python integers and
rejection-sampled masks (the modulus is not a power of two).
:class:`FixedPointVectors` maps bounded floats into ``Z_{2^k}`` and refuses any
configuration whose sum could overflow (``specs/secagg.md``, "Rings, bounds and defaults"; ``specs/encoding.md``).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from securetrees.encoding import as_int
from securetrees.errors import EncodingOverflowError, ParameterError, ProtocolError
from securetrees.secagg.prg import MaskExpander, MaskTerm, expand_mod

__all__ = ["ZN", "FixedPointVectors", "Ring", "Vector", "Z2k"]

Vector = Any  # np.ndarray[uint64] for Z2k, list[int] for ZN
U64: Final = np.uint64


class Ring(ABC):
    """An additive group of vectors with PRG masks."""

    @property
    @abstractmethod
    def label(self) -> str:
        """A short description, bound into every mask key's context."""

    @abstractmethod
    def check(self, values: Any) -> Vector:
        """A private copy of ``values`` as a ring vector; ParameterError if out of range."""

    @abstractmethod
    def zeros(self, length: int) -> Vector: ...

    @abstractmethod
    def accumulate(
        self,
        acc: Vector,
        masks: Sequence[MaskTerm],
        expander: MaskExpander,
        *,
        plus: Sequence[Vector] = (),
    ) -> Vector:
        """``acc + sum(plus) ± PRG(key)`` for every mask; may work in place and returns the
        result (unreduced: finish afterwards)."""

    @abstractmethod
    def finish(self, acc: Vector) -> Vector:
        """Reduce an accumulator to canonical representatives."""

    @abstractmethod
    def add(self, a: Vector, b: Vector) -> Vector: ...

    @abstractmethod
    def iadd(self, acc: Vector, v: Vector) -> Vector:
        """``acc + v`` without reduction, reusing ``acc`` where possible (finish afterwards)."""

    @abstractmethod
    def to_wire(self, v: Vector) -> npt.NDArray[Any]: ...

    @abstractmethod
    def from_wire(self, data: npt.NDArray[Any], length: int) -> Vector:
        """Validate a received array (ProtocolError on wrong dtype, shape or range)."""

    def sum(self, vectors: Sequence[Vector], length: int) -> Vector:
        acc = self.zeros(length)
        for v in vectors:
            acc = self.iadd(acc, v)
        return self.finish(acc)


class Z2k(Ring):
    """Integers mod ``2^bits`` (1 <= bits <= 64) as numpy ``uint64``; masks are keystream words."""

    def __init__(self, bits: int = 64) -> None:
        if not 1 <= bits <= 64:
            raise ParameterError(f"Z2k supports 1 <= bits <= 64, got {bits}")
        self.bits = bits
        self._mask = U64((1 << bits) - 1)

    @property
    def label(self) -> str:
        return f"Z2^{self.bits}"

    def __repr__(self) -> str:
        return f"Z2k(bits={self.bits})"

    def check(self, values: Any) -> Vector:
        if isinstance(values, (list, tuple)):
            # np.asarray would turn residues mixing values below and above 2^63 into float64.
            ints = [as_int(v) for v in values]
            if any(not 0 <= v < 1 << 64 for v in ints):
                raise ParameterError("Z2k inputs are non-negative residues below 2^64")
            values = np.array(ints, dtype=U64)
        arr = np.asarray(values)
        if arr.ndim != 1:
            raise ParameterError("a secure-sum input is a one-dimensional vector")
        if arr.dtype.kind == "u":
            out = arr.astype(U64, copy=True)
        elif arr.dtype.kind == "i":
            if arr.size and int(arr.min()) < 0:
                raise ParameterError("Z2k inputs are non-negative residues")
            out = arr.astype(U64, copy=True)
        elif arr.size == 0:
            out = np.zeros(0, U64)
        else:
            raise ParameterError(f"Z2k inputs are integer arrays, got dtype {arr.dtype}")
        if self.bits < 64 and out.size and int(out.max()) > int(self._mask):
            raise ParameterError(f"an input is not a residue mod 2^{self.bits}")
        return out

    def zeros(self, length: int) -> Vector:
        return np.zeros(length, U64)

    def accumulate(
        self,
        acc: Vector,
        masks: Sequence[MaskTerm],
        expander: MaskExpander,
        *,
        plus: Sequence[Vector] = (),
    ) -> Vector:
        expander.accumulate(acc, masks, plus=plus)
        return acc

    def finish(self, acc: Vector) -> Vector:
        if self.bits < 64:
            np.bitwise_and(acc, self._mask, out=acc)
        return acc

    def add(self, a: Vector, b: Vector) -> Vector:
        return self.finish(np.add(a, b))

    def iadd(self, acc: Vector, v: Vector) -> Vector:
        return np.add(acc, v, out=acc)

    def to_wire(self, v: Vector) -> npt.NDArray[Any]:
        return np.ascontiguousarray(v, dtype=U64)

    def from_wire(self, data: npt.NDArray[Any], length: int) -> Vector:
        if not isinstance(data, np.ndarray) or data.dtype != U64 or data.shape != (length,):
            raise ProtocolError(f"expected a uint64 vector of length {length}")
        if self.bits < 64 and length and int(data.max()) > int(self._mask):
            raise ProtocolError(f"a received value is not a residue mod 2^{self.bits}")
        return data


class ZN(Ring):
    """Integers mod an arbitrary ``N >= 3`` (e.g. a Paillier modulus); rejection-sampled masks."""

    def __init__(self, modulus: int) -> None:
        modulus = int(modulus)
        if modulus < 3:
            raise ParameterError("the modulus must be at least 3")
        self.modulus = modulus
        self._width = (modulus.bit_length() + 7) // 8

    @property
    def label(self) -> str:
        return f"Z_N/{self.modulus.bit_length()}/{self.modulus:x}"

    def __repr__(self) -> str:
        return f"ZN(modulus of {self.modulus.bit_length()} bits)"

    def check(self, values: Any) -> Vector:
        out: list[int] = []
        for v in values:
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
                raise ParameterError("Z_N inputs are integers")
            iv = int(v)
            if not 0 <= iv < self.modulus:
                raise ParameterError("a Z_N input lies outside [0, N)")
            out.append(iv)
        return out

    def zeros(self, length: int) -> Vector:
        return [0] * length

    def accumulate(
        self,
        acc: Vector,
        masks: Sequence[MaskTerm],
        expander: MaskExpander,
        *,
        plus: Sequence[Vector] = (),
    ) -> Vector:
        for v in plus:
            acc = self.iadd(acc, v)
        for key, subtract in masks:
            stream = expand_mod(key, len(acc), self.modulus)
            if subtract:
                acc = [a - m for a, m in zip(acc, stream, strict=True)]
            else:
                acc = [a + m for a, m in zip(acc, stream, strict=True)]
        return acc

    def finish(self, acc: Vector) -> Vector:
        return [a % self.modulus for a in acc]

    def add(self, a: Vector, b: Vector) -> Vector:
        _same_length(a, b)
        n = self.modulus
        return [(x + y) % n for x, y in zip(a, b, strict=True)]

    def iadd(self, acc: Vector, v: Vector) -> Vector:
        _same_length(acc, v)
        return [x + y for x, y in zip(acc, v, strict=True)]

    def to_wire(self, v: Vector) -> npt.NDArray[Any]:
        raw = b"".join(int(x).to_bytes(self._width, "little") for x in v)
        return np.frombuffer(raw, dtype=np.uint8).reshape(len(v), self._width)

    def from_wire(self, data: npt.NDArray[Any], length: int) -> Vector:
        if (
            not isinstance(data, np.ndarray)
            or data.dtype != np.uint8
            or data.shape != (length, self._width)
        ):
            raise ProtocolError(f"expected a ({length}, {self._width}) uint8 array")
        raw = data.tobytes()
        w = self._width
        out = [int.from_bytes(raw[i : i + w], "little") for i in range(0, len(raw), w)]
        if any(x >= self.modulus for x in out):
            raise ProtocolError("a received value lies outside [0, N)")
        return out


class FixedPointVectors:
    """Bounded real vectors summed exactly in ``Z_{2^bits}`` (two's complement, scale ``2^frac_bits``).

    Every input must satisfy ``|x| <= bound``; the configuration is refused with
    :class:`ParameterError` unless ``parties * round(bound * 2^frac_bits) < 2^(bits-1)``,
    so no sum of ``parties`` admissible inputs can wrap.  Rounding error per input
    is at most ``2^-(frac_bits+1)``.
    """

    def __init__(self, bound: float, parties: int, *, frac_bits: int = 32, bits: int = 64) -> None:
        if not (math.isfinite(bound) and bound > 0):
            raise ParameterError("the bound must be a positive finite number")
        if parties < 1:
            raise ParameterError("parties must be positive")
        if not 0 <= frac_bits <= 62:
            raise ParameterError("frac_bits must be in [0, 62]")
        self.ring = Z2k(bits)
        self.bound = float(bound)
        self.parties = parties
        self.frac_bits = frac_bits
        self._scale = float(2**frac_bits)
        self._max_int = math.floor(self.bound * self._scale + 0.5)
        if parties * self._max_int >= 1 << (bits - 1):
            raise ParameterError(
                f"a sum of {parties} values bounded by {bound} at 2^{frac_bits} could overflow "
                f"Z_2^{bits}: need parties * bound * 2^frac_bits < 2^{bits - 1}"
            )

    def __repr__(self) -> str:
        return (
            f"FixedPointVectors(bound={self.bound}, parties={self.parties}, "
            f"frac_bits={self.frac_bits}, bits={self.ring.bits})"
        )

    def encode(self, values: Any) -> npt.NDArray[np.uint64]:
        """Reals to residues; EncodingOverflowError for |x| > bound, ParameterError for NaN/inf."""
        x = np.asarray(values, dtype=np.float64)
        if x.ndim != 1:
            raise ParameterError("a secure-sum input is a one-dimensional vector")
        if not np.all(np.isfinite(x)):
            raise ParameterError("cannot encode NaN or infinite values")
        if x.size and float(np.max(np.abs(x))) > self.bound:
            raise EncodingOverflowError(f"an input exceeds the declared bound {self.bound}")
        ints = np.rint(x * self._scale).astype(np.int64)
        out: npt.NDArray[np.uint64] = self.ring.finish(ints.view(U64).copy())
        return out

    def decode(self, total: npt.NDArray[np.uint64]) -> npt.NDArray[np.float64]:
        """A sum of encoded vectors back to reals (signed reading of the residues)."""
        bits = self.ring.bits
        arr = np.asarray(total, dtype=U64)
        if bits < 64:
            signed = arr.astype(np.int64)
            signed = np.where(signed >= 1 << (bits - 1), signed - (1 << bits), signed)
        else:
            signed = arr.view(np.int64)
        limit = self.parties * self._max_int
        if signed.size and (int(signed.max()) > limit or int(signed.min()) < -limit):
            raise EncodingOverflowError("the sum lies outside the range its bounds allow")
        return signed.astype(np.float64) / self._scale


def _same_length(a: Vector, b: Vector) -> None:
    if len(a) != len(b):
        raise ParameterError(f"vectors of lengths {len(a)} and {len(b)} cannot be added")
