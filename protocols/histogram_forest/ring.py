"""The ring both roles sum in, and the fixed-point encoding of regression targets (spec: "Regression").

Counts and target sums travel as integers: int64 in plain mode, masked in ``Z_2^64`` with secure
aggregation.  A sum that reached ``2^63`` would wrap (secure) or overflow (plain) without anyone
noticing, so every party checks the worst case before it sends anything: :func:`check_capacity`.

A regression target ``y`` in the public range ``[low, high]`` is released as two integers
``t1 = round(u · 2^bits)`` and ``t2 = round(u² · 2^bits)`` with ``u = (y - low) / (high - low)`` in
``[0, 1]``: the per-bin statistics ``(Σw, Σw·t1, Σw·t2)`` are then exact integer sums, the same in
plain and secure mode, and the squared-error criterion (invariant under ``y ↦ a·y + b`` up to the
common factor ``a²``) chooses splits on ``u`` as it would on ``y``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from securetrees.errors import EncodingOverflowError, ParameterError
from securetrees.secagg.rings import Z2k

__all__ = ["MAX_Y_BITS", "RING", "Y_BITS", "check_capacity", "encode_targets"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

RING = Z2k(64)
#: Default fractional bits of an encoded target (a step of 2^-32 of the declared range).
Y_BITS = 32
#: Largest accepted number of fractional bits (one row must fit: 2^bits < 2^63).
MAX_Y_BITS = 60
_LIMIT = 1 << 63


def check_capacity(rows: int, parties: int, bits: int) -> None:
    """EncodingOverflowError unless ``parties`` clients of at most ``rows`` rows each can never push a
    sum past ``2^63 - 1``.

    Why this bound: without DP a client's row weights add up to at most its number of rows (multinomial
    bootstrap: exactly ``n``; subsample ``⌈f·n⌉``; none ``n``), and each weighted statistic of a row is
    at most ``weight · 2^bits``, so one client's cell is below ``rows · 2^bits`` and the sum over clients
    below ``parties · rows · 2^bits``.  A client checks its own ``rows``: when every client passes, the
    sum fits."""
    if rows < 0 or parties < 1 or not 0 <= bits <= MAX_Y_BITS:
        raise ParameterError("rows >= 0, parties >= 1 and 0 <= bits <= MAX_Y_BITS are required")
    if rows * parties << bits >= _LIMIT:
        raise EncodingOverflowError(
            f"{parties} clients of {rows} rows with {bits} fractional bits can overflow the 64-bit ring "
            f"(needs rows · clients · 2^bits < 2^63): lower the precision or split the data"
        )


def encode_targets(y: npt.ArrayLike, low: float, high: float, bits: int) -> IntArray:
    """``(t1, t2)`` per row (shape ``(n, 2)``, int64): the fixed-point target and its square, over the
    public range.  ParameterError for a target outside ``[low, high]`` or not finite."""
    if not (np.isfinite(low) and np.isfinite(high) and low < high):
        raise ParameterError("the target range needs finite low < high")
    if not 0 <= bits <= MAX_Y_BITS:
        raise ParameterError(f"bits must lie in [0, {MAX_Y_BITS}]")
    ya = np.asarray(y, dtype=np.float64)
    if ya.ndim != 1 or not np.all(np.isfinite(ya)) or (ya.size and (ya.min() < low or ya.max() > high)):
        raise ParameterError(f"targets must be finite and inside the declared range [{low}, {high}]")
    u = np.clip((ya - low) / (high - low), 0.0, 1.0)
    scale = float(1 << bits)
    return np.column_stack([np.rint(u * scale), np.rint(u * u * scale)]).astype(np.int64)

