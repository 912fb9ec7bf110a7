"""scikit-learn-style estimators over the central reference trainers.

Parameters are stored as given in ``__init__`` and validated in ``fit``; fitted
attributes end in ``_`` (``model_``, ``bin_mapper_``, ``classes_``,
``n_features_in_``).  Features are a float matrix with NaN for missing values;
categorical features hold integer codes and are declared with
``categorical_features`` (a boolean mask or a list of indices).  Labels must be
numeric.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from securetrees.errors import NotFittedError, ParameterError
from securetrees.trees.binning import BinMapper
from securetrees.trees.forest import BoostedForest, Forest
from securetrees.trees.grow import GrowParams
from securetrees.trees.train import BinningParams, train_boosted, train_forest

__all__ = [
    "GradientBoostingClassifier",
    "GradientBoostingRegressor",
    "RandomForestClassifier",
    "RandomForestRegressor",
    "check_X",
]

FloatArray = npt.NDArray[np.float64]


def check_X(X: npt.ArrayLike, n_features: int | None = None) -> FloatArray:
    """A 2-D float matrix with at least one row; NaN allowed (missing), ±inf not."""
    try:
        Xa = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ParameterError(f"X must be numeric: {exc}") from None
    if Xa.ndim != 2 or Xa.shape[0] == 0 or Xa.shape[1] == 0:
        raise ParameterError(f"X must be a non-empty 2-D array, got shape {Xa.shape}")
    if np.isinf(Xa).any():
        raise ParameterError("X contains infinite values")
    if n_features is not None and Xa.shape[1] != n_features:
        raise ParameterError(f"X has {Xa.shape[1]} features, the model was fitted with {n_features}")
    return Xa


def _check_y(y: npt.ArrayLike, n_samples: int) -> FloatArray:
    try:
        ya = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ParameterError(f"labels must be numeric: {exc}") from None
    if ya.ndim != 1 or ya.shape[0] != n_samples:
        raise ParameterError(f"y must have shape ({n_samples},), got {ya.shape}")
    if not np.isfinite(ya).all():
        raise ParameterError("y contains NaN or infinite values")
    return ya


def _categorical_mask(spec: Sequence[bool] | Sequence[int] | None, n_features: int) -> list[bool]:
    if spec is None:
        return [False] * n_features
    arr = np.asarray(spec)
    if arr.dtype == bool:
        if arr.shape != (n_features,):
            raise ParameterError("a categorical mask needs one entry per feature")
        return [bool(v) for v in arr]
    mask = [False] * n_features
    for f in arr.reshape(-1):
        if not 0 <= int(f) < n_features:
            raise ParameterError(f"categorical feature index {f} out of range")
        mask[int(f)] = True
    return mask


class _TreeEstimator:
    _classifier = False
    model_: Forest | BoostedForest
    bin_mapper_: BinMapper
    n_features_in_: int
    classes_: npt.NDArray[np.generic]

    max_bins: int
    binning: str
    feature_ranges: Sequence[tuple[float, float] | None] | None
    categorical_features: Sequence[bool] | Sequence[int] | None

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        import inspect

        names = [p for p in inspect.signature(type(self).__init__).parameters if p != "self"]
        return {name: getattr(self, name) for name in names}

    def set_params(self, **params: Any) -> _TreeEstimator:
        valid = self.get_params()
        for key, value in params.items():
            if key not in valid:
                raise ParameterError(f"unknown parameter {key!r}")
            setattr(self, key, value)
        return self

    def _prepare(self, X: npt.ArrayLike, y: npt.ArrayLike) -> tuple[FloatArray, FloatArray, int | None]:
        Xa = check_X(X)
        ya = _check_y(y, Xa.shape[0])
        self.n_features_in_ = Xa.shape[1]
        n_classes: int | None = None
        if self._classifier:
            classes, codes = np.unique(ya, return_inverse=True)
            if classes.size < 2:
                raise ParameterError("classification needs at least two classes in y")
            as_int = np.all(classes == np.round(classes))
            self.classes_ = classes.astype(np.int64) if as_int else classes
            ya = codes.astype(np.float64)
            n_classes = int(classes.size)
        return Xa, ya, n_classes

    def _binning(self, n_features: int) -> BinningParams:
        return BinningParams(
            max_bins=self.max_bins, strategy=self.binning,
            categorical=_categorical_mask(self.categorical_features, n_features),
            ranges=self.feature_ranges,
        )

    def _fitted(self) -> Forest | BoostedForest:
        model: Forest | BoostedForest | None = getattr(self, "model_", None)
        if model is None:
            raise NotFittedError(f"{type(self).__name__} is not fitted; call fit first")
        return model

    def predict(self, X: npt.ArrayLike) -> npt.NDArray[np.generic]:
        model = self._fitted()
        return model.predict(check_X(X, self.n_features_in_))

    def predict_proba(self, X: npt.ArrayLike) -> FloatArray:
        model = self._fitted()
        if not self._classifier:
            raise ParameterError("predict_proba is for classifiers")
        return model.predict_proba(check_X(X, self.n_features_in_))

    def score(self, X: npt.ArrayLike, y: npt.ArrayLike) -> float:
        """Accuracy (classifiers) or R² (regressors)."""
        pred = np.asarray(self.predict(X), dtype=np.float64)
        ya = _check_y(y, pred.shape[0])
        if self._classifier:
            return float(np.mean(pred == ya))
        ss = float(((ya - ya.mean()) ** 2).sum())
        return 1.0 - float(((ya - pred) ** 2).sum()) / ss if ss > 0 else 0.0


class _ForestEstimator(_TreeEstimator):
    def __init__(
        self,
        n_estimators: int = 100,
        *,
        criterion: str = "gini",
        max_depth: int | None = None,
        min_samples_split: int = 2,
        min_samples_leaf: int = 1,
        max_features: int | float | str | None = "sqrt",
        max_features_tree: int | float | str | None = None,
        bootstrap: bool = True,
        max_bins: int = 255,
        binning: str = "quantile",
        feature_ranges: Sequence[tuple[float, float] | None] | None = None,
        categorical_features: Sequence[bool] | Sequence[int] | None = None,
        feature_providers: Sequence[int] | None = None,
        random_state: int | None = None,
        progress: bool = False,
    ) -> None:
        self.n_estimators = n_estimators
        self.criterion = criterion
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.max_features = max_features
        self.max_features_tree = max_features_tree
        self.bootstrap = bootstrap
        self.max_bins = max_bins
        self.binning = binning
        self.feature_ranges = feature_ranges
        self.categorical_features = categorical_features
        self.feature_providers = feature_providers
        self.random_state = random_state
        self.progress = progress

    def fit(self, X: npt.ArrayLike, y: npt.ArrayLike) -> _ForestEstimator:
        """Grow ``n_estimators`` trees (draw order: ``specs/trees.md``, "Random-draw order")."""
        Xa, ya, n_classes = self._prepare(X, y)
        self.model_, self.bin_mapper_ = train_forest(
            Xa, ya, n_classes=n_classes, n_estimators=self.n_estimators,
            criterion=self.criterion,
            grow=GrowParams(self.max_depth, self.min_samples_split, self.min_samples_leaf),
            max_features=self.max_features, max_features_tree=self.max_features_tree,
            bootstrap=self.bootstrap, binning=self._binning(Xa.shape[1]),
            providers=self.feature_providers, random_state=self.random_state,
            progress=self.progress, classes=getattr(self, "classes_", None),
        )
        return self


class RandomForestClassifier(_ForestEstimator):
    """Random forest classifier (binary or multi-class; criterion ``gini`` or ``entropy``).

    ``max_features`` is sampled per node (as scikit-learn); ``max_features_tree``
    additionally samples a feature subset per tree (Federated Forest).
    """

    _classifier = True


class RandomForestRegressor(_ForestEstimator):
    """Random forest regressor (criterion ``squared_error``)."""

    def __init__(
        self,
        n_estimators: int = 100,
        *,
        criterion: str = "squared_error",
        max_depth: int | None = None,
        min_samples_split: int = 2,
        min_samples_leaf: int = 1,
        max_features: int | float | str | None = 1.0,
        max_features_tree: int | float | str | None = None,
        bootstrap: bool = True,
        max_bins: int = 255,
        binning: str = "quantile",
        feature_ranges: Sequence[tuple[float, float] | None] | None = None,
        categorical_features: Sequence[bool] | Sequence[int] | None = None,
        feature_providers: Sequence[int] | None = None,
        random_state: int | None = None,
        progress: bool = False,
    ) -> None:
        super().__init__(
            n_estimators, criterion=criterion, max_depth=max_depth,
            min_samples_split=min_samples_split, min_samples_leaf=min_samples_leaf,
            max_features=max_features, max_features_tree=max_features_tree,
            bootstrap=bootstrap, max_bins=max_bins, binning=binning,
            feature_ranges=feature_ranges, categorical_features=categorical_features,
            feature_providers=feature_providers, random_state=random_state, progress=progress,
        )


class _BoostingEstimator(_TreeEstimator):
    def __init__(
        self,
        n_estimators: int = 100,
        *,
        learning_rate: float = 0.1,
        max_depth: int | None = 6,
        min_samples_split: int = 2,
        min_samples_leaf: int = 20,
        reg_lambda: float = 1.0,
        second_order: bool = True,
        base_score: str = "prior",
        max_bins: int = 255,
        binning: str = "quantile",
        feature_ranges: Sequence[tuple[float, float] | None] | None = None,
        categorical_features: Sequence[bool] | Sequence[int] | None = None,
        feature_providers: Sequence[int] | None = None,
        random_state: int | None = None,
        progress: bool = False,
    ) -> None:
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.max_depth = max_depth
        self.min_samples_split = min_samples_split
        self.min_samples_leaf = min_samples_leaf
        self.reg_lambda = reg_lambda
        self.second_order = second_order
        self.base_score = base_score
        self.max_bins = max_bins
        self.binning = binning
        self.feature_ranges = feature_ranges
        self.categorical_features = categorical_features
        self.feature_providers = feature_providers
        self.random_state = random_state
        self.progress = progress

    def fit(self, X: npt.ArrayLike, y: npt.ArrayLike) -> _BoostingEstimator:
        """Boost ``n_estimators`` rounds (deterministic; ``random_state`` is unused and
        kept for the estimator convention)."""
        Xa, ya, n_classes = self._prepare(X, y)
        self.model_, self.bin_mapper_ = train_boosted(
            Xa, ya, n_classes=n_classes, n_estimators=self.n_estimators,
            learning_rate=self.learning_rate, reg_lambda=self.reg_lambda,
            second_order=self.second_order, base_score=self.base_score,
            grow=GrowParams(self.max_depth, self.min_samples_split, self.min_samples_leaf),
            binning=self._binning(Xa.shape[1]), providers=self.feature_providers,
            progress=self.progress, classes=getattr(self, "classes_", None),
        )
        return self

    def decision_function(self, X: npt.ArrayLike) -> FloatArray:
        model = self._fitted()
        if not isinstance(model, BoostedForest):
            raise ParameterError("decision_function needs a boosted model")
        return model.decision_function(check_X(X, self.n_features_in_))


class GradientBoostingClassifier(_BoostingEstimator):
    """GBDT with logistic loss (HybridTree Appendix B): sigmoid for two classes,
    softmax with one tree per class and round for more."""

    _classifier = True


class GradientBoostingRegressor(_BoostingEstimator):
    """GBDT with squared loss."""
