"""Fixed-point packing of an instance's ``(1, g, h)`` into one Paillier plaintext, and of several
bucket sums into one ciphertext (``specs/secureboost.md``, "Packing layout").

One slot of ``W = w_n + w_g + w_h`` bits holds a count, a shifted gradient and a hessian::

    P_i = 1 + ĝ_i·2^{w_n} + ĥ_i·2^{w_n + w_g}
    ĝ_i = round(g_i·2^f) + B·2^f   (in [0, 2B·2^f] because |g_i| <= B)
    ĥ_i = round(h_i·2^f)           (in [0, H_b·2^f])

Headroom rule: with ``L = n.bit_length()`` for ``n`` training instances,
``w_n = L``, ``w_g = f + bitlen(B) + 1 + L`` and ``w_h = f + bitlen(H_b) + L``, so the sum of
any subset of the ``n`` instances' plaintexts stays inside each field: no carry crosses
a field, and the sum of a bucket never wraps modulo ``N``.  A passive party packs
``k = floor((bitlen(N) - 1) / W)`` bucket sums into one ciphertext, slot ``j`` at bit
``j·W`` (``Σ_j S_j·2^{jW} < 2^{kW} < N``), so the active party decrypts ``ceil(buckets / k)``
ciphertexts instead of one per bucket.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from securetrees.errors import EncodingOverflowError, ParameterError
from securetrees.paillier import Ciphertext
from securetrees.paillier.batch import pack_slots

__all__ = ["PackingLayout", "pack_ciphertexts", "quantize"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
MAX_FRAC_BITS = 40


def quantize(values: FloatArray, frac_bits: int) -> IntArray:
    """``round(v·2^f)`` as int64 (the active party's fixed-point gradients and hessians)."""
    if not 0 <= frac_bits <= MAX_FRAC_BITS:
        raise ParameterError(f"frac_bits must be in [0, {MAX_FRAC_BITS}]")
    v = np.asarray(values, dtype=np.float64)
    if not np.isfinite(v).all():
        raise EncodingOverflowError("a gradient or hessian is not finite")
    return np.rint(np.ldexp(v, frac_bits)).astype(np.int64)


@dataclass(frozen=True)
class PackingLayout:
    """The public slot layout of one tree: scale ``f``, bounds ``B`` and ``H_b``, instance count
    ``n`` and the plaintext capacity (``bitlen(N) - 1``).  Both ends derive the widths from
    these four numbers, which the active party sends with the tree's gradients."""

    frac_bits: int
    g_bound: int
    h_bound: int
    n_instances: int
    capacity: int

    def __post_init__(self) -> None:
        if not 0 <= self.frac_bits <= MAX_FRAC_BITS:
            raise ParameterError(f"frac_bits must be in [0, {MAX_FRAC_BITS}]")
        if self.g_bound < 1 or self.h_bound < 1:
            raise ParameterError("gradient and hessian bounds must be positive integers")
        if self.n_instances < 1:
            raise ParameterError("a layout needs at least one instance")
        if self.width > self.capacity:
            raise ParameterError(
                f"a slot of {self.width} bits does not fit a {self.capacity}-bit plaintext: "
                "use a larger key or fewer fractional bits"
            )

    @property
    def w_n(self) -> int:
        return self.n_instances.bit_length()

    @property
    def w_g(self) -> int:
        return self.frac_bits + self.g_bound.bit_length() + 1 + self.w_n

    @property
    def w_h(self) -> int:
        return self.frac_bits + self.h_bound.bit_length() + self.w_n

    @property
    def width(self) -> int:
        """``W``: bits of one slot."""
        return self.w_n + self.w_g + self.w_h

    @property
    def slots_per_ciphertext(self) -> int:
        """``k``: bucket sums packed into one ciphertext."""
        return self.capacity // self.width

    def encode(self, g_fixed: IntArray, h_fixed: IntArray) -> list[int]:
        """The plaintexts ``P_i`` from ``round(g·2^f)`` and ``round(h·2^f)``; raises
        :class:`EncodingOverflowError` if a value exceeds its declared bound."""
        g = np.asarray(g_fixed, dtype=np.int64)
        h = np.asarray(h_fixed, dtype=np.int64)
        if g.shape != h.shape or g.ndim != 1 or g.size > self.n_instances:
            raise ParameterError("one gradient and one hessian per instance, at most n_instances")
        shift = self.g_bound << self.frac_bits
        if np.abs(g).max(initial=0) > shift or h.min(initial=0) < 0 or h.max(initial=0) > (
                self.h_bound << self.frac_bits):
            raise EncodingOverflowError("a gradient or hessian exceeds its declared bound")
        off_g, off_h = self.w_n, self.w_n + self.w_g
        return [1 | (gi + shift) << off_g | hi << off_h for gi, hi in zip(g.tolist(), h.tolist(), strict=True)]

    def unpack_slot(self, value: int) -> tuple[int, int, int]:
        """``(count, G·2^f, H·2^f)`` of one slot value (a sum over ``count`` instances)."""
        if value < 0 or value >> self.width:
            raise EncodingOverflowError("a slot value lies outside its slot")
        return self._slots([value])[0]

    def _slots(self, values: Iterable[int]) -> list[tuple[int, int, int]]:
        """:meth:`unpack_slot` of values known to lie in their slot, the layout's constants read once."""
        w_n, w_g = self.w_n, self.w_g
        mask_n, mask_g = (1 << w_n) - 1, (1 << w_g) - 1
        offset = self.g_bound << self.frac_bits
        out = []
        for value in values:
            count = value & mask_n
            out.append((count, ((value >> w_n) & mask_g) - count * offset, value >> (w_n + w_g)))
        return out

    def unpack(self, residues: Sequence[int], n_buckets: int) -> IntArray:
        """The ``(n_buckets, 3)`` integer sums ``(count, G·2^f, H·2^f)`` from the decrypted
        residues of packed ciphertexts (slot ``j`` of residue ``c`` is bucket ``c·k + j``)."""
        k = self.slots_per_ciphertext
        if len(residues) != -(-n_buckets // k):
            raise ParameterError(f"{n_buckets} buckets need {-(-n_buckets // k)} packed ciphertexts")
        width = self.width
        mask = (1 << width) - 1
        rows = self._slots((int(residues[b // k]) >> (b % k * width)) & mask for b in range(n_buckets))
        out = np.array(rows, dtype=np.int64).reshape(n_buckets, 3)
        for c, r in enumerate(residues):
            used = min(k, n_buckets - c * k)
            if int(r) >> (used * self.width):
                raise EncodingOverflowError("a packed plaintext has bits above its last slot")
        return out


def pack_ciphertexts(
    sums: Sequence[Ciphertext], layout: PackingLayout, executor: Executor | None = None,
) -> list[Ciphertext]:
    """Pack bucket-sum ciphertexts ``k`` to one: ``Σ_j S_j·2^{jW}`` by Horner's rule (one scalar
    multiplication by ``2^W`` and one addition per bucket), on ``executor`` if given; not fresh:
    re-randomise before sending."""
    k = layout.slots_per_ciphertext
    packed, _ = pack_slots([sums[start:start + k] for start in range(0, len(sums), k)], layout.width,
                           executor=executor)
    return [c for c in packed if c is not None]
