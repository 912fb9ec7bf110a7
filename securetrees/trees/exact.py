"""Statistics whose float64 sums are exact, so histograms may be built in any order.

Spec: ``specs/trees.md`` section "Exact sums and sibling subtraction".  A column whose
values are integer multiples of ``2**e`` and whose absolute values sum to at most
``2**(53+e)`` has every partial sum, over any subset in any order, an integer multiple
of ``2**e`` no larger than ``2**(53+e)`` in magnitude: each such number is a float64,
so no addition or subtraction of these sums rounds.  A histogram built from such
statistics is then the same bit for bit however the samples are grouped: built
directly, summed from parties' shares, or obtained as parent minus sibling.

Class counts and bootstrap weights (integers) already qualify; the GBDT's gradients and
hessians are rounded onto the finest grid that qualifies (:func:`snap_to_exact_grid`),
a change of at most ``2**-51`` times the column's absolute sum per value.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError

__all__ = ["grid_exponents", "snap_to_exact_grid", "sums_exactly"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def grid_exponents(stats: FloatArray, *, spare_bits: int = 1) -> IntArray:
    """Per column, ``e = k - 53 + spare_bits`` where ``2**(k-1) <= Σ|column| < 2**k``
    (zero columns: 0).  With ``spare_bits >= 1`` every subset sum of ``2**e``-multiples
    stays below ``2**(53+e)`` in magnitude, with room for the rounding of the computed
    ``Σ|column|``, so it is exact."""
    s = np.asarray(stats, dtype=np.float64)
    if s.ndim != 2:
        raise ParameterError("statistics must be a 2-D array (samples, stats)")
    total = np.abs(s).sum(axis=0)
    if not np.all(np.isfinite(total)):
        raise ParameterError("statistics must be finite")
    _, k = np.frexp(total)
    return np.where(total > 0, k.astype(np.int64) - 53 + spare_bits, 0)


def sums_exactly(stats: FloatArray) -> bool:
    """True if every column's values are multiples of ``2**e`` (:func:`grid_exponents`):
    then all float64 sums of its values over any subset, in any order, are exact."""
    s = np.asarray(stats, dtype=np.float64)
    if s.ndim != 2 or not np.all(np.isfinite(s)):
        return False
    e = grid_exponents(s)
    scaled = np.ldexp(s, -e)
    return bool(np.array_equal(scaled, np.rint(scaled)))


def snap_to_exact_grid(stats: FloatArray) -> FloatArray:
    """``stats`` with each column rounded to the nearest multiple of ``2**e``
    (:func:`grid_exponents` with two spare bits, so that the rounding, which may carry the
    absolute sum past a power of two, still leaves :func:`sums_exactly` true).  Columns
    of small integers (counts) are unchanged."""
    s = np.asarray(stats, dtype=np.float64)
    e = grid_exponents(s, spare_bits=2)
    if np.all((e > -1000) & (e < 1000)):  # powers of two whose products with s neither under- nor overflow
        up, down = np.ldexp(1.0, -e), np.ldexp(1.0, e)
        return np.asarray(np.rint(s * up) * down, dtype=np.float64)
    return np.asarray(np.ldexp(np.rint(np.ldexp(s, -e)), e), dtype=np.float64)
