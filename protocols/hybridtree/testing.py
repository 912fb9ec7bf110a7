"""Test-only data for HybridTree: a small synthetic hybrid layout (numpy only).

The label depends on host and guest columns, so guest layers matter; a few
values are missing.  Machine-learning randomness from a seeded numpy Generator.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["HybridData", "hybrid_data"]


@dataclass(frozen=True)
class HybridData:
    X: npt.NDArray[np.float64]
    y: npt.NDArray[np.int64]
    y_reg: npt.NDArray[np.float64]
    y_multi: npt.NDArray[np.int64]
    host_features: list[int]
    guest_features: list[int]
    guest_rows: list[npt.NDArray[np.int64]]


def hybrid_data(n: int = 240, n_guests: int = 4, *, seed: int = 0) -> HybridData:
    """``n`` rows, host columns 0-2, guest columns 3-5 (column 5 categorical codes 0..3);
    guests hold disjoint, nearly equal random row sets covering every row."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    X[:, 5] = rng.integers(0, 4, size=n)
    score = X[:, 0] - X[:, 1] + 1.5 * X[:, 3] - X[:, 4] + (X[:, 5] == 2)
    y = (score > 0).astype(np.int64)
    y_reg = score + 0.1 * rng.normal(size=n)
    y_multi = np.digitize(score, [-1.0, 1.0]).astype(np.int64)
    missing = rng.random((n, 6)) < 0.04
    missing[:, 5] = False
    X[missing] = np.nan
    rows = [np.sort(r).astype(np.int64) for r in np.array_split(rng.permutation(n), n_guests)]
    return HybridData(X, y, y_reg, y_multi, [0, 1, 2], [3, 4, 5], rows)
