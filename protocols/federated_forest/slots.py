"""Packing of label statistics into Paillier plaintext slots (``specs/federated_forest.md``,
"Encrypted label statistics"; ``specs/paillier.md``).

A *unit* is one sample's non-negative statistics vector of ``n_slots`` integers:
classification, the one-hot class indicator; regression, ``(1, Y + B, Y²)`` with
``Y = round(y·2^f)`` and ``B = max|Y|``.  A plaintext holds units side by side, slot
``s`` of bin ``j`` at bit ``(j·n_slots + s)·slot_bits``.  Sums of at most
``total_weight`` weighted units never carry out of a slot, because
``slot_bits > bitlen(total_weight · max unit)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from securetrees.encoding import FixedPoint
from securetrees.errors import EncodingOverflowError, ParameterError

__all__ = ["SlotLayout", "classification_units", "regression_units"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class SlotLayout:
    """``n_slots`` slots of ``slot_bits`` bits per bin; ``bias`` and ``frac_bits`` decode regression."""

    n_slots: int
    slot_bits: int
    regression: bool = False
    bias: int = 0
    frac_bits: int = 0

    def __post_init__(self) -> None:
        if self.n_slots < 1 or self.slot_bits < 2 or self.slot_bits % 8:
            raise ParameterError("a slot layout needs >= 1 slot of a positive multiple of 8 bits")

    @property
    def bin_bits(self) -> int:
        return self.n_slots * self.slot_bits

    def bins_per_plaintext(self, modulus_bits: int) -> int:
        """How many bins fit below ``2^(modulus_bits - 1) < N``."""
        k = (modulus_bits - 1) // self.bin_bits
        if k < 1:
            raise ParameterError("the key is too small for one bin of label statistics")
        return k

    def pack_unit(self, unit: npt.ArrayLike) -> int:
        """One sample's unit as an integer (slot 0 lowest)."""
        out = 0
        for s, v in enumerate(np.asarray(unit, dtype=object).tolist()):
            iv = int(v)
            if not 0 <= iv < 1 << self.slot_bits:
                raise EncodingOverflowError("a unit value does not fit its slot")
            out |= iv << (s * self.slot_bits)
        return out

    def unpack(self, plaintext: int, n_bins: int) -> list[list[int]]:
        """``n_bins`` bins of ``n_slots`` integers from one plaintext (low bin first)."""
        mask = (1 << self.slot_bits) - 1
        return [[(plaintext >> ((j * self.n_slots + s) * self.slot_bits)) & mask
                 for s in range(self.n_slots)] for j in range(n_bins)]

    def decode(self, sums: list[list[int]]) -> FloatArray:
        """Slot sums of bins to criterion statistics: class counts, or ``(w, Σwy, Σwy²)``."""
        if not self.regression:
            return np.asarray(sums, dtype=np.float64).reshape(len(sums), self.n_slots)
        out = np.empty((len(sums), 3), dtype=np.float64)
        one, two = 1 << self.frac_bits, 1 << (2 * self.frac_bits)
        for j, (w, s1, s2) in enumerate(sums):
            out[j] = (w, (s1 - self.bias * w) / one, s2 / two)
        return out


def _width(max_total: int) -> int:
    bits = max_total.bit_length() + 1
    return (bits + 7) // 8 * 8


def classification_units(codes: npt.NDArray[np.int64], n_classes: int) -> tuple[SlotLayout, list[int]]:
    """Layout and packed units of class codes ``0..n_classes-1``."""
    layout = SlotLayout(n_slots=n_classes, slot_bits=_width(codes.size))
    return layout, [1 << (int(c) * layout.slot_bits) for c in codes]


def regression_units(y: FloatArray, frac_bits: int) -> tuple[SlotLayout, list[int]]:
    """Layout and packed units ``(1, Y + B, Y²)`` of regression targets at scale ``2^frac_bits``."""
    fp = FixedPoint(frac_bits)
    Y = [int(v) for v in np.asarray(fp.encode(np.asarray(y, dtype=np.float64)), dtype=object).tolist()]
    bias = max((abs(v) for v in Y), default=0)
    n = len(Y)
    largest = max(1, 2 * bias, bias * bias)
    layout = SlotLayout(n_slots=3, slot_bits=_width(n * largest), regression=True, bias=bias,
                        frac_bits=frac_bits)
    return layout, [layout.pack_unit((1, v + bias, v * v)) for v in Y]
