"""What the two one-process facades share: input checks, the public schema, one run of the protocol.

Spec: ``specs/histogram_forest.md``.  :class:`HistogramForestBase` holds the common parameters (the
subclasses' ``__init__`` set them, scikit-learn style), checks the parts and the schema, starts a
:class:`Server` and one :class:`Client` per part on an :class:`~securetrees.runtime.InProcessNetwork`
(every message goes through the wire codec, so ``transcript_`` holds the real bytes and rounds) and
keeps the trees the server grew.  The task specifics (labels or targets, criterion, forest kind) are
the subclasses' hooks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError
from securetrees.estimator import Estimator
from securetrees.protocols.histogram_forest.accountant import Release
from securetrees.protocols.histogram_forest.client import Client
from securetrees.protocols.histogram_forest.mechanisms import check_epsilon
from securetrees.protocols.histogram_forest.server import ForestConfig, Server
from securetrees.protocols.histogram_forest.usefulness import ranges_example, warn_if_useless
from securetrees.rand import SYSTEM_RANDOM, RandomSource
from securetrees.runtime import InProcessNetwork, Transcript
from securetrees.schema import ColumnRef, TabularSchema
from securetrees.secagg.masker import check_party_count
from securetrees.trees.binning import BinMapper
from securetrees.trees.forest import Forest
from securetrees.trees.sampling import resolve_max_features
from securetrees.trees.tree import Tree

__all__ = ["BIN_EDGE_KINDS", "HistogramForestBase", "Part", "stack_parts"]

FloatArray = npt.NDArray[np.float64]
Part = tuple[npt.ArrayLike, npt.ArrayLike]
BIN_EDGE_KINDS = ("auto", "uniform", "quantile")


def stack_parts(parts: Sequence[Part]) -> tuple[FloatArray, npt.NDArray[Any]]:
    """One table from one ``(X_i, y_i)`` pair per client: the rows stacked in client order, with the
    client's index as the last column (fit it with ``client_column=-1``).  A simulation helper: in a
    real federation every client keeps its own rows (``securetrees.protocols.histogram_forest.deploy``)."""
    Xs, ys = _checked_parts(parts)
    return np.vstack([np.column_stack([X, np.full(X.shape[0], float(i))]) for i, X in enumerate(Xs)]), \
        np.concatenate(ys)


def _checked_parts(parts: Sequence[Part]) -> tuple[list[FloatArray], list[npt.NDArray[Any]]]:
    """Each client's ``(X_i, y_i)`` as arrays: X 2-D, numeric and finite or NaN, one label per row,
    the same width everywhere; every problem raises :class:`ParameterError`."""
    if not isinstance(parts, (list, tuple)) or len(parts) == 0:
        raise ParameterError("parts must be a non-empty list of (X, y) pairs, one per client")
    Xs: list[FloatArray] = []
    ys: list[npt.NDArray[Any]] = []
    for i, part in enumerate(parts):
        if not isinstance(part, (list, tuple)) or len(part) != 2:
            raise ParameterError(f"part {i} is not an (X, y) pair")
        try:
            X = np.asarray(part[0], dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ParameterError(f"client {i}: X is not numeric") from exc
        y = np.asarray(part[1])
        if X.ndim != 2 or X.shape[0] == 0:
            raise ParameterError(f"client {i} is empty or its X is not 2-dimensional")
        if y.shape != (X.shape[0],):
            raise ParameterError(f"client {i}: y must have one label per row of X")
        if np.isinf(X).any():
            raise ParameterError(f"client {i}: X holds infinite values")
        Xs.append(X)
        ys.append(y)
    widths = {X.shape[1] for X in Xs}
    if len(widths) != 1:
        raise ParameterError(f"clients hold different feature sets (widths {sorted(widths)})")
    return Xs, ys


class HistogramForestBase(Estimator):
    """The shared half of :class:`HistogramForestClassifier` and :class:`HistogramForestRegressor`."""

    task = "classification"
    _fitted_attribute = "trees_"
    _transient_attributes = ("transcript_",)  # the run's record; predict needs only the trees
    criteria: tuple[str, ...] = ()
    n_estimators: int
    max_depth: int
    n_bins: int
    epsilon: float | None
    secure_aggregation: bool
    random_state: int | None
    histogram: str
    bin_edges: str
    grid_cells: int
    noise: str
    criterion: str
    max_features: int | float | str | None
    sampling: str
    subsample_fraction: float
    max_multiplicity: int
    min_samples_split: float
    min_samples_leaf: float
    categorical_features: Sequence[bool] | Sequence[ColumnRef] | None
    client_column: ColumnRef | None
    n_clients: int
    categories: Sequence[int] | None
    feature_ranges: Sequence[tuple[float, float] | None] | None
    progress: bool

    # -- hooks ---------------------------------------------------------------------------------

    def _check_targets(self, i: int, y: npt.NDArray[Any]) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def _task_config(self, ys: list[npt.NDArray[Any]], n_rows: list[int]) -> dict[str, Any]:  # pragma: no cover
        raise NotImplementedError

    def _targets(self, y: object, n: int) -> npt.NDArray[Any]:  # pragma: no cover - overridden
        raise NotImplementedError

    def _client_targets(self, y: npt.NDArray[Any]) -> npt.NDArray[Any]:  # pragma: no cover - overridden
        raise NotImplementedError

    def _forest(self, trees: tuple[Tree, ...]) -> Forest:  # pragma: no cover - overridden
        raise NotImplementedError

    # -- validation ----------------------------------------------------------------------------

    def _check_parts(self, parts: Sequence[Part]) -> tuple[list[FloatArray], list[npt.NDArray[Any]]]:
        Xs, ys = _checked_parts(parts)
        for i, y in enumerate(ys):
            self._check_targets(i, y)
        return Xs, ys

    def _check_params(self, n_clients: int) -> None:
        for name in ("n_estimators", "max_depth", "n_bins", "max_multiplicity"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ParameterError(f"{name} must be a positive int, got {v!r}")
        if self.n_bins < 2:
            raise ParameterError("n_bins must be >= 2")
        if self.epsilon is not None:
            check_epsilon(self.epsilon)
        if self.histogram not in ("auto", "streaming", "fixed"):
            raise ParameterError(f"unknown histogram kind {self.histogram!r}")
        if self.bin_edges not in BIN_EDGE_KINDS:
            raise ParameterError(f"unknown bin_edges {self.bin_edges!r}")
        if isinstance(self.grid_cells, bool) or not isinstance(self.grid_cells, (int, np.integer)) or not (
            2 <= self.grid_cells <= 65535
        ):
            raise ParameterError("grid_cells must be an int in [2, 65535]")
        if self.noise not in ("histogram", "input"):
            raise ParameterError(f"unknown noise placement {self.noise!r}")
        if self.criterion not in self.criteria:
            raise ParameterError(f"unknown criterion {self.criterion!r}")
        if self.sampling not in ("bootstrap", "subsample", "none"):
            raise ParameterError(f"unknown sampling {self.sampling!r}")
        if not 0.0 < self.subsample_fraction <= 1.0:
            raise ParameterError("subsample_fraction must be in (0, 1]")
        if self.secure_aggregation:
            check_party_count(n_clients)

    def _histogram_kind(self) -> str:
        dp_hist = self.epsilon is not None and self.noise == "histogram"
        if self.histogram == "auto":
            return "fixed" if dp_hist or self.secure_aggregation else "streaming"
        if self.histogram == "streaming" and (dp_hist or self.secure_aggregation):
            raise ParameterError(
                "the paper's streaming bins send means of raw values: they cannot be noised or securely summed; "
                "use histogram='fixed'"
            )
        return self.histogram

    def _edges_kind(self) -> str:
        """``bin_edges`` resolved: ``"auto"`` is quantile edges from the grid round without DP, uniform
        edges over the declared ranges with ``epsilon`` (spec "Bin edges: defaults and what they reveal")."""
        if self.bin_edges == "auto":
            return "uniform" if self.epsilon is not None else "quantile"
        return self.bin_edges

    def _schema(
        self, d: int, Xs: list[FloatArray] | None
    ) -> tuple[tuple[int, ...], FloatArray | None, FloatArray | None]:
        """Categories and declared ranges of the ``d`` feature columns; undeclared category counts are read
        from the pooled parts ``Xs`` (without DP), and must be declared when there are none (a deployed
        server, :meth:`_numeric_table`)."""
        columns = [self.schema_.columns[j] for j in self.feature_columns_]
        cat = self._feature_categorical()
        if self.epsilon is not None and any(c.kind == "categorical" and not c.declared for c in columns):
            raise ParameterError(
                "with epsilon, string columns need declared categories (a pandas 'category' dtype): their "
                "values are public parameters, never read from the clients' data"
            )
        if self.categories is not None:
            categories = tuple(int(k) for k in self.categories)
            if len(categories) != d or any((k >= 2) != c for k, c in zip(categories, cat, strict=True)):
                raise ParameterError("categories must give k >= 2 for each categorical feature and 0 otherwise")
        elif self.epsilon is not None and any(cat):
            raise ParameterError(
                "with epsilon, declare categories (the number of codes of each categorical feature): "
                "they are public parameters, never read from the clients' data"
            )
        elif Xs is None and any(cat):
            raise ParameterError("declare categories (the number of codes of each categorical feature): "
                                 "the server holds no rows to count them in")
        else:
            ks = []
            for f in range(d):
                if not cat[f]:
                    ks.append(0)
                    continue
                if columns[f].kind == "categorical":
                    ks.append(max(2, len(columns[f].categories)))
                    continue
                col = np.concatenate([X[:, f] for X in Xs or []])
                col = col[~np.isnan(col)]
                if col.size and (col.min() < 0 or np.any(col != np.floor(col))):
                    raise ParameterError(f"categorical feature {f} must hold integer codes >= 0")
                ks.append(max(2, int(col.max()) + 1 if col.size else 2))
            categories = tuple(ks)
        needs_ranges = self.epsilon is not None
        if self.feature_ranges is None:
            if needs_ranges and any(k == 0 for k in categories):
                raise ParameterError("differential privacy needs declared feature_ranges (data-independent bins): "
                                     f"one (low, high) per feature column, None for a categorical one, e.g. "
                                     f"{ranges_example(columns, categories)}")
            return categories, None, None
        if len(self.feature_ranges) != d:
            raise ParameterError("feature_ranges needs one entry per feature")
        low = np.full(d, np.nan)
        high = np.full(d, np.nan)
        for f, r in enumerate(self.feature_ranges):
            if categories[f]:
                continue
            if r is None:
                raise ParameterError(f"numeric feature {f} needs a declared range")
            lo, hi = float(r[0]), float(r[1])
            if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
                raise ParameterError(f"feature {f}: a range needs finite low < high")
            low[f], high[f] = lo, hi
        return categories, low, high

    # -- fitting -------------------------------------------------------------------------------

    # -- the table ---------------------------------------------------------------------------

    def _split_rows(self, X: object, y: object) -> list[Part]:
        """Fit step 0 (local, no message): ``X`` and ``y`` as one ``(X_i, y_i)`` part per client.  With
        ``client_column`` each row goes to the client its value names (clients in the sorted order of
        those values; the column is no feature); without it the rows are dealt into ``n_clients``
        contiguous parts, a simulation."""
        Xa = self._validate_X(X, reset=True)
        ya = self._targets(y, Xa.shape[0])
        n, width = Xa.shape
        if self.client_column is None:
            k = self.n_clients
            if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
                raise ParameterError(f"n_clients must be a positive int, got {k!r}")
            if k > n:
                raise ParameterError(f"cannot deal {n} sample(s) to n_clients={k} clients")
            owner = np.repeat(np.arange(int(k)), [len(c) for c in np.array_split(np.arange(n), int(k))])
            features = list(range(width))
        else:
            c = self.schema_.index(self.client_column, negative=True)
            if np.isnan(Xa[:, c]).any():
                raise ParameterError(f"client_column {self.client_column!r} names no client for some rows")
            owner = np.unique(Xa[:, c], return_inverse=True)[1].reshape(-1)
            features = [j for j in range(width) if j != c]
            if not features:
                raise ParameterError("X holds no feature besides client_column")
        self.feature_columns_ = features
        self.feature_schema_ = TabularSchema(tuple(self.schema_.columns[j] for j in features), self.schema_.named)
        return [(Xa[owner == i][:, features], ya[owner == i]) for i in range(int(owner.max()) + 1)]

    def _feature_categorical(self) -> list[bool]:
        """One flag per feature column: categorical in the schema (string or ``category`` columns) or
        declared in ``categorical_features`` (names or indexes of X's columns, or one flag per feature
        column)."""
        features = self.feature_columns_
        mask = self.schema_.categorical_mask()
        items = [] if self.categorical_features is None else list(self.categorical_features)
        if items and all(isinstance(v, (bool, np.bool_)) for v in items):
            if len(items) != len(features):
                raise ParameterError("a categorical mask needs one flag per feature column")
            return [mask[j] or bool(v) for j, v in zip(features, items, strict=True)]
        for j in self.schema_.indexes(items):
            if j not in features:
                raise ParameterError("client_column cannot be a categorical feature")
            mask[j] = True
        return [mask[j] for j in features]

    def _numeric_table(self, d: int) -> None:
        """Record a table of ``d`` numeric feature columns, no client column: the schema of a party that
        holds no rows (a deployed server) or only numeric arrays."""
        self._validate_X(np.zeros((1, d)), reset=True)
        self.feature_columns_ = list(range(d))
        self.feature_schema_ = self.schema_

    def forest_config(
        self, d: int, schema: tuple[tuple[int, ...], FloatArray | None, FloatArray | None], task: dict[str, Any]
    ) -> ForestConfig:
        """The run's public parameters from this estimator's settings, the schema (:meth:`_schema`) and the
        task's (:meth:`_task_config`); the parameters must have been checked (:meth:`_check_params`)."""
        kind = self._histogram_kind()
        categories, low, high = schema
        return ForestConfig(
            n_features=d,
            categories=categories,
            n_trees=int(self.n_estimators),
            max_depth=int(self.max_depth),
            n_bins=int(self.n_bins),
            histogram=kind,
            features_per_node=resolve_max_features(self.max_features, d),
            criterion=self.criterion,
            sampling=self.sampling,
            subsample_fraction=float(self.subsample_fraction),
            max_multiplicity=int(self.max_multiplicity),
            grid_cells=int(self.grid_cells) if kind == "fixed" and self._edges_kind() == "quantile" else 0,
            min_samples_split=float(self.min_samples_split),
            min_samples_leaf=float(self.min_samples_leaf),
            epsilon=None if self.epsilon is None or self.noise == "input" else float(self.epsilon),
            input_epsilon=float(self.epsilon) if self.epsilon is not None and self.noise == "input" else None,
            secure=bool(self.secure_aggregation),
            low=low,
            high=high,
            task=self.task,
            **task,
        )

    def party_seeds(self, n_clients: int) -> tuple[int, list[int]]:
        """The server's ``random_state`` and each client's bootstrap ``seed``, all from ``random_state``
        (machine-learning randomness only)."""
        seeds = np.random.SeedSequence(self.random_state).spawn(n_clients + 1)
        return int(seeds[0].generate_state(1)[0]), [int(s.generate_state(1)[0]) for s in seeds[1:]]

    @property
    def client_max_epsilon(self) -> float | None:
        """The privacy cap each client enforces itself (classification with ``epsilon``)."""
        return self.epsilon if self.task == "classification" else None

    def _fit(self, parts: Sequence[Part], rng: RandomSource) -> None:
        Xs, ys = self._check_parts(parts)
        self._check_params(len(Xs))
        self._histogram_kind()  # its refusals come before the schema's
        d = Xs[0].shape[1]
        config = self.forest_config(d, self._schema(d, Xs), self._task_config(ys, [X.shape[0] for X in Xs]))
        warn_if_useless(config, n_rows=sum(X.shape[0] for X in Xs), n_clients=len(Xs))
        server_seed, client_seeds = self.party_seeds(len(Xs))
        network = InProcessNetwork()
        names = [f"client{i}" for i in range(len(Xs))]
        clients = [
            Client(
                name, network, X, self._client_targets(y),
                seed=seed, max_epsilon=self.client_max_epsilon, rng=rng, task=self.task,
            )
            for name, X, y, seed in zip(names, Xs, ys, client_seeds, strict=True)
        ]
        server = Server("server", network, names, config, random_state=server_seed, rng=rng)
        self.trees_: list[Tree] = server.train(progress=self.progress)
        self.forest_ = self._forest(tuple(self.trees_))
        self.config_ = config
        self.bin_mapper_: BinMapper | None = server.mapper
        self.transcript_: Transcript = network.transcript
        self.privacy_ledger_: list[Release] = [] if server.accountant is None else list(server.accountant.releases)
        if config.input_epsilon is not None:
            self.epsilon_spent_ = float(config.input_epsilon)
        else:
            self.epsilon_spent_ = 0.0 if server.accountant is None else server.accountant.spent
        self.client_epsilon_spent_ = [c.privacy_spent for c in clients]

    def _checked_X(self, X: object) -> FloatArray:
        """The feature columns of ``X``: a table like the one ``fit`` saw (its client column is
        dropped) or, with ``client_column``, the feature columns alone."""
        self._check_fitted()
        width = getattr(X, "shape", (0, None))[1] if getattr(X, "ndim", 2) == 2 else None
        if self.client_column is not None and width == self.n_features_in_ - 1:
            return self.feature_schema_.encode(X)
        return self._validate_X(X, reset=False)[:, self.feature_columns_]

    def fit(self, X: object, y: object, *, rng: RandomSource = SYSTEM_RANDOM) -> Any:
        """Train on the rows of ``X`` and ``y``, split among the clients by ``client_column`` (or into
        ``n_clients`` parts).  ``rng`` is the cryptographic source of noise, keys and the session id
        (tests pass a DeterministicRandom)."""
        self._fit(self._split_rows(X, y), rng)
        return self
