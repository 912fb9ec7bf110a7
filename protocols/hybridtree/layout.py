"""The host's private slot layout: count, gradient and hessian of an instance in one plaintext.

``specs/hybridtree.md``, step H2.  Host leaf ``k`` owns a slot of
``W_k = w_n + w_g + w_h`` bits at bit offset ``o_k`` of its block::

    P_i = (1 + ĝ_i·2^{w_n} + ĥ_i·2^{w_n + w_g}) · 2^{o_k}
    ĝ_i = round(g_i·2^f) + B·2^f  (>= 0 because |g_i| <= B),   ĥ_i = round(h_i·2^f)

The widths are chosen from the number ``n_k`` of instances of the leaf, so any
sum over instances of one leaf stays inside its sub-slots, and the slots of a
block stay below ``2^(capacity)``: sums of plaintexts never carry from one
field into the next.  Guests only ever learn each leaf's block number.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from securetrees.errors import EncodingOverflowError, ParameterError

__all__ = ["Slot", "SlotLayout"]

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Slot:
    """Where one host leaf's statistics live: block, bit offset and the three field widths."""

    block: int
    offset: int
    w_n: int
    w_g: int
    w_h: int

    @property
    def width(self) -> int:
        return self.w_n + self.w_g + self.w_h


@dataclass(frozen=True)
class SlotLayout:
    """Slots of the host leaves of one tree (the host's private packing plan)."""

    frac_bits: int
    g_bound: int
    h_bound: int
    capacity: int
    slots: Mapping[int, Slot]

    @property
    def n_blocks(self) -> int:
        return 1 + max((s.block for s in self.slots.values()), default=-1)

    @classmethod
    def plan(
        cls, leaf_sizes: Mapping[int, int], *, frac_bits: int, g_bound: int, h_bound: int,
        capacity: int,
    ) -> SlotLayout:
        """First-fit the leaves (in increasing id) into blocks of ``capacity`` bits.

        ``g_bound`` (B) and ``h_bound`` are integers with ``|g| <= B`` and ``0 <= h <= h_bound``.
        """
        if g_bound < 1 or h_bound < 1:
            raise ParameterError("gradient and hessian bounds must be positive integers")
        slots: dict[int, Slot] = {}
        used: list[int] = []
        for leaf in sorted(leaf_sizes):
            n = int(leaf_sizes[leaf])
            if n < 1:
                raise ParameterError("a host leaf in the layout must hold instances")
            length = n.bit_length()
            w_n = length
            w_g = frac_bits + g_bound.bit_length() + 1 + length
            w_h = frac_bits + h_bound.bit_length() + length
            width = w_n + w_g + w_h
            if width > capacity:
                raise ParameterError(
                    f"a slot of {width} bits does not fit a {capacity}-bit block: use a larger key "
                    "or fewer fractional bits"
                )
            for b, fill in enumerate(used):
                if fill + width <= capacity:
                    block = b
                    break
            else:
                block = len(used)
                used.append(0)
            slots[leaf] = Slot(block, used[block], w_n, w_g, w_h)
            used[block] += width
        return cls(frac_bits, g_bound, h_bound, capacity, slots)

    def encode(self, leaf: int, g_fixed: Iterable[int], h_fixed: Iterable[int]) -> list[int]:
        """The plaintexts ``P_i`` of instances of ``leaf`` from ``round(g·2^f)``, ``round(h·2^f)``."""
        s = self.slots[leaf]
        shift_b = self.g_bound << self.frac_bits
        g_lim = 2 * shift_b
        h_lim = self.h_bound << self.frac_bits
        out = []
        for g, h in zip(g_fixed, h_fixed, strict=True):
            gh = int(g) + shift_b
            hh = int(h)
            if not (0 <= gh <= g_lim and 0 <= hh <= h_lim):
                raise EncodingOverflowError("a gradient or hessian exceeds its declared bound")
            out.append((1 | gh << s.w_n | hh << (s.w_n + s.w_g)) << s.offset)
        return out

    def unpack(self, residue: int, leaf: int) -> tuple[int, int, int]:
        """``(count, G·2^f, H·2^f)`` of ``leaf``'s slot in an aggregated block plaintext."""
        s = self.slots[leaf]
        v = (int(residue) >> s.offset) & ((1 << s.width) - 1)
        count = v & ((1 << s.w_n) - 1)
        g_hat = (v >> s.w_n) & ((1 << s.w_g) - 1)
        h_hat = v >> (s.w_n + s.w_g)
        return count, g_hat - count * (self.g_bound << self.frac_bits), h_hat
