"""A synthetic classification table for scale benchmarks (any number of rows, reproducible).

:func:`make_table` draws ``n_rows`` rows of ``n_features`` columns from a seed:

* the first ``n_features - n_categorical`` columns are numeric, independent standard normals;
* the last ``n_categorical`` columns are categorical codes ``0 .. n_categories - 1``, uniform;
* the binary label is ``1`` when ``s + logistic noise > 0``, with the score
  ``s = 1.5 x0 - x1 + 0.8 x2 x3 + 0.5 [x4 > 0.5] + c[k]`` where ``k`` is the first categorical
  column's code and ``c`` a fixed effect per code (``-1 .. 1``, evenly spaced); without a
  categorical column the ``c`` term is absent, and terms whose columns do not exist are dropped.
  The label thus depends on five numeric columns (a linear part, an interaction, a threshold) and
  one categorical column; every other column is noise.  With 50 columns the Bayes-optimal accuracy
  is about 78.5% against a majority rate near 52%; the reference random forest (20 trees, depth 6,
  sqrt features) trained on 20,000 rows reaches about 71% on fresh rows.

The generator is deterministic in ``seed`` (numpy's PCG64: machine-learning data, never a secret)
and draws column by column, so its peak memory is the table itself (8 bytes per cell).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError

__all__ = ["SyntheticTable", "make_table"]


@dataclass(frozen=True)
class SyntheticTable:
    """Features ``X`` (float64; categorical columns hold integer codes), labels ``y`` (0/1) and
    the categorical mask, one flag per column."""

    X: npt.NDArray[np.float64]
    y: npt.NDArray[np.int64]
    categorical: list[bool]


def make_table(n_rows: int, n_features: int = 50, *, n_categorical: int = 10, n_categories: int = 8,
               seed: int = 0) -> SyntheticTable:
    """``n_rows`` x ``n_features`` synthetic rows with a label that has signal (module docstring)."""
    for name, v, low in (("n_rows", n_rows, 1), ("n_features", n_features, 1), ("n_categorical", n_categorical, 0),
                         ("n_categories", n_categories, 2)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
            raise ParameterError(f"{name} must be an integer >= {low}")
    if n_categorical > n_features:
        raise ParameterError("n_categorical cannot exceed n_features")
    rng = np.random.default_rng(seed)  # benchmark data, reproducible by seed: no secret is drawn here
    X = np.empty((n_rows, n_features), dtype=np.float64)
    n_num = n_features - n_categorical
    for j in range(n_num):
        X[:, j] = rng.standard_normal(n_rows)
    for j in range(n_num, n_features):
        X[:, j] = rng.integers(0, n_categories, n_rows)
    score = np.zeros(n_rows, dtype=np.float64)
    if n_num > 0:
        score += 1.5 * X[:, 0]
    if n_num > 1:
        score -= X[:, 1]
    if n_num > 3:
        score += 0.8 * X[:, 2] * X[:, 3]
    if n_num > 4:
        score += 0.5 * (X[:, 4] > 0.5)
    if n_categorical:
        effect = np.linspace(-1.0, 1.0, n_categories)
        score += effect[X[:, n_num].astype(np.int64)]
    score += rng.logistic(size=n_rows)
    y = (score > 0).astype(np.int64)
    return SyntheticTable(X, y, [j >= n_num for j in range(n_features)])
