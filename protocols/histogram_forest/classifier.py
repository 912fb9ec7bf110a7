"""``HistogramForestClassifier``: the whole protocol in one process, with scikit-learn conventions.

Spec: ``specs/histogram_forest.md``.  ``fit(X, y)`` splits the rows among the clients by
``client_column`` (or deals them into ``n_clients`` parts), starts a :class:`Server` and one
:class:`Client` per part on an
:class:`~securetrees.runtime.InProcessNetwork` (every message goes through the
wire codec, so ``transcript_`` holds the real bytes and rounds) and keeps the
forest the server grew (the shared half: :mod:`securetrees.protocols.histogram_forest.facade`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError
from securetrees.estimator import encode_labels
from securetrees.protocols.histogram_forest.facade import HistogramForestBase
from securetrees.schema import ColumnRef
from securetrees.trees.forest import Forest
from securetrees.trees.tree import Tree

__all__ = ["HistogramForestClassifier"]

FloatArray = npt.NDArray[np.float64]


class HistogramForestClassifier(HistogramForestBase):
    """Cross-silo histogram random forest (Kalloori and Klingler 2022), with optional DP and
    secure aggregation.

    Parameters (spec "Modes"): ``n_estimators``, ``max_depth``, ``n_bins`` (b), ``epsilon`` (total
    privacy budget per client, None for no noise), ``secure_aggregation`` (>= 3 clients),
    ``random_state`` (bootstrap and feature draws; noise never depends on it), ``histogram``
    ("auto", "streaming" = the paper's bins, "fixed" = bins agreed up front), ``bin_edges`` for fixed bins
    ("uniform" over the declared ranges, "quantile" from a first private round over a grid of
    ``grid_cells`` cells per numeric feature, or "auto" = quantile without ``epsilon`` and uniform with
    it), ``noise`` ("histogram"
    = the geometric mechanism on every count, "input" = perturb the data once), ``criterion``
    ("gini" or "entropy"), ``max_features`` (per node; "sqrt", "log2", int, fraction, None),
    ``sampling`` ("bootstrap", "subsample" without replacement, "none"), ``subsample_fraction``,
    ``max_multiplicity`` (bootstrap cap under DP), ``min_samples_split``, ``min_samples_leaf``,
    ``categorical_features`` (names or indexes of X's columns, or one flag per feature column; string
    and pandas ``category`` columns are categorical anyway), ``client_column`` (the column of X naming each
    row's client; not a feature; clients in the sorted order of its values), ``n_clients`` (without
    ``client_column``: the rows are dealt into this many contiguous parts, a simulation),
    ``categories`` (number of codes per categorical feature; inferred from the
    parts if None, required with ``epsilon`` when a feature is categorical), ``classes`` (the labels;
    inferred from the parts if None, required with ``epsilon``), ``feature_ranges`` (``(low, high)`` per
    feature, None for categorical; required for DP), ``progress``.

    With ``epsilon`` nothing of the schema is read from the pooled data: a label or a category code
    seen in one client's rows would otherwise show in ``classes_`` or in the number of slots.
    """

    _estimator_type = "classifier"
    task = "classification"
    criteria = ("gini", "entropy")

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
        noise: str = "histogram",
        criterion: str = "gini",
        max_features: int | float | str | None = "sqrt",
        sampling: str = "bootstrap",
        subsample_fraction: float = 0.632,
        max_multiplicity: int = 3,
        min_samples_split: float = 2.0,
        min_samples_leaf: float = 1.0,
        categorical_features: Sequence[bool] | Sequence[ColumnRef] | None = None,
        client_column: ColumnRef | None = None,
        n_clients: int = 3,
        categories: Sequence[int] | None = None,
        feature_ranges: Sequence[tuple[float, float] | None] | None = None,
        classes: Sequence[object] | None = None,
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
        self.noise = noise
        self.criterion = criterion
        self.max_features = max_features
        self.sampling = sampling
        self.subsample_fraction = subsample_fraction
        self.max_multiplicity = max_multiplicity
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.categorical_features = categorical_features
        self.client_column = client_column
        self.n_clients = n_clients
        self.categories = categories
        self.feature_ranges = feature_ranges
        self.classes = classes
        self.progress = progress

    # -- task hooks ----------------------------------------------------------------------------

    def _check_targets(self, i: int, y: npt.NDArray[Any]) -> None:
        if y.dtype.kind == "f" and np.isnan(y).any():
            raise ParameterError(f"client {i}: y holds NaN")
        if y.dtype.kind not in "iufbUS":
            raise ParameterError(f"client {i}: unsupported label type {y.dtype}")

    def _targets(self, y: object, n: int) -> npt.NDArray[Any]:
        classes, codes = encode_labels(y, n)
        if classes.dtype.kind == "O":  # pandas' object labels: strings (encode_labels refuses a mix)
            classes = classes.astype(str)
        return np.asarray(classes[codes])

    def _classes(self, ys: list[npt.NDArray[np.generic]]) -> npt.NDArray[np.generic]:
        """The sorted labels: declared (required with ``epsilon``; every client's labels must be among
        them), or inferred from the pooled labels without DP."""
        if self.classes is None:
            if self.epsilon is not None:
                raise ParameterError(
                    "with epsilon, declare classes (the labels): they are public parameters, never read "
                    "from the clients' data"
                )
            classes = np.unique(np.concatenate(ys))
        else:
            try:
                declared = np.asarray(list(self.classes))
                classes = np.unique(declared)
            except (TypeError, ValueError) as exc:
                raise ParameterError("classes must be a sequence of comparable labels") from exc
            if declared.ndim != 1 or classes.size != declared.size:
                raise ParameterError("classes must be distinct labels")
            for i, y in enumerate(ys):
                if not np.isin(y, classes).all():
                    raise ParameterError(f"client {i} holds labels outside the declared classes")
        if classes.size < 2:
            raise ParameterError("a classifier needs at least two classes")
        return classes

    def _task_config(self, ys: list[npt.NDArray[Any]], n_rows: list[int]) -> dict[str, Any]:
        self.classes_ = self._classes(ys)
        return {"n_classes": int(self.classes_.size)}

    def _client_targets(self, y: npt.NDArray[Any]) -> npt.NDArray[Any]:
        return np.searchsorted(self.classes_, y)

    def _forest(self, trees: tuple[Tree, ...]) -> Forest:
        return Forest(trees, "classification", self.classes_)

    def predict_proba(self, X: object) -> FloatArray:
        Xa = self._checked_X(X)
        return self.forest_.predict_proba(Xa)

    def predict(self, X: object) -> npt.NDArray[np.generic]:
        proba = self.predict_proba(X)
        return np.asarray(self.classes_[np.argmax(proba, axis=1)])

    def score(self, X: object, y: npt.ArrayLike) -> float:
        """Accuracy of :meth:`predict` on ``(X, y)``."""
        ya = np.asarray(y)
        pred = self.predict(X)
        if ya.shape != pred.shape:
            raise ParameterError("y must have one label per row of X")
        return float(np.mean(pred == ya))
