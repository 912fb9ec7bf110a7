"""The one estimator contract every securetrees model follows (scikit-learn's, without needing it).

- Parameters: ``__init__`` stores each argument unchanged under its own name and validates
  nothing; :meth:`Estimator.get_params` reads the names from the ``__init__`` signature, so
  ``sklearn.base.clone``, grid search, ``cross_val_score`` and ``Pipeline`` work.  ``fit`` never
  writes a parameter; what it learns ends in ``_``.
- Tags: ``__sklearn_tags__`` (scikit-learn 1.6 and later) and ``_more_tags`` (1.3 to 1.5) say
  classifier or regressor, NaN allowed (it is the missing value), ``y`` required; scikit-learn is
  imported only when it asks for them.
- Input: one X-checker, :meth:`Estimator._validate_X`: numpy arrays, lists and pandas DataFrames
  (string and ``category`` columns become categorical codes, NaN/None stay missing) go through a
  :class:`~securetrees.schema.TabularSchema`, recorded at ``fit`` as ``schema_`` with
  ``n_features_in_`` and, for a DataFrame with string column names, ``feature_names_in_``.
- Labels: :func:`encode_labels` (any sortable labels, strings included, become ``classes_``
  and integer codes) and :func:`check_targets` (finite real targets).
- ``score``: accuracy for classifiers, R² for regressors.
- ``rng=None`` (a constructor default scikit-learn accepts) is the operating system's CSPRNG,
  resolved at ``fit`` by :meth:`Estimator._random_source`.
- Pickling (joblib): :meth:`Estimator.__getstate__` leaves out ``_transient_attributes``; a fitted
  estimator whose ``predict`` runs a protocol between live parties (``_predicts_with_parties``)
  refuses with :class:`~securetrees.errors.TypeMismatchError` naming the library's model format.
- A method of an unfitted estimator raises :class:`~securetrees.errors.NotFittedError`, which is
  both a ``ValueError`` and an ``AttributeError``, as scikit-learn expects.

Spec: ``specs/estimators.md``.
"""

from __future__ import annotations

import inspect
import sys
import warnings
from collections.abc import Sequence
from typing import Any, ClassVar, cast

import numpy as np
import numpy.typing as npt

from securetrees.errors import NotFittedError, ParameterError, TypeMismatchError
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.schema import ColumnRef, TabularSchema, is_dataframe

__all__ = [
    "SKLEARN_VERSIONS",
    "ClassifierMixin",
    "Estimator",
    "RegressorMixin",
    "check_targets",
    "encode_labels",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

SKLEARN_VERSIONS = (">=1.3", "<1.10")
"""The scikit-learn versions whose conventions the contract follows (tags protocol switch at 1.6)."""


def _as_vector(y: object, n: int | None, what: str) -> npt.NDArray[Any]:
    if y is None:
        raise ParameterError(f"this estimator requires {what} to be passed, but the target {what} is None")
    values = y.to_numpy() if hasattr(y, "to_numpy") else y
    try:
        arr = np.asarray(values)
    except (TypeError, ValueError) as exc:
        raise ParameterError(f"{what} is not an array: {exc}") from None
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ParameterError(f"{what} must be one-dimensional, got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise ParameterError(f"{what} must have one entry per row of X ({n}), got {arr.shape[0]}")
    return arr


def encode_labels(y: object, n: int | None = None) -> tuple[npt.NDArray[Any], IntArray]:
    """``(classes, codes)``: the sorted distinct labels and each row's index into them.

    Labels are integers, strings or booleans (floats only when every one is a whole number);
    missing labels (NaN, None) and continuous targets raise :class:`ParameterError`, as does a
    single class."""
    arr = _as_vector(y, n, "y")
    if arr.dtype.kind == "O":
        if any(v is None or (isinstance(v, float) and np.isnan(v)) for v in arr):
            raise ParameterError("labels must not be missing (NaN or None)")
        kinds = {"s" if isinstance(v, (str, np.str_)) else "n" for v in arr}
        if len(kinds) > 1:
            raise ParameterError("Unknown label type: labels mix strings and numbers")
        if kinds == {"n"}:
            arr = np.asarray(arr.tolist())
    if arr.dtype.kind == "f":
        if not np.isfinite(arr).all():
            raise ParameterError("labels must not be missing (NaN) or infinite")
        if not np.all(arr == np.round(arr)):
            raise ParameterError("Unknown label type: continuous (a classifier needs class labels)")
    elif arr.dtype.kind not in "biuUSO":
        raise ParameterError(f"Unknown label type: {arr.dtype}")
    try:
        classes, codes = np.unique(arr, return_inverse=True)
    except TypeError as exc:
        raise ParameterError(f"Unknown label type: labels are not comparable ({exc})") from None
    if classes.size < 2:
        raise ParameterError("classification needs at least two classes in y, got 1 class")
    return classes, np.asarray(codes, dtype=np.int64).reshape(-1)


def check_targets(y: object, n: int | None = None) -> FloatArray:
    """Regression targets as floats; anything not finite and real raises :class:`ParameterError`."""
    arr = _as_vector(y, n, "y")
    try:
        ya = np.asarray(arr, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ParameterError(f"regression targets must be real numbers: {exc}") from None
    if not np.isfinite(ya).all():
        raise ParameterError("regression targets must be finite (no NaN)")
    return ya


class Estimator:
    """The shared base: parameters, tags, the X-checker and the fitted-state check."""

    _estimator_type: ClassVar[str] = ""
    #: The attribute ``fit`` sets last; its presence means fitted.
    _fitted_attribute: ClassVar[str] = "n_features_in_"
    #: Whether two fits with the same parameters may predict differently (``random_state`` unset).
    _non_deterministic: ClassVar[bool] = False
    #: Fitted attributes that hold live objects predict does not need (a run's transcript, with its
    #: lock): left out when the estimator is pickled.
    _transient_attributes: ClassVar[tuple[str, ...]] = ()
    #: Whether ``predict`` runs a protocol between the live parties of the fit (their keys, network
    #: and executors): such a fitted estimator refuses to be pickled.
    _predicts_with_parties: ClassVar[bool] = False

    schema_: TabularSchema
    n_features_in_: int
    feature_names_in_: npt.NDArray[np.object_]

    # -- parameters ------------------------------------------------------------------------

    @classmethod
    def _get_param_names(cls) -> list[str]:
        """The constructor's parameter names, sorted (scikit-learn's convention)."""
        init = cls.__init__
        if init is object.__init__:
            return []
        names = []
        for p in inspect.signature(init).parameters.values():
            if p.name == "self":
                continue
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise ParameterError(f"{cls.__name__}.__init__ must name every parameter (no *args/**kwargs)")
            names.append(p.name)
        return sorted(names)

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """Every constructor parameter and its value; with ``deep``, nested estimators' as ``name__param``."""
        out: dict[str, Any] = {}
        for name in self._get_param_names():
            value = getattr(self, name)
            if deep and hasattr(value, "get_params") and not isinstance(value, type):
                out.update({f"{name}__{k}": v for k, v in value.get_params(deep=True).items()})
            out[name] = value
        return out

    def set_params(self, **params: Any) -> Any:
        """Set parameters (``name__param`` reaches a nested estimator); unknown names raise."""
        valid = self._get_param_names()
        nested: dict[str, dict[str, Any]] = {}
        for key, value in params.items():
            name, _, sub = key.partition("__")
            if name not in valid:
                raise ParameterError(f"Invalid parameter {name!r} for estimator {type(self).__name__}; "
                                     f"valid parameters are {valid}")
            if sub:
                nested.setdefault(name, {})[sub] = value
            else:
                setattr(self, name, value)
        for name, sub_params in nested.items():
            getattr(self, name).set_params(**sub_params)
        return self

    def __repr__(self) -> str:
        defaults = {p.name: p.default for p in inspect.signature(type(self).__init__).parameters.values()}
        shown = []
        for name in self._get_param_names():
            value = getattr(self, name, None)
            default = defaults.get(name, inspect.Parameter.empty)
            if default is inspect.Parameter.empty or (value is not default and not _same(value, default)):
                shown.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(shown)})"

    # -- tags ------------------------------------------------------------------------------

    def __sklearn_tags__(self) -> Any:
        """scikit-learn (1.6 and later) tags; scikit-learn is imported here only."""
        from sklearn.utils import ClassifierTags, InputTags, RegressorTags, Tags, TargetTags

        classifier = self._estimator_type == "classifier"
        return Tags(
            estimator_type=self._estimator_type or None,
            target_tags=TargetTags(required=True),
            transformer_tags=None,
            classifier_tags=ClassifierTags() if classifier else None,
            regressor_tags=RegressorTags() if self._estimator_type == "regressor" else None,
            non_deterministic=self._non_deterministic,
            input_tags=InputTags(allow_nan=True, categorical=True),
        )

    def _more_tags(self) -> dict[str, Any]:
        """The same tags for scikit-learn 1.3 to 1.5."""
        return {"allow_nan": True, "requires_y": True, "non_deterministic": self._non_deterministic}

    # -- fitted state ----------------------------------------------------------------------

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, self._fitted_attribute)

    def _check_fitted(self) -> None:
        """:class:`NotFittedError` unless ``fit`` has completed."""
        if not self.__sklearn_is_fitted__():
            raise _not_fitted_class()(f"This {type(self).__name__} instance is not fitted yet. "
                                      "Call 'fit' with appropriate arguments before using this estimator.")

    # -- pickling (joblib) ------------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        """What ``pickle``/``joblib.dump`` keep: the parameters and what ``predict`` needs, without
        :attr:`_transient_attributes`.  A fitted estimator whose ``predict`` needs its live parties
        raises :class:`~securetrees.errors.TypeMismatchError` naming the library's model format:
        its parties' keys are never pickled."""
        if self._predicts_with_parties and self.__sklearn_is_fitted__():
            raise TypeMismatchError(
                f"a fitted {type(self).__name__} is not pickled: its predict runs the protocol between live "
                "parties (their keys, network and executors), and a private key is never pickled. Keep a model "
                "in the library's own format instead: a deployment's 'fit' step has every party save its part "
                "as models/NAME.model (securetrees.model.v1, sealed under the party's passphrase) and a run "
                "with [run] job = \"predict\" loads them (specs/deployment.md, 'Model files and predict-only "
                "runs'); or pickle the unfitted estimator and fit it again")
        state = self.__dict__.copy()
        for name in self._transient_attributes:
            state.pop(name, None)
        return state

    # -- secret randomness -------------------------------------------------------------------

    def _random_source(self) -> RandomSource:
        """The ``rng`` parameter resolved at ``fit``: ``None`` (the default, so that the constructor
        holds no object scikit-learn cannot compare) is the operating system's CSPRNG; anything
        else must be a :class:`~securetrees.rand.RandomSource`."""
        rng = getattr(self, "rng", None)
        if rng is None:
            return SYSTEM_RANDOM
        if not isinstance(rng, RandomSource):
            raise ParameterError(f"rng must be None or a RandomSource, got {type(rng).__name__}")
        return rng

    # -- input -----------------------------------------------------------------------------

    def _validate_X(self, X: object, *, reset: bool) -> FloatArray:
        """``X`` as a float matrix (NaN missing).  ``reset`` (in ``fit``) infers and records the
        schema, ``n_features_in_`` and ``feature_names_in_``; otherwise ``X`` is encoded with the
        fitted schema (a DataFrame's column names must match the fitted ones)."""
        if reset:
            schema = TabularSchema.infer(X)
            Xa = schema.encode(X)
            self.schema_ = schema
            self.n_features_in_ = schema.n_columns
            if schema.named:
                self.feature_names_in_ = np.asarray(schema.names, dtype=object)
            elif hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
            return Xa
        self._check_fitted()
        named = is_dataframe(X) and all(isinstance(c, str) for c in getattr(X, "columns", []))
        if named and self.schema_.named:
            self.schema_.check_names([str(c) for c in getattr(X, "columns", [])])
        width = getattr(X, "shape", (0, None))[1] if getattr(X, "ndim", 2) == 2 else None
        if width is not None and width != self.n_features_in_:
            raise ParameterError(f"X has {width} features, but {type(self).__name__} is expecting "
                                 f"{self.n_features_in_} features as input")
        if self.schema_.named and not named:
            warnings.warn(f"X does not have valid feature names, but {type(self).__name__} was fitted with "
                          "feature names", UserWarning, stacklevel=3)
        elif named and not self.schema_.named:
            warnings.warn(f"X has feature names, but {type(self).__name__} was fitted without feature names",
                          UserWarning, stacklevel=3)
        return self.schema_.encode(X)

    def _column_indexes(self, refs: Sequence[ColumnRef] | Sequence[bool] | None) -> list[int]:
        """Positions of columns named by the fitted schema (names or indexes, or a mask)."""
        return self.schema_.indexes(refs)

    def _vertical_partition(
        self, partition: Sequence[Sequence[ColumnRef]] | None, *, min_parties: int = 1, party: str = "party",
        allow_empty: bool = False,
    ) -> list[list[int]]:
        """Each party's column positions from ``partition`` (one list of column names or indexes per
        party, in party order); ``None`` splits the columns into two contiguous halves (the first
        party holds the extra column of an odd width), a simulation default."""
        from securetrees.trees.partition import check_partition

        d = self.schema_.n_columns
        if partition is None and d < min_parties:
            raise ParameterError(f"{type(self).__name__} splits the columns among at least {min_parties} "
                                 f"{party}s, got n_features = {d}")
        if partition is None:
            half = (d + 1) // 2
            parts: list[list[int]] = [list(range(half)), list(range(half, d))]
            if not parts[1] and not allow_empty:
                parts = parts[:1]
        else:
            if isinstance(partition, (str, bytes)):
                raise ParameterError("partition lists each party's columns (a list of lists)")
            parts = []
            for cols in partition:
                if isinstance(cols, (str, bytes)):
                    raise ParameterError(f"every {party}'s columns are a list of names or indexes")
                parts.append([self.schema_.index(c) for c in cols])
        return check_partition(parts, d, min_parties=min_parties, party=party, allow_empty=allow_empty)

    def _categorical(self, declared: Sequence[ColumnRef] | Sequence[bool] | None) -> list[bool]:
        """One flag per column: categorical in the schema (string or ``category`` columns) or
        declared by the caller (integer-coded columns)."""
        mask = self.schema_.categorical_mask()
        for j in self.schema_.indexes(declared):
            mask[j] = True
        return mask


_COMBINED: dict[type, type] = {}


def _not_fitted_class() -> type[NotFittedError]:
    """:class:`NotFittedError`, also a subclass of scikit-learn's when scikit-learn is already
    imported (so its checks recognise it); scikit-learn is never imported here."""
    module = sys.modules.get("sklearn.exceptions")
    theirs = getattr(module, "NotFittedError", None) if module is not None else None
    if not isinstance(theirs, type):
        return NotFittedError
    if theirs not in _COMBINED:
        _COMBINED[theirs] = type("NotFittedError", (NotFittedError, theirs), {"__module__": NotFittedError.__module__})
    return _COMBINED[theirs]


def _same(a: object, b: object) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


class ClassifierMixin:
    """Accuracy as ``score``; ``classes_`` from :func:`encode_labels`."""

    _estimator_type: ClassVar[str] = "classifier"
    classes_: npt.NDArray[Any]

    def score(self, X: Any, y: Any, sample_weight: npt.ArrayLike | None = None) -> float:
        """Mean accuracy of ``predict(X)`` against ``y`` (weighted by ``sample_weight``)."""
        pred = np.asarray(cast(Any, self).predict(X))
        ya = _as_vector(y, pred.shape[0], "y")
        hit = (pred == ya).astype(np.float64)
        return float(np.average(hit, weights=None if sample_weight is None else np.asarray(sample_weight)))


class RegressorMixin:
    """R² as ``score``."""

    _estimator_type: ClassVar[str] = "regressor"

    def score(self, X: Any, y: Any, sample_weight: npt.ArrayLike | None = None) -> float:
        """Coefficient of determination R² of ``predict(X)`` (1 for a perfect fit of constant targets)."""
        pred = np.asarray(cast(Any, self).predict(X), dtype=np.float64)
        ya = check_targets(y, pred.shape[0])
        w = np.ones_like(ya) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        mean = float(np.average(ya, weights=w))
        ss_res = float(np.sum(w * (ya - pred) ** 2))
        ss_tot = float(np.sum(w * (ya - mean) ** 2))
        if ss_tot == 0.0:
            return 1.0 if ss_res == 0.0 else 0.0
        return 1.0 - ss_res / ss_tot
