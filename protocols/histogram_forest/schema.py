"""The public schema both roles derive the same bins from (spec: "Roles", "Modes").

``categories[f]`` is 0 for a numeric feature and ``k >= 2`` for a categorical
feature with codes ``0..k-1``.  Every histogram has ``max_bins(...)`` real slots
plus one missing-value slot (the layout of :mod:`securetrees.trees.histogram`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from securetrees.trees.binning import BinMapper, uniform_edges

__all__ = ["fixed_mapper", "slot_count"]


def slot_count(categories: Sequence[int], n_bins: int) -> int:
    """Real bin slots per histogram: enough for ``n_bins`` numeric bins and every category."""
    return max([n_bins, *categories])


def fixed_mapper(
    categories: Sequence[int], low: npt.NDArray[np.float64], high: npt.NDArray[np.float64], n_bins: int
) -> BinMapper:
    """Data-independent bins: ``n_bins`` equal-width bins over ``[low[f], high[f]]`` for numeric
    features (one bin if the range is empty or unknown), one bin per code for categorical ones."""
    edges: list[npt.NDArray[np.float64]] = []
    counts: list[int] = []
    for f, k in enumerate(categories):
        if k:
            edges.append(np.empty(0, dtype=np.float64))
            counts.append(int(k))
            continue
        lo, hi = float(low[f]), float(high[f])
        e = uniform_edges(lo, hi, n_bins) if np.isfinite(lo) and np.isfinite(hi) and lo < hi else np.empty(0)
        edges.append(np.asarray(e, dtype=np.float64))
        counts.append(int(e.size) + 1)
    return BinMapper(
        max_bins=slot_count(categories, n_bins),
        categorical=tuple(bool(k) for k in categories),
        edges=tuple(edges),
        n_bins=tuple(counts),
    )
