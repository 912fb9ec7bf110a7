"""One-process facade: every HybridTree party in one process, scikit-learn conventions.

``fit(X, y, host_features, guest_features, guest_rows)``: the host holds the
columns ``host_features`` of every row; guest ``u`` holds the rows
``guest_rows[u]`` of the columns ``guest_features`` (one list shared by all
guests, or one list per guest for heterogeneous feature spaces, Appendix C.4).
The facade only splits the table into each party's data, builds the
:class:`InProcessNetwork`, the :class:`Host` and the :class:`Guest` roles, and
calls :meth:`Host.fit`: the host bins its columns and runs every boosting round,
the guests bin theirs with the agreed bins (:func:`agree_bins`).  After ``fit``
the parties stay alive for ``predict`` (inference, Section 4.2, run by the
host), and the network (with its transcript) is ``network_``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError
from securetrees.estimator import Estimator
from securetrees.executors import check_trusted, role_executor
from securetrees.paillier import PrivateKey, PublicKey, generate_keypair
from securetrees.progress import phase
from securetrees.protocols.hybridtree.boosting import FitProgress, Loss, probabilities
from securetrees.protocols.hybridtree.guest import Guest, agree_bins, guest_matrix
from securetrees.protocols.hybridtree.host import Host, check_matrix, owners
from securetrees.protocols.hybridtree.params import (
    MIN_BIN_SIZE,
    MIN_GROUP_WIDTH,
    MIN_NODE_SIZE,
    HybridTreeParams,
    check_mode,
)
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.runtime import InProcessNetwork

__all__ = ["HybridTreeClassifier", "HybridTreeRegressor", "check_layout"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def _columns(name: str, cols: Sequence[int], n_features: int) -> list[int]:
    out = []
    for c in cols:
        if isinstance(c, (bool, np.bool_)) or not isinstance(c, (int, np.integer)):
            raise ParameterError(f"{name} must hold integer column indices")
        if not 0 <= int(c) < n_features:
            raise ParameterError(f"{name}: column {c} is out of range [0, {n_features})")
        out.append(int(c))
    if len(set(out)) != len(out):
        raise ParameterError(f"{name} lists a column twice")
    return out


def check_layout(
    n_rows: int, n_features: int, host_features: Sequence[int],
    guest_features: Sequence[int] | Sequence[Sequence[int]], guest_rows: Sequence[npt.ArrayLike],
) -> tuple[list[int], list[int], list[list[int]], list[IntArray]]:
    """Validate a hybrid layout; returns host columns, the guest feature space (sorted union),
    each guest's columns, and each guest's rows.  Every problem raises :class:`ParameterError`."""
    host = _columns("host_features", host_features, n_features)
    if not host:
        raise ParameterError("the host must hold at least one feature")
    if len(guest_rows) == 0:
        raise ParameterError("there must be at least one guest")
    gf = list(guest_features)
    if gf and all(isinstance(x, (list, tuple, np.ndarray)) for x in gf):
        if len(gf) != len(guest_rows):
            raise ParameterError("one feature list per guest (or one shared list)")
        per_guest = [_columns(f"guest_features[{u}]", cols, n_features)  # type: ignore[arg-type]
                     for u, cols in enumerate(gf)]
    else:
        shared = _columns("guest_features", gf, n_features)  # type: ignore[arg-type]
        per_guest = [shared for _ in guest_rows]
    space = sorted({c for cols in per_guest for c in cols})
    if not space:
        raise ParameterError("the guests must hold at least one feature")
    if any(not cols for cols in per_guest):
        raise ParameterError("every guest must hold at least one feature")
    if set(space) & set(host):
        raise ParameterError("host_features and guest_features overlap")
    rows: list[IntArray] = []
    for u, r in enumerate(guest_rows):
        arr = np.asarray(r)
        if arr.ndim != 1 or arr.size == 0:
            raise ParameterError(f"guest_rows[{u}] is empty or not one-dimensional")
        if arr.dtype.kind not in "iu":
            raise ParameterError(f"guest_rows[{u}] must hold integer row indices (no NaN)")
        ids = arr.astype(np.int64)
        if ids.min() < 0 or ids.max() >= n_rows:
            raise ParameterError(f"guest_rows[{u}] names rows that do not exist")
        if np.unique(ids).size != ids.size:
            raise ParameterError(f"guest_rows[{u}] lists a row twice")
        rows.append(np.sort(ids))
    return host, space, per_guest, rows


class _HybridTree(Estimator):
    _fitted_attribute = "host_"
    _classifier = False
    _loss: Loss = "squared"
    #: The host role's class (the leakage measurement substitutes a recording subclass).
    _host_class: type[Host] = Host

    def __init__(
        self, n_estimators: int = 50, *, host_depth: int = 5, guest_depth: int = 2,
        learning_rate: float = 0.1, reg_lambda: float = 1.0, second_order: bool = True,
        base_score: Literal["prior", "zero"] = "prior", min_samples_leaf: int = 1,
        max_bins: int = 32, frac_bits: int = 24, key_bits: int = 2048,
        encryption: Literal["djn", "djn-short", "key-owner"] = "key-owner",
        mode: Literal["secure", "plaintext", "paper"] = "secure", allow_insecure: bool = False,
        min_guests: int = 3, min_node_size: int = MIN_NODE_SIZE, min_bin_size: int = MIN_BIN_SIZE,
        min_group_width: int = MIN_GROUP_WIDTH,
        few_guests: Literal["leaf", "raise"] = "leaf",
        categorical_features: Sequence[int] | None = None,
        keypair: tuple[PublicKey, PrivateKey] | None = None, record_payloads: bool = False,
        random_state: int | None = None, progress: bool | Callable[[FitProgress], None] = False,
        rng: RandomSource = SYSTEM_RANDOM, executor: Executor | None = None,
        n_jobs: int | None = None, trusted_workers: bool = False,
    ) -> None:
        self.n_estimators = n_estimators
        self.host_depth = host_depth
        self.guest_depth = guest_depth
        self.learning_rate = learning_rate
        self.reg_lambda = reg_lambda
        self.second_order = second_order
        self.base_score = base_score
        self.min_samples_leaf = min_samples_leaf
        self.max_bins = max_bins
        self.frac_bits = frac_bits
        self.key_bits = key_bits
        self.encryption = encryption
        self.mode = mode
        self.allow_insecure = allow_insecure
        self.min_guests = min_guests
        self.min_node_size = min_node_size
        self.min_bin_size = min_bin_size
        self.min_group_width = min_group_width
        self.few_guests = few_guests
        self.categorical_features = categorical_features
        self.keypair = keypair
        self.record_payloads = record_payloads
        self.random_state = random_state
        self.progress = progress
        self.rng = rng
        self.executor = executor
        self.n_jobs = n_jobs
        self.trusted_workers = trusted_workers

    # -- fitting ---------------------------------------------------------------------------
    def _params(self) -> HybridTreeParams:
        mode = check_mode(self.mode, self.allow_insecure)
        return HybridTreeParams(
            host_depth=self.host_depth, guest_depth=self.guest_depth,
            learning_rate=float(self.learning_rate), reg_lambda=float(self.reg_lambda),
            second_order=self.second_order, min_samples_leaf=self.min_samples_leaf,
            max_bins=self.max_bins, frac_bits=self.frac_bits, min_guests=self.min_guests,
            min_node_size=self.min_node_size, min_bin_size=self.min_bin_size,
            min_group_width=self.min_group_width, few_guests=self.few_guests,
            encryption=self.encryption, mode=mode,
        )

    def _keys(self, params: HybridTreeParams) -> tuple[PublicKey, PrivateKey] | None:
        if params.mode != "secure":
            return None
        if self.keypair is not None:
            return self.keypair
        return generate_keypair(self.key_bits, allow_insecure=self.allow_insecure, rng=self.rng)

    def fit(
        self, X: npt.ArrayLike, y: npt.ArrayLike, host_features: Sequence[int],
        guest_features: Sequence[int] | Sequence[Sequence[int]], guest_rows: Sequence[npt.ArrayLike],
    ) -> _HybridTree:
        """Build the network, the host and the guests from the layout, and let the host train."""
        if self.base_score not in ("prior", "zero"):
            raise ParameterError("base_score must be 'prior' or 'zero'")
        if isinstance(self.n_estimators, bool) or not isinstance(self.n_estimators, int) or (
            self.n_estimators < 1
        ):
            raise ParameterError("n_estimators must be a positive integer")
        params = self._params()
        Xa = check_matrix(X)
        n, d = Xa.shape
        host_cols, space, per_guest, rows = check_layout(n, d, host_features, guest_features,
                                                         guest_rows)
        if params.mode != "paper" and len(rows) < params.min_guests:
            raise ParameterError(f"HybridTree needs at least {params.min_guests} guests "
                                 f"(got {len(rows)}): the masked sums would expose a guest")
        cat = set(_columns("categorical_features", self.categorical_features or [], d))
        keys = self._keys(params)
        net = InProcessNetwork(keep_payloads=self.record_payloads)
        guest_X = [guest_matrix(Xa[r], space, cols) for r, cols in zip(rows, per_guest, strict=True)]
        guest_bins = agree_bins(guest_X, max_bins=params.max_bins, categorical=[c in cat for c in space])
        names = [f"guest{u}" for u in range(len(rows))]
        with role_executor(self.executor, self.n_jobs) as ex, phase(
                "HybridTree", total=self.n_estimators, enabled=self.progress is True) as bar:
            host = self._host_class("host", net, params=params, guests=names, X=Xa[:, host_cols],
                                    owner=owners(n, rows), categorical=[c in cat for c in host_cols],
                                    keypair=keys, rng=self.rng, executor=ex,
                                    trusted_workers=check_trusted(self.trusted_workers))
            guests = [
                Guest(name, net, params=params, ids=r, X=gx, mapper=guest_bins,
                      host_key=keys[0] if keys is not None else None,
                      allow_insecure=self.allow_insecure, rng=self.rng, executor=ex)
                for name, r, gx in zip(names, rows, guest_X, strict=True)
            ]
            callback = self.progress if callable(self.progress) else FitProgress.shown_on(bar)
            host.fit(y, n_estimators=self.n_estimators, loss=self._loss,
                     base_score=self.base_score, progress=callback)
            host.executor = self.executor  # an owned pool is shut down here: predict runs serially
            for guest in guests:
                guest.executor = self.executor
        self.params_ = params
        if self._classifier:
            self.classes_ = host.classes_
        self.base_score_ = host.base_score_
        self.n_outputs_ = host.n_outputs_
        self.n_features_in_ = d
        self.host_features_, self.guest_features_ = host_cols, space
        self.guest_feature_lists_ = per_guest
        self.host_, self.guests_, self.network_ = host, guests, net
        self.fallback_nodes_ = host.fallback_nodes
        self.small_nodes_ = host.small_nodes
        self.dropped_guests_ = list(host.dropped)
        #: CPU seconds of this process per tree: every party's work, since all run here.
        self.tree_cpu_seconds_ = host.tree_cpu_seconds
        return self

    # -- prediction ------------------------------------------------------------------------
    def decision_function(self, X: npt.ArrayLike, guest_rows: Sequence[npt.ArrayLike]) -> FloatArray:
        """Raw scores by the inference protocol; ``guest_rows`` lists each guest's test rows."""
        self._check_fitted()
        Xa = check_matrix(X)
        if Xa.shape[1] != self.n_features_in_:
            raise ParameterError(f"X must have {self.n_features_in_} columns")
        if len(guest_rows) != len(self.guests_):
            raise ParameterError(f"guest_rows must list rows for {len(self.guests_)} guests")
        _, _, _, rows = check_layout(Xa.shape[0], Xa.shape[1], self.host_features_,
                                     self.guest_feature_lists_, guest_rows)
        for guest, r, cols in zip(self.guests_, rows, self.guest_feature_lists_, strict=True):
            guest.load_test(r, guest_matrix(Xa[r], self.guest_features_, cols))
        return self.host_.decision_function(Xa[:, self.host_features_], owners(Xa.shape[0], rows))


class HybridTreeClassifier(_HybridTree):
    _estimator_type = "classifier"
    """HybridTree with logistic loss (sigmoid; softmax with one tree per class and round)."""

    _classifier = True
    _loss: Loss = "logistic"

    def predict_proba(self, X: npt.ArrayLike, guest_rows: Sequence[npt.ArrayLike]) -> FloatArray:
        return probabilities(self.decision_function(X, guest_rows))

    def predict(self, X: npt.ArrayLike, guest_rows: Sequence[npt.ArrayLike]) -> npt.NDArray[Any]:
        proba = self.predict_proba(X, guest_rows)
        return np.asarray(self.classes_[np.argmax(proba, axis=1)])

    def score(self, X: npt.ArrayLike, y: npt.ArrayLike, guest_rows: Sequence[npt.ArrayLike]) -> float:
        return float(np.mean(self.predict(X, guest_rows) == np.asarray(y)))


class HybridTreeRegressor(_HybridTree):
    _estimator_type = "regressor"
    """HybridTree with squared loss."""

    def predict(self, X: npt.ArrayLike, guest_rows: Sequence[npt.ArrayLike]) -> FloatArray:
        return np.asarray(self.decision_function(X, guest_rows), dtype=np.float64)

    def score(self, X: npt.ArrayLike, y: npt.ArrayLike, guest_rows: Sequence[npt.ArrayLike]) -> float:
        """R² of the predictions."""
        ya = np.asarray(y, dtype=np.float64)
        resid = ((ya - self.predict(X, guest_rows)) ** 2).sum()
        return float(1.0 - resid / ((ya - ya.mean()) ** 2).sum())

