"""One-process facade: every SecureBoost party in one process, scikit-learn conventions.

The estimator contract of :mod:`securetrees.estimator` (``specs/estimators.md``): ``X`` is an
array or a DataFrame (string and ``category`` columns are categorical, NaN is missing), labels
may be strings.  The vertical split is a constructor parameter: ``partition[0]`` lists the
columns of the active party (the label holder), ``partition[u]`` for ``u >= 1`` those of
passive party ``u``, by DataFrame column name or index (every column owned by exactly one
party, at least one passive party; ``None``: two contiguous halves).  ``fit(X, y)``
splits the table into each party's columns of the same rows (the rows are assumed aligned,
e.g. by :mod:`securetrees.psi`), builds the :class:`InProcessNetwork`, the roles, and lets the
active party train; ``predict`` runs the inference protocol (one round per tree level).
The network (with its transcript) is ``network_`` and the roles ``active_``, ``passives_``.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from concurrent.futures import Executor
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError
from securetrees.estimator import ClassifierMixin, Estimator, RegressorMixin, check_targets, encode_labels
from securetrees.executors import check_flag, check_trusted, role_executor
from securetrees.paillier import PrivateKey, PublicKey, generate_keypair
from securetrees.protocols.secureboost.active import ActiveParty
from securetrees.protocols.secureboost.params import Encryption, Loss, SecureBoostParams
from securetrees.protocols.secureboost.passive import PassiveParty
from securetrees.rand import RandomSource
from securetrees.runtime import InProcessNetwork
from securetrees.schema import ColumnRef
from securetrees.trees.forest import sigmoid, softmax

__all__ = ["SecureBoostClassifier", "SecureBoostRegressor", "probabilities"]

FloatArray = npt.NDArray[np.float64]


def probabilities(raw: FloatArray) -> FloatArray:
    """Class probabilities from raw scores: sigmoid for one output (two classes), else softmax."""
    if raw.shape[1] == 1:
        p = sigmoid(raw[:, 0])
        return np.column_stack([1.0 - p, p])
    return softmax(raw)


class _SecureBoost(Estimator):
    _loss: Loss = "squared"
    _fitted_attribute = "active_"
    _predicts_with_parties = True
    active_: ActiveParty
    passives_: list[PassiveParty]
    partition_: list[list[int]]

    def __init__(
        self, partition: Sequence[Sequence[ColumnRef]] | None = None, n_estimators: int = 10, *, max_depth: int = 3,
        learning_rate: float = 0.1, reg_lambda: float = 1.0, second_order: bool = True,
        base_score: Literal["prior", "zero"] = "prior", min_samples_leaf: float = 1.0,
        min_samples_split: float = 2.0, min_gain: float = 0.0, max_bins: int = 32, frac_bits: int = 24,
        key_bits: int = 2048, encryption: Encryption = "key-owner", allow_insecure: bool = False,
        keypair: tuple[PublicKey, PrivateKey] | None = None, record_payloads: bool = True,
        categorical_features: Sequence[bool] | Sequence[ColumnRef] | None = None, rng: RandomSource | None = None,
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

    def _codes(self, y: object, n: int) -> tuple[FloatArray, int]:  # pragma: no cover - overridden
        raise NotImplementedError

    def fit(self, X: object, y: object) -> _SecureBoost:
        """Split ``X`` by ``partition`` (column names or indexes; ``None``: two halves, the active
        party first), build the parties and let the active party train."""
        if hasattr(self, "active_"):
            del self.active_
        Xa = self._validate_X(X, reset=True)
        if Xa.shape[0] < 2:
            raise ParameterError(f"SecureBoost needs at least 2 samples, got n_samples = {Xa.shape[0]}")
        parts = self._vertical_partition(self.partition, min_parties=2, party="party")
        cat = self._categorical(self.categorical_features)
        codes, n_classes = self._codes(y, Xa.shape[0])
        params = self._params(n_classes)
        rng = self._random_source()
        keys = self.keypair or generate_keypair(self.key_bits, allow_insecure=self.allow_insecure, rng=rng)
        net = InProcessNetwork(keep_payloads=self.record_payloads)
        names = [f"passive{u}" for u in range(1, len(parts))]
        with role_executor(self.executor, self.n_jobs) as ex:
            passives = [PassiveParty(name, net, X=Xa[:, cols], categorical=tuple(cat[c] for c in cols),
                                     active_key=keys[0], allow_insecure=self.allow_insecure, rng=rng,
                                     executor=ex)
                        for name, cols in zip(names, parts[1:], strict=True)]
            active = ActiveParty("active", net, X=Xa[:, parts[0]], y=codes, passives=names, params=params,
                                 keypair=keys, categorical=tuple(cat[c] for c in parts[0]), rng=rng,
                                 executor=ex, trusted_workers=check_trusted(self.trusted_workers),
                                 background_pool=check_flag(self.background_pool, "background_pool"))
            active.fit()
        active.executor = self.executor  # an owned pool is shut down here: predict runs serially
        for passive in passives:
            passive.executor = self.executor
        self.partition_, self.params_ = parts, params
        self.passives_, self.network_ = passives, net
        self.active_ = active
        return self

    def decision_function(self, X: object) -> FloatArray:
        """Raw scores by the inference protocol (each party gets its own columns of ``X``)."""
        self._check_fitted()
        Xa = self._validate_X(X, reset=False)
        for party, cols in zip(self.passives_, self.partition_[1:], strict=True):
            party.load_queries(Xa[:, cols])
        return self.active_.decision_function(Xa[:, self.partition_[0]])


_PARAM_NAMES = tuple(inspect.signature(_SecureBoost.__init__).parameters)[1:]
"""The facade's parameters in constructor order (the deployment reads its run settings from them)."""


class SecureBoostClassifier(ClassifierMixin, _SecureBoost):
    """SecureBoost with the logistic loss (sigmoid; softmax with one tree per class and round)."""

    _loss: Loss = "logistic"

    def _codes(self, y: object, n: int) -> tuple[FloatArray, int]:
        self.classes_, codes = encode_labels(y, n)
        return codes.astype(np.float64), int(self.classes_.size)

    def predict_proba(self, X: object) -> FloatArray:
        return probabilities(self.decision_function(X))

    def predict(self, X: object) -> npt.NDArray[Any]:
        proba = self.predict_proba(X)
        return np.asarray(self.classes_[np.argmax(proba, axis=1)])


class SecureBoostRegressor(RegressorMixin, _SecureBoost):
    """SecureBoost with the squared loss."""

    def _codes(self, y: object, n: int) -> tuple[FloatArray, int]:
        return check_targets(y, n), 0

    def predict(self, X: object) -> FloatArray:
        return np.asarray(self.decision_function(X)[:, 0], dtype=np.float64)
