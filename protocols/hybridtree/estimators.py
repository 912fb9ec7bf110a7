"""One-process facade: every HybridTree party in one process, scikit-learn conventions.

``fit(X, y)``: how the parties hold the table is given by three parameters.  The
host holds the columns ``host_features`` of every row; the guests hold the
columns ``guest_features`` (one list shared by all guests, or one list per guest
for heterogeneous feature spaces, Appendix C.4) of their own rows; and
``guest_column`` (a column of X, no feature) names the guest of each row (guests
in the sorted order of its values; a missing value is a row no guest holds).
Without them the simulation default applies: the last quarter of the columns to
the guests, rows dealt in turn to ``n_guests`` guests (spec ``specs/estimators.md``).
The facade only splits the table into each party's data, builds the
:class:`InProcessNetwork`, the :class:`Host` and the :class:`Guest` roles, and
calls :meth:`Host.fit`: the host bins its columns and runs every boosting round,
the guests bin theirs with the agreed bins (:func:`agree_bins`).  After ``fit``
the parties stay alive for ``predict`` (inference, Section 4.2, run by the
host), and the network (with its transcript) is ``network_``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError
from securetrees.estimator import ClassifierMixin, Estimator, RegressorMixin, check_targets, encode_labels
from securetrees.executors import check_flag, check_trusted, role_executor
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
from securetrees.rand import RandomSource
from securetrees.runtime import InProcessNetwork
from securetrees.schema import ColumnRef, TabularSchema

__all__ = ["HybridTreeClassifier", "HybridTreeRegressor", "check_layout", "check_rows", "with_guest_column"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
GuestFeatures = Sequence[ColumnRef] | Sequence[Sequence[ColumnRef]]


def _columns(name: str, cols: Sequence[Any], n_features: int) -> list[int]:
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
        shared = _columns("guest_features", gf, n_features)
        per_guest = [shared for _ in guest_rows]
    space = sorted({c for cols in per_guest for c in cols})
    if not space:
        raise ParameterError("the guests must hold at least one feature")
    if any(not cols for cols in per_guest):
        raise ParameterError("every guest must hold at least one feature")
    if set(space) & set(host):
        raise ParameterError("host_features and guest_features overlap")
    return host, space, per_guest, check_rows(n_rows, guest_rows)


def check_rows(n_rows: int, guest_rows: Sequence[npt.ArrayLike], *, allow_empty: bool = False) -> list[IntArray]:
    """Each guest's rows (sorted row indexes of a table of ``n_rows`` rows), checked: one-dimensional
    integer arrays of existing, distinct rows, non-empty unless ``allow_empty``."""
    rows: list[IntArray] = []
    for u, r in enumerate(guest_rows):
        arr = np.asarray(r)
        if arr.ndim != 1 or (arr.size == 0 and not allow_empty):
            raise ParameterError(f"guest_rows[{u}] is empty or not one-dimensional")
        if arr.size == 0:
            rows.append(np.zeros(0, dtype=np.int64))
            continue
        if arr.dtype.kind not in "iu":
            raise ParameterError(f"guest_rows[{u}] must hold integer row indices (no NaN)")
        ids = arr.astype(np.int64)
        if ids.min() < 0 or ids.max() >= n_rows:
            raise ParameterError(f"guest_rows[{u}] names rows that do not exist")
        if np.unique(ids).size != ids.size:
            raise ParameterError(f"guest_rows[{u}] lists a row twice")
        rows.append(np.sort(ids))
    return rows


def with_guest_column(X: npt.ArrayLike, guest_rows: Sequence[npt.ArrayLike]) -> FloatArray:
    """``X`` (numeric) with one more, last column naming each row's guest: the index of the
    lowest-numbered guest of ``guest_rows`` that holds it (the owner, :func:`owners`), NaN for a
    row no guest holds; fit and predict it with ``guest_column=-1``.  A simulation helper, the
    bridge from a row layout: in a real federation each guest keeps its own rows."""
    Xa = check_matrix(X)
    if len(guest_rows) == 0:
        raise ParameterError("there must be at least one guest")
    owner = owners(Xa.shape[0], check_rows(Xa.shape[0], guest_rows, allow_empty=True))
    return np.column_stack([Xa, np.where(owner >= 0, owner, np.nan)])


class _HybridTree(Estimator):
    _fitted_attribute = "host_"
    _predicts_with_parties = True
    _loss: Loss = "squared"
    #: The host role's class (the leakage measurement substitutes a recording subclass).
    _host_class: type[Host] = Host

    def __init__(
        self, n_estimators: int = 50, *, host_features: Sequence[ColumnRef] | None = None,
        guest_features: GuestFeatures | None = None, guest_column: ColumnRef | None = None, n_guests: int = 3,
        host_depth: int = 5, guest_depth: int = 2,
        learning_rate: float = 0.1, reg_lambda: float = 1.0, second_order: bool = True,
        base_score: Literal["prior", "zero"] = "prior", min_samples_leaf: int = 1,
        max_bins: int = 32, frac_bits: int = 24, key_bits: int = 2048,
        encryption: Literal["djn", "djn-short", "key-owner"] = "key-owner",
        mode: Literal["secure", "plaintext", "paper"] = "secure", allow_insecure: bool = False,
        min_guests: int = 3, min_node_size: int = MIN_NODE_SIZE, min_bin_size: int = MIN_BIN_SIZE,
        min_group_width: int = MIN_GROUP_WIDTH,
        few_guests: Literal["leaf", "raise"] = "leaf",
        categorical_features: Sequence[ColumnRef] | Sequence[bool] | None = None,
        keypair: tuple[PublicKey, PrivateKey] | None = None, record_payloads: bool = False,
        random_state: int | None = None, progress: bool | Callable[[FitProgress], None] = False,
        rng: RandomSource | None = None, executor: Executor | None = None,
        n_jobs: int | None = None, trusted_workers: bool = False, background_pool: bool = False,
    ) -> None:
        self.n_estimators = n_estimators
        self.host_features = host_features
        self.guest_features = guest_features
        self.guest_column = guest_column
        self.n_guests = n_guests
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
        self.background_pool = background_pool

    # -- hooks -----------------------------------------------------------------------------
    def _fit_targets(self, y: object, n: int) -> npt.NDArray[Any]:  # pragma: no cover - overridden
        raise NotImplementedError

    # -- parameters ------------------------------------------------------------------------
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
        return generate_keypair(self.key_bits, allow_insecure=self.allow_insecure, rng=self._random_source())

    # -- the table: who holds what (local, no message) -------------------------------------
    def _column_list(self, name: str, refs: object) -> list[int]:
        if isinstance(refs, (str, bytes)) or not isinstance(refs, (list, tuple, np.ndarray)):
            raise ParameterError(f"{name} is a list of column names or indexes")
        out = [self.schema_.index(r) for r in refs]
        if len(set(out)) != len(out):
            raise ParameterError(f"{name} lists a column twice")
        return out

    def _guest_lists(self, n_guests: int) -> list[list[int]]:
        """``guest_features`` as one column list per guest (one shared list, or one list per guest)."""
        gf = self.guest_features
        if isinstance(gf, (str, bytes)) or not isinstance(gf, (list, tuple, np.ndarray)):
            raise ParameterError("guest_features is a list of column names or indexes, or one such list per guest")
        items = list(gf)
        if items and all(isinstance(x, (list, tuple, np.ndarray)) for x in items):
            if len(items) != n_guests:
                raise ParameterError(f"guest_features gives {len(items)} lists for {n_guests} guests "
                                     "(one list per guest, or one shared list)")
            return [self._column_list(f"guest_features[{u}]", cols) for u, cols in enumerate(items)]
        shared = self._column_list("guest_features", items)
        return [shared for _ in range(n_guests)]

    def _feature_layout(self, n_guests: int, guest_col: int | None) -> tuple[list[int], list[int], list[list[int]]]:
        """Fit step 0a: the host's columns, the guest feature space (sorted) and each guest's
        columns, as positions in X.  Without ``host_features`` and ``guest_features`` the last
        quarter of the feature columns (at least one) go to the guests, the rest to the host; with
        one of them, the other side holds the remaining feature columns."""
        features = [j for j in range(self.schema_.n_columns) if j != guest_col]
        if self.host_features is None and self.guest_features is None:
            if len(features) < 2:
                raise ParameterError("HybridTree needs at least two feature columns: one for the host, "
                                     f"one for the guests; got n_features = {len(features)}")
            k = max(1, len(features) // 4)
            host, per_guest = features[:-k], [features[-k:] for _ in range(n_guests)]
        else:
            given = None if self.host_features is None else self._column_list("host_features", self.host_features)
            if self.guest_features is None:
                rest = [j for j in features if j not in set(given or [])]
                per_guest = [rest for _ in range(n_guests)]
            else:
                per_guest = self._guest_lists(n_guests)
            held = {c for cols in per_guest for c in cols}
            host = given if given is not None else [j for j in features if j not in held]
        space = sorted({c for cols in per_guest for c in cols})
        if guest_col is not None and (guest_col in host or guest_col in space):
            raise ParameterError("guest_column names the guests: it cannot be a host or guest feature")
        if not host:
            raise ParameterError("the host must hold at least one feature")
        if any(not cols for cols in per_guest):
            raise ParameterError("every guest must hold at least one feature")
        if set(space) & set(host):
            raise ParameterError("host_features and guest_features overlap")
        return host, space, per_guest

    def _owners(self, Xa: FloatArray, *, fit: bool) -> tuple[IntArray, FloatArray | None]:
        """Fit step 0b (and predict's): each row's guest index (-1 for a row no guest holds), and
        the guest column's values naming the guests.  With ``guest_column`` the guests are its
        distinct values in sorted order (read at ``fit``, kept as ``guest_values_``); without it
        row ``i`` goes to guest ``i mod n_guests``."""
        n = Xa.shape[0]
        if self.guest_column is None:
            k = self.n_guests
            if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
                raise ParameterError(f"n_guests must be a positive int, got {k!r}")
            if fit and k > n:
                raise ParameterError(f"cannot deal {n} sample(s) to n_guests={k} guests")
            return np.arange(n, dtype=np.int64) % int(k), None
        col = Xa[:, self.schema_.index(self.guest_column, negative=True)]
        held = ~np.isnan(col)
        if fit and not held.any():
            raise ParameterError(f"guest_column {self.guest_column!r} names no guest for any row")
        values = np.unique(col[held]) if fit else self.guest_values_
        idx = np.minimum(np.searchsorted(values, col[held]), values.size - 1)
        if np.any(values[idx] != col[held]):
            raise ParameterError(f"guest_column {self.guest_column!r} holds a value that names no guest of the fit")
        owner = np.full(n, -1, dtype=np.int64)
        owner[held] = idx
        return owner, values

    def _categorical_mask(self, guest_col: int | None) -> list[bool]:
        """One flag per column of X: string or ``category`` columns, and ``categorical_features``
        (names or indexes of X's columns, or one flag per column of X)."""
        if guest_col is not None and guest_col in self.schema_.indexes(self.categorical_features):
            raise ParameterError("guest_column cannot be a categorical feature")
        return self._categorical(self.categorical_features)

    # -- fitting ---------------------------------------------------------------------------
    def fit(self, X: object, y: object) -> Any:
        """Split the table among the parties (``host_features``, ``guest_features``,
        ``guest_column``), build the network, the host and the guests, and let the host train."""
        return self._fit_rows(self._validate_X(X, reset=True), y, None)

    def _fit_rows(self, Xa: FloatArray, y: object, shared_rows: Sequence[IntArray] | None) -> Any:
        """``fit`` on the encoded table.  ``shared_rows`` (``testing.fit_layout`` only) gives each
        guest's rows explicitly, so that a row may be held by several guests (Appendix C.4), which
        a guest column cannot say; the guest column then only names each row's owner."""
        if self.base_score not in ("prior", "zero"):
            raise ParameterError("base_score must be 'prior' or 'zero'")
        if isinstance(self.n_estimators, bool) or not isinstance(self.n_estimators, int) or (
            self.n_estimators < 1
        ):
            raise ParameterError("n_estimators must be a positive integer")
        params = self._params()
        n, d = Xa.shape
        guest_col = None if self.guest_column is None else self.schema_.index(self.guest_column, negative=True)
        owner, guest_values = self._owners(Xa, fit=True)
        n_owners = int(owner.max()) + 1
        rows = list(shared_rows) if shared_rows is not None else [
            np.flatnonzero(owner == u).astype(np.int64) for u in range(n_owners)]
        target = self._fit_targets(y, n)
        host_cols, space, per_guest = self._feature_layout(len(rows), guest_col)
        if params.mode != "paper" and len(rows) < params.min_guests:
            raise ParameterError(f"HybridTree needs at least {params.min_guests} guests "
                                 f"(got {len(rows)}): the masked sums would expose a guest")
        cat = self._categorical_mask(guest_col)
        keys = self._keys(params)
        net = InProcessNetwork(keep_payloads=self.record_payloads)
        guest_X = [guest_matrix(Xa[r], space, cols) for r, cols in zip(rows, per_guest, strict=True)]
        guest_bins = agree_bins(guest_X, max_bins=params.max_bins, categorical=[cat[c] for c in space])
        names = [f"guest{u}" for u in range(len(rows))]
        with role_executor(self.executor, self.n_jobs) as ex, phase(
                "HybridTree", total=self.n_estimators, enabled=self.progress is True) as bar:
            host = self._host_class("host", net, params=params, guests=names, X=Xa[:, host_cols],
                                    owner=owners(n, rows), categorical=[cat[c] for c in host_cols],
                                    keypair=keys, rng=self._random_source(), executor=ex,
                                    trusted_workers=check_trusted(self.trusted_workers),
                                    background_pool=check_flag(self.background_pool, "background_pool"))
            guests = [
                Guest(name, net, params=params, ids=r, X=gx, mapper=guest_bins,
                      host_key=keys[0] if keys is not None else None,
                      allow_insecure=self.allow_insecure, rng=self._random_source(), executor=ex)
                for name, r, gx in zip(names, rows, guest_X, strict=True)
            ]
            callback = self.progress if callable(self.progress) else FitProgress.shown_on(bar)
            host.fit(target, n_estimators=self.n_estimators, loss=self._loss,
                     base_score=self.base_score, progress=callback)
            host.executor = self.executor  # an owned pool is shut down here: predict runs serially
            for guest in guests:
                guest.executor = self.executor
        self.params_ = params
        self.base_score_ = host.base_score_
        self.n_outputs_ = host.n_outputs_
        self.guest_column_index_ = guest_col
        if guest_values is not None:  # with shared rows, the owners' indexes name the guests
            self.guest_values_ = guest_values if shared_rows is None else np.arange(len(rows), dtype=np.float64)
        kept = [j for j in range(d) if j != guest_col]
        self.feature_schema_ = TabularSchema(tuple(self.schema_.columns[j] for j in kept), self.schema_.named)
        self.n_guests_ = len(rows)
        self.host_features_, self.guest_features_ = host_cols, space
        self.guest_feature_lists_ = per_guest
        self.guests_, self.network_ = guests, net
        self.fallback_nodes_ = host.fallback_nodes
        self.small_nodes_ = host.small_nodes
        self.dropped_guests_ = list(host.dropped)
        #: CPU seconds of this process per tree: every party's work, since all run here.
        self.tree_cpu_seconds_ = host.tree_cpu_seconds
        self.host_ = host  # last: its presence means fitted
        return self

    # -- prediction ------------------------------------------------------------------------
    def _test_table(self, X: object) -> tuple[FloatArray, IntArray]:
        """Predict step 0 (local): the test table encoded like the training table and each row's
        guest.  X without its guest column (one column fewer) is accepted: no guest holds its
        rows, so they are scored on the host's columns alone (a guest split sends them the way
        of its missing values), with a warning."""
        self._check_fitted()
        gc = self.guest_column_index_
        width = getattr(X, "shape", (0, None))[1] if getattr(X, "ndim", 2) == 2 else None
        if gc is not None and width == self.n_features_in_ - 1:
            features = self.feature_schema_.encode(X)
            warnings.warn("X has no guest column: no guest holds its rows, which are scored on the "
                          "host's features only", UserWarning, stacklevel=4)
            return np.insert(features, gc, np.nan, axis=1), np.full(features.shape[0], -1, dtype=np.int64)
        Xa = self._validate_X(X, reset=False)
        return Xa, self._owners(Xa, fit=False)[0]

    def decision_function(self, X: object) -> FloatArray:
        """Raw scores by the inference protocol (Section 4.2): each guest loads its rows of X
        (named by the guest column), then the host routes every row."""
        Xa, owner = self._test_table(X)
        for u, (guest, cols) in enumerate(zip(self.guests_, self.guest_feature_lists_, strict=True)):
            r = np.flatnonzero(owner == u).astype(np.int64)
            guest.load_test(r, guest_matrix(Xa[r], self.guest_features_, cols))
        return self.host_.decision_function(Xa[:, self.host_features_], owner)


class HybridTreeClassifier(ClassifierMixin, _HybridTree):
    """HybridTree with logistic loss (sigmoid; softmax with one tree per class and round)."""

    _loss: Loss = "logistic"

    def _fit_targets(self, y: object, n: int) -> npt.NDArray[Any]:
        classes, codes = encode_labels(y, n)
        self.classes_ = classes
        return codes

    def predict_proba(self, X: object) -> FloatArray:
        """Class probabilities, one column per class of ``classes_``."""
        return probabilities(self.decision_function(X))

    def predict(self, X: object) -> npt.NDArray[Any]:
        proba = self.predict_proba(X)
        return np.asarray(self.classes_[np.argmax(proba, axis=1)])


class HybridTreeRegressor(RegressorMixin, _HybridTree):
    """HybridTree with squared loss."""

    def _fit_targets(self, y: object, n: int) -> npt.NDArray[Any]:
        return check_targets(y, n)

    def predict(self, X: object) -> FloatArray:
        return np.asarray(self.decision_function(X), dtype=np.float64)
