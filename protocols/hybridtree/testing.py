"""Test-only data and simulation helpers for HybridTree.

:func:`hybrid_data`: a small synthetic hybrid layout (numpy only): the label depends on host and
guest columns, so guest layers matter; a few values are missing.  Machine-learning randomness from
a seeded numpy Generator.  :func:`fit_layout`: fit a facade from a row layout (each guest's row
indexes), the way the histogram forest's ``fit_parts`` fits from one part per client.
:func:`joined_view`: the table a facade is given to reproduce a deployed run (each party's own
tables joined by the alignment the parties wrote; tests and benchmarks only: no real party ever
holds the others' columns).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from securetrees.errors import ParameterError, ProtocolError
from securetrees.net.alignment import rows_path
from securetrees.net.config import RunConfig
from securetrees.net.tables import party_tables, test_table
from securetrees.protocols.hybridtree import deploy
from securetrees.protocols.hybridtree.estimators import _HybridTree, check_layout, with_guest_column
from securetrees.schema import TabularSchema

__all__ = ["HybridData", "JoinedRows", "fit_layout", "hybrid_data", "joined_view", "with_guest_column"]

Model = TypeVar("Model", bound=_HybridTree)


@dataclass(frozen=True)
class HybridData:
    X: npt.NDArray[np.float64]
    y: npt.NDArray[np.int64]
    y_reg: npt.NDArray[np.float64]
    y_multi: npt.NDArray[np.int64]
    host_features: list[int]
    guest_features: list[int]
    guest_rows: list[npt.NDArray[np.int64]]


def hybrid_data(n: int = 240, n_guests: int = 4, *, seed: int = 0) -> HybridData:
    """``n`` rows, host columns 0-2, guest columns 3-5 (column 5 categorical codes 0..3);
    guests hold disjoint, nearly equal random row sets covering every row."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    X[:, 5] = rng.integers(0, 4, size=n)
    score = X[:, 0] - X[:, 1] + 1.5 * X[:, 3] - X[:, 4] + (X[:, 5] == 2)
    y = (score > 0).astype(np.int64)
    y_reg = score + 0.1 * rng.normal(size=n)
    y_multi = np.digitize(score, [-1.0, 1.0]).astype(np.int64)
    missing = rng.random((n, 6)) < 0.04
    missing[:, 5] = False
    X[missing] = np.nan
    rows = [np.sort(r).astype(np.int64) for r in np.array_split(rng.permutation(n), n_guests)]
    return HybridData(X, y, y_reg, y_multi, [0, 1, 2], [3, 4, 5], rows)


def fit_layout(
    model: Model, X: npt.ArrayLike, y: npt.ArrayLike, host_features: Sequence[int],
    guest_features: Sequence[int] | Sequence[Sequence[int]], guest_rows: Sequence[npt.ArrayLike],
) -> Model:
    """``model`` fitted on a row layout: the host holds ``host_features`` of every row, guest ``u``
    holds the rows ``guest_rows[u]`` (row indexes of ``X``, a numeric array) of ``guest_features``.
    ``X`` gets the guest column of :func:`with_guest_column` as its last column, named by
    ``guest_column=-1``; predict from ``with_guest_column(X_test, test_rows)``.  Rows held by
    several guests (Appendix C.4; the guest column names the lowest-numbered one, the owner) are
    given to the facade explicitly, as no guest column can say them."""
    Xa = np.asarray(X, dtype=np.float64)
    if Xa.ndim != 2:
        raise ParameterError("X must be two-dimensional")
    _, _, _, rows = check_layout(Xa.shape[0], Xa.shape[1], host_features, guest_features, guest_rows)
    model.set_params(host_features=list(host_features), guest_features=guest_features, guest_column=-1)
    table = with_guest_column(Xa, rows)
    if sum(r.size for r in rows) == np.unique(np.concatenate(rows)).size:
        model.fit(table, y)
    else:
        model._fit_rows(model._validate_X(table, reset=True), y, rows)
    return model


@dataclass(frozen=True)
class JoinedRows:
    """A deployed run's rows joined: ``X`` holds the host's columns, the guest space, then the guest
    column (the guest index, NaN for a row no guest holds; ``guest_column=-1``); ``y`` the host's
    labels (training only); the facade's layout settings; the host's table schema."""

    X: npt.NDArray[np.float64]
    y: npt.NDArray[np.str_] | None
    host_features: list[int]
    guest_features: list[int]
    categorical: list[int]
    host_schema: TabularSchema

    def settings(self) -> dict[str, object]:
        """The facade's layout settings for this table."""
        return {"host_features": self.host_features, "guest_features": self.guest_features, "guest_column": -1,
                "categorical_features": self.categorical}


def joined_view(config: RunConfig, *, test: bool = False, host_schema: TabularSchema | None = None) -> JoinedRows:
    """The training rows (in the host's arranged order, ``deploy.arrange``) or, with ``test``, the
    test rows (in the host's own test file order; ``host_schema`` encodes them, the fit's) of a run
    whose parties have written their alignment (``rows_path``), each party's table encoded as the
    party encodes it; raises :class:`ProtocolError` if a guest's ids and the host's differ row for row
    (the agreed orders must pair the same ids)."""
    p = config.params
    est = deploy.estimator_from(p)
    space = deploy.guest_space(p, est._params().max_bins)
    guests = [str(g) for g in p["guests"]]
    kind = "test" if test else "train"
    host_party = config.party(deploy.HOST)
    if test:
        if host_schema is None:
            raise ParameterError("the test rows are encoded with the fit's host schema")
        host = test_table(host_party, host_schema)
    else:
        host = party_tables(host_party)[0]
    with np.load(rows_path(config, deploy.HOST), allow_pickle=False) as z:
        host_rows = {g: z[f"{kind}:{g}"] for g in guests}
    G = np.full((len(host), len(space.names)), np.nan)
    column = np.full((len(host), 1), np.nan)
    for u, g in enumerate(guests):
        table = deploy.guest_tables(config.party(g), space, train=not test)[1 if test else 0]
        if table is None:
            raise ParameterError(f"{g} has no {kind} table")
        with np.load(rows_path(config, g), allow_pickle=False) as z:
            mine = z[f"{kind}:{g}"]
        theirs = table.take(mine)
        if theirs.ids != tuple(host.ids[int(i)] for i in host_rows[g]):
            raise ProtocolError(f"{g}'s rows and the host's are not in one agreed order")
        G[host_rows[g]] = deploy._in_space(theirs, space)
        column[host_rows[g]] = u
    X = np.hstack([host.X, G, column])
    y = None
    if not test:
        order, _ = deploy.arrange(len(host), [host_rows[g] for g in guests])
        X = X[order]
        y = np.asarray(host.labels).astype(str)[order]
    h, d = host.X.shape[1], len(space.names)
    cat = [j for j, c in enumerate(host.schema.categorical_mask()) if c]
    cat += [h + j for j, c in enumerate(space.mapper.categorical) if c]
    return JoinedRows(X, y, list(range(h)), list(range(h, h + d)), cat, host.schema)
