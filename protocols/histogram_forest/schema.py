"""The public schema both roles derive the same bins from (spec: "Roles", "Modes").

``categories[f]`` is 0 for a numeric feature and ``k >= 2`` for a categorical
feature with codes ``0..k-1``.  Every histogram has ``max_bins(...)`` real slots
plus one missing-value slot (the layout of :mod:`securetrees.trees.histogram`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError
from securetrees.trees.binning import BinMapper, uniform_edges

__all__ = ["check_edges", "fixed_mapper", "grid_quantile_edges", "mapper_from_edges", "slot_count"]


def slot_count(categories: Sequence[int], n_bins: int) -> int:
    """Real bin slots per histogram: enough for ``n_bins`` numeric bins and every category."""
    return max([n_bins, *categories])


def fixed_mapper(
    categories: Sequence[int], low: npt.NDArray[np.float64], high: npt.NDArray[np.float64], n_bins: int
) -> BinMapper:
    """Data-independent bins: ``n_bins`` equal-width bins over ``[low[f], high[f]]`` for numeric
    features (one bin if the range is empty or unknown), one bin per code for categorical ones."""
    edges: list[npt.NDArray[np.float64]] = []
    for f, k in enumerate(categories):
        lo, hi = float(low[f]), float(high[f])
        ok = not k and np.isfinite(lo) and np.isfinite(hi) and lo < hi
        edges.append(np.asarray(uniform_edges(lo, hi, n_bins) if ok else np.empty(0), dtype=np.float64))
    return mapper_from_edges(categories, edges, n_bins)


def check_edges(categories: Sequence[int], edges: Sequence[npt.NDArray[np.float64]], n_bins: int) -> None:
    """ParameterError unless each numeric feature has at most ``n_bins - 1`` finite, strictly increasing
    edges and each categorical feature none."""
    if len(edges) != len(categories):
        raise ParameterError("one edge array per feature")
    for k, e in zip(categories, edges, strict=True):
        if e.ndim != 1 or (k and e.size) or e.size > n_bins - 1:
            raise ParameterError("too many edges, or edges for a categorical feature")
        if e.size and (not np.all(np.isfinite(e)) or np.any(np.diff(e) <= 0)):
            raise ParameterError("edges must be finite and strictly increasing")


def mapper_from_edges(
    categories: Sequence[int], edges: Sequence[npt.NDArray[np.float64]], n_bins: int
) -> BinMapper:
    """The :class:`BinMapper` of agreed edges (numeric) and category counts (categorical)."""
    check_edges(categories, edges, n_bins)
    counts = [int(k) if k else int(e.size) + 1 for k, e in zip(categories, edges, strict=True)]
    return BinMapper(
        max_bins=slot_count(categories, n_bins),
        categorical=tuple(bool(k) for k in categories),
        edges=tuple(np.asarray(e, dtype=np.float64) for e in edges),
        n_bins=tuple(counts),
    )


def grid_quantile_edges(grid: BinMapper, counts: npt.NDArray[np.float64], feature: int, n_bins: int
                        ) -> npt.NDArray[np.float64]:
    """Edges of at most ``n_bins`` bins at the grid boundaries where the cumulative share of the
    (aggregated, possibly noisy) grid ``counts`` of ``feature`` first reaches ``k / n_bins``."""
    boundaries = grid.edges[feature]  # cell j is (boundaries[j-1], boundaries[j]]
    c = np.maximum(np.asarray(counts, dtype=np.float64), 0.0)
    total = float(c.sum())
    if boundaries.size == 0 or total <= 0:
        return np.asarray(boundaries[:: max(1, boundaries.size // max(1, n_bins - 1))][: n_bins - 1])
    share = np.cumsum(c)[:-1] / total  # share at or below boundaries[j]
    targets = np.arange(1, n_bins) / n_bins
    idx = np.unique(np.minimum(np.searchsorted(share, targets, side="left"), boundaries.size - 1))
    return np.asarray(boundaries[idx], dtype=np.float64)
