"""Per-tree row sampling under differential privacy (spec: "Differential privacy and its accounting").

With histogram noise a client weights each of its rows independently of every other row and of the
number of rows: weight ``j`` with a fixed probability ``p_j``, ``j = 0 .. m``.  Adding or removing one
row then changes no other row's weight, and that row adds at most ``m`` to one cell per requested
feature, so a layer's counts have L1 sensitivity ``m · k`` whatever the law ``p``.  This replaces the
fixed-size subsample (adding a row swaps a sampled row for another: a count moves by 2) and the
multinomial bootstrap (adding a row redraws every multiplicity) of the non-private modes.

- ``"subsample"``: Poisson subsampling, weight 1 with probability ``q = subsample_fraction``.
- ``"bootstrap"``: the Poisson bootstrap, weight ``min(Poisson(1), max_multiplicity)``.
- ``"none"``: weight 1.

The weights are drawn from the cryptographic source (:mod:`securetrees.rand`), never from the
user-seeded ML generator: a server knowing the seed would know which rows were drawn, and the row
order would matter.  A weight is the number of cut points at or below a uniform 53-bit integer, so its
law is exactly ``p_j = (cuts[j] - cuts[j-1]) / 2^53`` (the privacy argument holds for any law).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError
from securetrees.protocols.histogram_forest.mechanisms import random_words
from securetrees.rand import RandomSource

__all__ = ["RowLaw", "dp_row_law"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

_UNIT = 1 << 53


@dataclass(frozen=True)
class RowLaw:
    """Independent per-row weights: ``u`` uniform in ``[0, 2^53)``, weight ``#{j < m : cuts[j] <= u}``.

    ``cuts`` is non-decreasing and ends with ``2^53``; its length is ``m + 1``.
    """

    cuts: tuple[int, ...]

    def __post_init__(self) -> None:
        c = self.cuts
        if len(c) < 2 or c[-1] != _UNIT or c[0] < 0 or any(b < a for a, b in itertools.pairwise(c)):
            raise ParameterError("cuts must be non-decreasing in [0, 2^53] and end with 2^53")

    @property
    def max_weight(self) -> int:
        """``m``, the largest weight one row can get (the factor of the layer sensitivity)."""
        return len(self.cuts) - 1

    def pmf(self) -> FloatArray:
        """``p_j`` for ``j = 0 .. m``, exact (integers below 2^53 over a power of two)."""
        edges = np.array((0, *self.cuts), dtype=np.float64)
        return np.asarray(np.diff(edges) / _UNIT, dtype=np.float64)

    def draw(self, n: int, rng: RandomSource) -> IntArray:
        """One tree's weights for ``n`` rows, independent, from ``rng``.  Reveals nothing by itself
        (the weights stay with the client)."""
        if n < 0:
            raise ParameterError("the number of rows must be non-negative")
        u = random_words(n, rng) >> np.uint64(11)
        inner = np.array(self.cuts[:-1], dtype=np.uint64)
        return np.asarray(np.searchsorted(inner, u, side="right"), dtype=np.int64)

    def outcomes(self, n: int) -> Iterator[tuple[IntArray, float]]:
        """Every weight vector of ``n`` rows with positive probability, with that probability (the
        product law; for exact privacy-loss computations on small ``n``)."""
        p = self.pmf()
        support = [j for j in range(p.size) if p[j] > 0]
        for w in itertools.product(support, repeat=n):
            yield np.array(w, dtype=np.int64), math.prod(float(p[j]) for j in w)


def dp_row_law(sampling: str, fraction: float, max_multiplicity: int) -> RowLaw:
    """The per-row weight law of ``sampling`` under DP (module docstring)."""
    if sampling == "none":
        return RowLaw((0, _UNIT))
    if sampling == "subsample":
        if not 0.0 < fraction <= 1.0:
            raise ParameterError("subsample_fraction must be in (0, 1]")
        return RowLaw((round((1.0 - fraction) * _UNIT), _UNIT))
    if sampling == "bootstrap":
        if max_multiplicity < 1:
            raise ParameterError("max_multiplicity must be >= 1")
        cdf = itertools.accumulate(math.exp(-1.0) / math.factorial(j) for j in range(max_multiplicity))
        return RowLaw((*(min(_UNIT, round(c * _UNIT)) for c in cdf), _UNIT))
    raise ParameterError(f"unknown sampling {sampling!r}")
