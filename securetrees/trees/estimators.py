"""scikit-learn-compatible estimators over the central reference trainers.

They follow :mod:`securetrees.estimator` (parameters stored as given, one X-checker, labels of
any sortable type, ``score``).  Fitted attributes end in ``_`` (``model_``, ``bin_mapper_``,
``classes_``, ``n_features_in_``, ``schema_``, ``feature_names_in_`` for a DataFrame).
Categorical features are a DataFrame's string or ``category`` columns, plus integer-coded columns
declared with ``categorical_features`` (a boolean mask, or column indexes or names).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError
from securetrees.estimator import ClassifierMixin, Estimator, RegressorMixin, check_targets, encode_labels
from securetrees.trees.binning import BinMapper
from securetrees.trees.forest import BoostedForest, Forest
from securetrees.trees.grow import GrowParams
from securetrees.trees.train import BinningParams, train_boosted, train_forest

__all__ = [
    "GradientBoostingClassifier",
    "GradientBoostingRegressor",
    "RandomForestClassifier",
    "RandomForestRegressor",
]

FloatArray = npt.NDArray[np.float64]


class _TreeEstimator(Estimator):
    _classifier = False
    _fitted_attribute = "model_"
    model_: Forest | BoostedForest
    bin_mapper_: BinMapper
    classes_: npt.NDArray[np.generic]

    max_bins: int
    binning: str
    feature_ranges: Sequence[tuple[float, float] | None] | None
    categorical_features: Sequence[bool] | Sequence[int] | Sequence[str] | None

    def _prepare(self, X: object, y: object) -> tuple[FloatArray, FloatArray, int | None]:
        Xa = self._validate_X(X, reset=True)
        n_classes: int | None = None
        if self._classifier:
            self.classes_, codes = encode_labels(y, Xa.shape[0])
            ya = codes.astype(np.float64)
            n_classes = int(self.classes_.size)
        else:
            ya = check_targets(y, Xa.shape[0])
        return Xa, ya, n_classes

    def _binning(self) -> BinningParams:
        return BinningParams(
            max_bins=self.max_bins, strategy=self.binning,
            categorical=self._categorical(self.categorical_features),
            ranges=self.feature_ranges,
        )

    def _fitted(self) -> Forest | BoostedForest:
        self._check_fitted()
        return self.model_

    def predict(self, X: object) -> npt.NDArray[np.generic]:
        model = self._fitted()
        return model.predict(self._validate_X(X, reset=False))



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
        categorical_features: Sequence[bool] | Sequence[int] | Sequence[str] | None = None,
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

    def fit(self, X: object, y: object) -> _ForestEstimator:
        """Grow ``n_estimators`` trees (draw order: ``specs/trees.md``, "Random-draw order")."""
        if hasattr(self, "model_"):
            del self.model_
        Xa, ya, n_classes = self._prepare(X, y)
        self.model_, self.bin_mapper_ = train_forest(
            Xa, ya, n_classes=n_classes, n_estimators=self.n_estimators,
            criterion=self.criterion,
            grow=GrowParams(self.max_depth, self.min_samples_split, self.min_samples_leaf),
            max_features=self.max_features, max_features_tree=self.max_features_tree,
            bootstrap=self.bootstrap, binning=self._binning(),
            providers=self.feature_providers, random_state=self.random_state,
            progress=self.progress, classes=getattr(self, "classes_", None),
        )
        return self


class _Probabilities:
    _fitted: Callable[[], Forest | BoostedForest]
    _validate_X: Callable[..., FloatArray]

    def predict_proba(self, X: object) -> FloatArray:
        """Class probabilities, one column per entry of ``classes_``."""
        return self._fitted().predict_proba(self._validate_X(X, reset=False))


class RandomForestClassifier(ClassifierMixin, _Probabilities, _ForestEstimator):
    """Random forest classifier (binary or multi-class; criterion ``gini`` or ``entropy``).

    ``max_features`` is sampled per node (as scikit-learn); ``max_features_tree``
    additionally samples a feature subset per tree (Federated Forest).
    """

    _classifier = True


class RandomForestRegressor(RegressorMixin, _ForestEstimator):
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
        categorical_features: Sequence[bool] | Sequence[int] | Sequence[str] | None = None,
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
        categorical_features: Sequence[bool] | Sequence[int] | Sequence[str] | None = None,
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

    def fit(self, X: object, y: object) -> _BoostingEstimator:
        """Boost ``n_estimators`` rounds (deterministic; ``random_state`` is unused and
        kept for the estimator convention)."""
        if hasattr(self, "model_"):
            del self.model_
        Xa, ya, n_classes = self._prepare(X, y)
        self.model_, self.bin_mapper_ = train_boosted(
            Xa, ya, n_classes=n_classes, n_estimators=self.n_estimators,
            learning_rate=self.learning_rate, reg_lambda=self.reg_lambda,
            second_order=self.second_order, base_score=self.base_score,
            grow=GrowParams(self.max_depth, self.min_samples_split, self.min_samples_leaf),
            binning=self._binning(), providers=self.feature_providers,
            progress=self.progress, classes=getattr(self, "classes_", None),
        )
        return self

    def decision_function(self, X: object) -> FloatArray:
        model = self._fitted()
        if not isinstance(model, BoostedForest):
            raise ParameterError("decision_function needs a boosted model")
        return model.decision_function(self._validate_X(X, reset=False))


class GradientBoostingClassifier(ClassifierMixin, _Probabilities, _BoostingEstimator):
    """GBDT with logistic loss (HybridTree Appendix B): sigmoid for two classes,
    softmax with one tree per class and round for more."""

    _classifier = True


class GradientBoostingRegressor(RegressorMixin, _BoostingEstimator):
    """GBDT with squared loss."""
