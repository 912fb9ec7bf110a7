"""Rank statistics for the attack measurements (how well an attacker's score orders a secret
column): average ranks and Spearman's rank correlation, on numpy arrays."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["average_ranks", "spearman"]

FloatArray = npt.NDArray[np.float64]


def average_ranks(a: npt.ArrayLike) -> FloatArray:
    """Ranks ``0..n-1`` with ties given their mean rank (Spearman's convention)."""
    v = np.asarray(a, dtype=np.float64)
    order = np.argsort(v, kind="stable")
    ranks = np.empty(v.size, dtype=np.float64)
    ranks[order] = np.arange(v.size, dtype=np.float64)
    _, inverse, counts = np.unique(v, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return np.asarray(sums[inverse] / counts[inverse], dtype=np.float64)


def spearman(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    """Spearman's rank correlation: Pearson's correlation of the average ranks (0 if either
    side is constant)."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return 0.0
    return float(np.corrcoef(average_ranks(x), average_ranks(y))[0, 1])
