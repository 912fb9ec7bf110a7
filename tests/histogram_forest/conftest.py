"""Small synthetic horizontal data for the histogram forest tests."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

Parts = list[tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]]


def make_parts(n_clients: int, rows: int, *, seed: int = 0, n_classes: int = 2, missing: bool = True) -> Parts:
    """Features: two numeric (one in [0, 10], one integer-valued in [0, 20]), one categorical with 4 codes.
    The label depends on all three, so trees have something to find."""
    gen = np.random.default_rng(seed)
    parts: Parts = []
    for _ in range(n_clients):
        a = np.round(gen.uniform(0, 10, rows), 1)
        b = gen.integers(0, 21, rows).astype(np.float64)
        c = gen.integers(0, 4, rows).astype(np.float64)
        score = (a > 4.0).astype(int) + (b > 12).astype(int) + (c == 2).astype(int)
        y = np.minimum(score, n_classes - 1) if n_classes > 2 else (score >= 2).astype(int)
        flip = gen.random(rows) < 0.05
        y = np.where(flip, (y + 1) % n_classes, y)
        X = np.column_stack([a, b, c])
        if missing:
            X[gen.random(rows) < 0.03, 2] = np.nan
        parts.append((X, y.astype(np.int64)))
    return parts


CATEGORICAL = [False, False, True]
RANGES = [(0.0, 10.0), (0.0, 20.0), None]
CATEGORIES = [0, 0, 4]
CLASSES = [0, 1]


@pytest.fixture
def parts3() -> Parts:
    return make_parts(3, 120)


@pytest.fixture
def make() -> object:
    """The data factory :func:`make_parts` (fixtures, because test modules are imported by path)."""
    return make_parts


@pytest.fixture
def schema() -> dict[str, object]:
    """The public schema, declared (DP reads none of it from the data)."""
    return {"categorical_features": CATEGORICAL, "feature_ranges": RANGES, "categories": CATEGORIES, "classes": CLASSES}
