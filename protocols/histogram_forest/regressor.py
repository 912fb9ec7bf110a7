"""``HistogramForestRegressor``: the histogram forest for real targets, with scikit-learn conventions.

Spec: ``specs/histogram_forest.md``, "Regression".  The clients bin the statistics ``(Σw, Σw·t1, Σw·t2)``
of their fixed-point targets (:mod:`securetrees.protocols.histogram_forest.ring`) instead of class counts; the
server adds them (in ``Z_2^64`` with secure aggregation) and splits on the squared error.  Bins are
fixed (quantile edges from the grid round by default); differential privacy is not implemented for
target sums, so ``epsilon`` is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError
from securetrees.estimator import check_targets
from securetrees.protocols.histogram_forest.facade import HistogramForestBase
from securetrees.protocols.histogram_forest.ring import MAX_Y_BITS, Y_BITS, check_capacity
from securetrees.schema import ColumnRef
from securetrees.trees.forest import Forest
from securetrees.trees.tree import Tree

__all__ = ["HistogramForestRegressor"]

FloatArray = npt.NDArray[np.float64]


class HistogramForestRegressor(HistogramForestBase):
    """Cross-silo histogram random forest for regression, with optional secure aggregation.

    Parameters as :class:`HistogramForestClassifier` where they apply (``n_estimators``, ``max_depth``,
    ``n_bins``, ``secure_aggregation``, ``random_state``, ``histogram`` ("auto" or "fixed"; the paper's
    streaming bins carry class counts and are refused), ``bin_edges``, ``grid_cells``, ``max_features``
    (default 1.0, every feature, as scikit-learn's regressor), ``sampling``, ``subsample_fraction``,
    ``min_samples_split``, ``min_samples_leaf``, ``categorical_features``, ``client_column``, ``n_clients``,
    ``categories``, ``feature_ranges``,
    ``progress``), plus ``y_range`` (``(low, high)``: the public range of the targets, which fixes
    the fixed-point scale; inferred from the pooled targets when None, so their minimum and maximum
    become public) and ``y_bits`` (fractional bits of an encoded target, default 32: a step of 2^-32 of
    the range).  ``criterion`` is "squared_error" only.  ``epsilon`` must stay None: differential
    privacy is not implemented for target sums (``ParameterError``).
    """

    _estimator_type = "regressor"
    task = "regression"
    criteria = ("squared_error",)
    noise = "histogram"  # fixed for the regressor (no DP), so no constructor parameter
    max_multiplicity = 1  # no bootstrap cap without DP

    def __init__(
        self,
        n_estimators: int = 10,
        max_depth: int = 8,
        n_bins: int = 32,
        epsilon: float | None = None,
        secure_aggregation: bool = False,
        random_state: int | None = None,
        *,
        histogram: str = "auto",
        bin_edges: str = "auto",
        grid_cells: int = 1024,
        criterion: str = "squared_error",
        max_features: int | float | str | None = 1.0,
        sampling: str = "bootstrap",
        subsample_fraction: float = 0.632,
        min_samples_split: float = 2.0,
        min_samples_leaf: float = 1.0,
        categorical_features: Sequence[bool] | Sequence[ColumnRef] | None = None,
        client_column: ColumnRef | None = None,
        n_clients: int = 3,
        categories: Sequence[int] | None = None,
        feature_ranges: Sequence[tuple[float, float] | None] | None = None,
        y_range: tuple[float, float] | None = None,
        y_bits: int = Y_BITS,
        progress: bool = False,
    ) -> None:
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.n_bins = n_bins
        self.epsilon = epsilon
        self.secure_aggregation = secure_aggregation
        self.random_state = random_state
        self.histogram = histogram
        self.bin_edges = bin_edges
        self.grid_cells = grid_cells
        self.criterion = criterion
        self.max_features = max_features
        self.sampling = sampling
        self.subsample_fraction = subsample_fraction
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.categorical_features = categorical_features
        self.client_column = client_column
        self.n_clients = n_clients
        self.categories = categories
        self.feature_ranges = feature_ranges
        self.y_range = y_range
        self.y_bits = y_bits
        self.progress = progress

    # -- task hooks ----------------------------------------------------------------------------

    def _check_targets(self, i: int, y: npt.NDArray[Any]) -> None:
        if y.dtype.kind not in "iuf":
            raise ParameterError(f"client {i}: targets must be real numbers, got {y.dtype}")
        if not np.all(np.isfinite(y)):
            raise ParameterError(f"client {i}: targets must be finite")

    def _targets(self, y: object, n: int) -> npt.NDArray[Any]:
        return check_targets(y, n)

    def _check_params(self, n_clients: int) -> None:
        if self.epsilon is not None:
            raise ParameterError(
                "differential privacy is not implemented for HistogramForestRegressor (target sums need their "
                "own mechanism); leave epsilon=None"
            )
        if self.histogram == "streaming":
            raise ParameterError("the paper's streaming bins carry class counts: the regressor needs fixed bins")
        if isinstance(self.y_bits, bool) or not isinstance(self.y_bits, (int, np.integer)) or not (
            0 <= self.y_bits <= MAX_Y_BITS
        ):
            raise ParameterError(f"y_bits must be an int in [0, {MAX_Y_BITS}]")
        super()._check_params(n_clients)

    def _histogram_kind(self) -> str:
        return "fixed"

    def _task_config(self, ys: list[npt.NDArray[Any]], n_rows: list[int]) -> dict[str, Any]:
        if self.y_range is None:
            pooled = np.concatenate(ys).astype(np.float64)
            low, high = float(pooled.min()), float(pooled.max())
            if not low < high:  # constant targets: any non-empty range holds them
                low, high = low - 0.5, high + 0.5
        else:
            try:
                low, high = (float(v) for v in self.y_range)
            except (TypeError, ValueError) as exc:
                raise ParameterError("y_range must be a pair (low, high)") from exc
            if not (np.isfinite(low) and np.isfinite(high) and low < high):
                raise ParameterError("y_range needs finite low < high")
            for i, y in enumerate(ys):
                if y.min() < low or y.max() > high:
                    raise ParameterError(f"client {i} holds targets outside the declared y_range")
        check_capacity(max(n_rows), len(n_rows), int(self.y_bits))
        self.y_range_ = (low, high)
        return {"n_classes": 0, "y_low": low, "y_high": high, "y_bits": int(self.y_bits)}

    def _client_targets(self, y: npt.NDArray[Any]) -> npt.NDArray[Any]:
        return np.asarray(y, dtype=np.float64)

    def _forest(self, trees: tuple[Tree, ...]) -> Forest:
        return Forest(trees, "regression")

    # -- fitting and prediction ----------------------------------------------------------------

    def predict(self, X: object) -> FloatArray:
        """Mean over trees of the leaf means."""
        Xa = self._checked_X(X)
        return np.asarray(self.forest_.predict(Xa), dtype=np.float64)

    def score(self, X: object, y: npt.ArrayLike) -> float:
        """The coefficient of determination R² of :meth:`predict` on ``(X, y)``."""
        pred = self.predict(X)
        ya = np.asarray(y, dtype=np.float64)
        if ya.shape != pred.shape:
            raise ParameterError("y must have one target per row of X")
        ss_res = float(np.sum((ya - pred) ** 2))
        ss_tot = float(np.sum((ya - ya.mean()) ** 2))
        return 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else 0.0)
