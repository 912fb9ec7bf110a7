"""Where a provider puts a split's threshold (``specs/revfrf.md``, "Thresholds no value can
tie").

A candidate ``s`` from the splitter separates the training values of its column into those
``≤ s`` and those ``> s``; every threshold in the gap between the largest value below and the
smallest above separates them the same way, so the training splits do not depend on where in
the gap it sits.  HoLT's CC sees a blurred ``|x − s|``, and a threshold that a value can equal
(a tie) or that sits nearer one side of its gap shows it which side a value is on
("What the CC learns from a prediction request").  :class:`ColumnGrid` moves each threshold to
the middle of the grid cell at the middle of its gap: the column's fixed-point grid is
``o + k·g`` with ``g`` the gcd of the differences of its training values (``2^f`` for integer
data); the threshold ``S = P + ⌊g/2⌋`` for the cell ``[P, P + g)`` holding the gap's midpoint.
HoLT compares ``x ≤ s`` as ``2X < 2S + 1``, so a value on the grid is never within ``g/2``
units of the comparison's boundary, on either side: ``x = s`` cannot happen and the nearest
values on the two sides are equally far (to one unit).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from securetrees.encoding import FixedPoint

__all__ = ["ColumnGrid"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class ColumnGrid:
    """One column's distinct training values and their fixed-point grid (step and offset)."""

    values: FloatArray  # sorted distinct present values
    step: int  # g, in units of 2^-f
    offset: int  # o: one grid point (the smallest value's code)
    codec: FixedPoint

    @classmethod
    def fit(cls, x: FloatArray, codec: FixedPoint) -> ColumnGrid:
        """The grid of the present values of ``x`` (a single value: step 1)."""
        values = np.unique(x[~np.isnan(x)])
        codes = [codec.encode_scalar(float(v)) for v in values.tolist()]
        step = 0
        for a, b in itertools.pairwise(codes):
            step = math.gcd(step, b - a)
        return cls(values, max(step, 1), codes[0] if codes else 0, codec)

    def centre(self, s: float) -> float:
        """The threshold that splits the training values as ``s`` does, at the middle of the
        grid cell at the middle of their gap around ``s``; ``s`` unchanged when every value
        lies on one side (or ``s`` is infinite: the split that isolates missing values)."""
        if not math.isfinite(s):
            return s
        i = int(np.searchsorted(self.values, s, side="right"))  # values[:i] <= s < values[i:]
        if i == 0 or i == self.values.size:
            return s
        a = self.codec.encode_scalar(float(self.values[i - 1]))
        b = self.codec.encode_scalar(float(self.values[i]))
        g, o = self.step, self.offset
        cell = o + ((a + b) // 2 - o) // g * g
        cell = min(max(cell, a), b - g)  # a and b are grid points: the cell lies in [a, b]
        return float(self.codec.decode(cell + g // 2))
