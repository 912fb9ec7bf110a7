"""One-process facade: every SecureBoost party in one process, scikit-learn conventions.

The vertical split is a constructor parameter: ``partition[0]`` lists the columns of the
active party (the label holder), ``partition[u]`` for ``u >= 1`` those of passive party
``u`` (every column owned by exactly one party, at least one passive party).  ``fit(X, y)``
splits the table into each party's columns of the same rows (the rows are assumed aligned,
e.g. by :mod:`securetrees.psi`), builds the :class:`InProcessNetwork`, the roles, and lets the
active party train; ``predict`` runs the inference protocol (one round per tree level).
The network (with its transcript) is ``network_`` and the roles ``active_``, ``passives_``.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Executor
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from securetrees.errors import NotFittedError, ParameterError
from securetrees.executors import check_flag, check_trusted, role_executor
from securetrees.paillier import PrivateKey, PublicKey, generate_keypair
from securetrees.protocols.secureboost.active import ActiveParty
from securetrees.protocols.secureboost.params import Encryption, Loss, SecureBoostParams
from securetrees.protocols.secureboost.passive import PassiveParty
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.runtime import InProcessNetwork
from securetrees.trees import check_partition
from securetrees.trees.forest import sigmoid, softmax

__all__ = ["SecureBoostClassifier", "SecureBoostRegressor", "probabilities"]

FloatArray = npt.NDArray[np.float64]


def probabilities(raw: FloatArray) -> FloatArray:
    """Class probabilities from raw scores: sigmoid for one output (two classes), else softmax."""
    if raw.shape[1] == 1:
        p = sigmoid(raw[:, 0])
        return np.column_stack([1.0 - p, p])
    return softmax(raw)


def _categorical(cols: Sequence[int] | None, n_features: int) -> set[int]:
    """The categorical column indices, validated (:class:`ParameterError` otherwise)."""
    out: set[int] = set()
    for c in cols or ():
        if isinstance(c, bool) or not isinstance(c, (int, np.integer)) or not 0 <= int(c) < n_features:
            raise ParameterError(f"categorical_features: column {c!r} is not in [0, {n_features})")
        out.add(int(c))
    return out


class _SecureBoost:
    _loss: Loss = "squared"

    def __init__(
        self, partition: Sequence[Sequence[int]], n_estimators: int = 10, *, max_depth: int = 3,
        learning_rate: float = 0.1, reg_lambda: float = 1.0, second_order: bool = True,
        base_score: Literal["prior", "zero"] = "prior", min_samples_leaf: float = 1.0,
        min_samples_split: float = 2.0, min_gain: float = 0.0, max_bins: int = 32, frac_bits: int = 24,
        key_bits: int = 2048, encryption: Encryption = "key-owner", allow_insecure: bool = False,
        keypair: tuple[PublicKey, PrivateKey] | None = None, record_payloads: bool = True,
        categorical_features: Sequence[int] | None = None, rng: RandomSource = SYSTEM_RANDOM,
        executor: Executor | None = None, n_jobs: int | None = None, trusted_workers: bool = False,
        background_pool: bool = False,
    ) -> None:
        self.partition = partition
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.reg_lambda = reg_lambda
        self.second_order = second_order
        self.base_score = base_score
        self.min_samples_leaf = min_samples_leaf
        self.min_samples_split = min_samples_split
        self.min_gain = min_gain
        self.max_bins = max_bins
        self.frac_bits = frac_bits
        self.key_bits = key_bits
        self.encryption = encryption
        self.allow_insecure = allow_insecure
        self.keypair = keypair
        self.record_payloads = record_payloads
        self.categorical_features = categorical_features
        self.rng = rng
        self.executor = executor
        self.n_jobs = n_jobs
        self.trusted_workers = trusted_workers
        self.background_pool = background_pool

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {k: getattr(self, k) for k in _PARAM_NAMES}

    def set_params(self, **params: Any) -> _SecureBoost:
        for k, v in params.items():
            if k not in _PARAM_NAMES:
                raise ParameterError(f"unknown parameter {k!r}")
            setattr(self, k, v)
        return self

    def _params(self, n_classes: int) -> SecureBoostParams:
        if isinstance(self.n_estimators, bool) or not isinstance(self.n_estimators, int):
            raise ParameterError("n_estimators must be a positive integer")
        return SecureBoostParams(
            loss=self._loss, n_classes=n_classes, n_estimators=self.n_estimators,
            learning_rate=float(self.learning_rate), reg_lambda=float(self.reg_lambda),
            second_order=self.second_order, base_score=self.base_score, max_depth=self.max_depth,
            min_samples_leaf=self.min_samples_leaf, min_samples_split=self.min_samples_split,
            min_gain=self.min_gain, max_bins=self.max_bins, frac_bits=self.frac_bits, encryption=self.encryption,
        )

    def _codes(self, y: npt.ArrayLike) -> tuple[FloatArray, int]:
        return np.asarray(y, dtype=np.float64), 0

    def fit(self, X: npt.ArrayLike, y: npt.ArrayLike) -> _SecureBoost:
        """Split ``X`` by ``partition``, build the parties and let the active party train."""
        Xa = np.asarray(X, dtype=np.float64)
        if Xa.ndim != 2:
            raise ParameterError("X must be two-dimensional")
        parts = check_partition(self.partition, Xa.shape[1], min_parties=2, party="party")
        cat = _categorical(self.categorical_features, Xa.shape[1])
        codes, n_classes = self._codes(y)
        params = self._params(n_classes)
        keys = self.keypair or generate_keypair(self.key_bits, allow_insecure=self.allow_insecure, rng=self.rng)
        net = InProcessNetwork(keep_payloads=self.record_payloads)
        names = [f"passive{u}" for u in range(1, len(parts))]
        with role_executor(self.executor, self.n_jobs) as ex:
            passives = [PassiveParty(name, net, X=Xa[:, cols], categorical=tuple(c in cat for c in cols),
                                     active_key=keys[0], allow_insecure=self.allow_insecure, rng=self.rng,
                                     executor=ex)
                        for name, cols in zip(names, parts[1:], strict=True)]
            active = ActiveParty("active", net, X=Xa[:, parts[0]], y=codes, passives=names, params=params,
                                 keypair=keys, categorical=tuple(c in cat for c in parts[0]), rng=self.rng,
                                 executor=ex, trusted_workers=check_trusted(self.trusted_workers),
                                 background_pool=check_flag(self.background_pool, "background_pool"))
            active.fit()
        active.executor = self.executor  # an owned pool is shut down here: predict runs serially
        for passive in passives:
            passive.executor = self.executor
        self.partition_, self.params_, self.n_features_in_ = parts, params, Xa.shape[1]
        self.active_, self.passives_, self.network_ = active, passives, net
        return self

    def decision_function(self, X: npt.ArrayLike) -> FloatArray:
        """Raw scores by the inference protocol (each party gets its own columns of ``X``)."""
        if not hasattr(self, "active_"):
            raise NotFittedError("fit the model before predicting")
        Xa = np.asarray(X, dtype=np.float64)
        if Xa.ndim != 2 or Xa.shape[1] != self.n_features_in_:
            raise ParameterError(f"X must have {self.n_features_in_} columns")
        for party, cols in zip(self.passives_, self.partition_[1:], strict=True):
            party.load_queries(Xa[:, cols])
        return self.active_.decision_function(Xa[:, self.partition_[0]])


_PARAM_NAMES = tuple(
    _SecureBoost.__init__.__code__.co_varnames[
        1: 1 + _SecureBoost.__init__.__code__.co_argcount - 1 + _SecureBoost.__init__.__code__.co_kwonlyargcount
    ]
)


class SecureBoostClassifier(_SecureBoost):
    """SecureBoost with the logistic loss (sigmoid; softmax with one tree per class and round)."""

    _loss: Loss = "logistic"

    def _codes(self, y: npt.ArrayLike) -> tuple[FloatArray, int]:
        ya = np.asarray(y)
        if ya.ndim != 1:
            raise ParameterError("y must be one-dimensional")
        self.classes_, codes = np.unique(ya, return_inverse=True)
        if self.classes_.size < 2:
            raise ParameterError("a classifier needs at least two classes")
        return codes.astype(np.float64), int(self.classes_.size)

    def predict_proba(self, X: npt.ArrayLike) -> FloatArray:
        return probabilities(self.decision_function(X))

    def predict(self, X: npt.ArrayLike) -> npt.NDArray[Any]:
        return np.asarray(self.classes_[np.argmax(self.predict_proba(X), axis=1)])

    def score(self, X: npt.ArrayLike, y: npt.ArrayLike) -> float:
        return float(np.mean(self.predict(X) == np.asarray(y)))


class SecureBoostRegressor(_SecureBoost):
    """SecureBoost with the squared loss."""

    def predict(self, X: npt.ArrayLike) -> FloatArray:
        return np.asarray(self.decision_function(X)[:, 0], dtype=np.float64)

    def score(self, X: npt.ArrayLike, y: npt.ArrayLike) -> float:
        """R² of the predictions."""
        ya = np.asarray(y, dtype=np.float64)
        resid = ((ya - self.predict(X)) ** 2).sum()
        return float(1.0 - resid / ((ya - ya.mean()) ** 2).sum())
