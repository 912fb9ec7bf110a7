"""``fit(X, y)`` on one table: the client column, the simulated split, DataFrames (spec "Estimators")."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import cross_val_score

from securetrees.errors import ParameterError
from securetrees.protocols.histogram_forest import HistogramForestClassifier, HistogramForestRegressor
from securetrees.protocols.histogram_forest.testing import fit_parts


def _clients_seen(model: Any) -> set[str]:
    return {r.sender for r in model.transcript_.view("server") if r.sender != "server"}


def _frame(parts: Any) -> tuple[pd.DataFrame, np.ndarray]:
    """The parts as one DataFrame: a string client column in the middle, a string category, NaN."""
    rows = []
    for i, (X, y) in enumerate(parts):
        for x, label in zip(X, y, strict=True):
            colour = None if np.isnan(x[2]) else ("red", "green", "blue", "grey")[int(x[2])]
            rows.append({"a": x[0], "bank": f"bank-{'xyz'[i]}", "b": x[1], "colour": colour, "y": label})
    df = pd.DataFrame(rows)
    return df.drop(columns="y"), df["y"].to_numpy()


def test_client_column_by_name_equals_the_parts(parts3: Any) -> None:
    df, y = _frame(parts3)
    common: dict[str, Any] = dict(n_estimators=3, max_depth=4, random_state=3, sampling="none")
    table = HistogramForestClassifier(client_column="bank", **common).fit(df, y)
    assert _clients_seen(table) == {"client0", "client1", "client2"}
    assert list(table.feature_names_in_) == ["a", "bank", "b", "colour"] and table.n_features_in_ == 4
    # the same rows as parts, with the string column's codes in sorted order (blue, green, grey, red)
    recode = {0: 3, 1: 1, 2: 0, 3: 2}
    parts = [(np.column_stack([X[:, 0], X[:, 1], [np.nan if np.isnan(c) else recode[int(c)] for c in X[:, 2]]]), yy)
             for X, yy in parts3]
    ref = fit_parts(HistogramForestClassifier(categorical_features=[False, False, True], **common), parts)
    assert all(s.same_as(t) for s, t in zip(table.trees_, ref.trees_, strict=True))
    # predict takes the table with its client column, or the feature columns alone
    np.testing.assert_array_equal(table.predict(df), table.predict(df.drop(columns="bank")))


def test_without_a_client_column_rows_are_dealt_to_n_clients(parts3: Any) -> None:
    X = np.vstack([p[0] for p in parts3])
    y = np.concatenate([p[1] for p in parts3])
    model = HistogramForestClassifier(2, 3, n_clients=4, random_state=0).fit(X, y)
    assert _clients_seen(model) == {f"client{i}" for i in range(4)}
    assert model.n_features_in_ == 3


def test_cross_validation_slices_rows_and_keeps_the_clients(parts3: Any) -> None:
    df, y = _frame(parts3)
    scores = cross_val_score(HistogramForestClassifier(3, 4, client_column="bank", random_state=0), df, y, cv=3)
    assert scores.shape == (3,) and np.all(scores > 0.6)


def test_regressor_takes_a_client_column_by_index(parts3: Any) -> None:
    X = np.vstack([np.column_stack([p[0], np.full(len(p[1]), 10.0 * i)]) for i, p in enumerate(parts3)])
    t = X[:, 0] * 2.0 + np.nan_to_num(X[:, 2])
    model = HistogramForestRegressor(3, 4, client_column=3, random_state=0).fit(X, t)
    assert _clients_seen(model) == {"client0", "client1", "client2"}
    assert model.score(X, t) > 0.8


@pytest.mark.parametrize(("params", "match"), [
    ({"client_column": "nope"}, "no column"),
    ({"client_column": 7}, "not in"),
    ({"n_clients": 0}, "n_clients"),
    ({"n_clients": True}, "n_clients"),
    ({"client_column": "bank", "categorical_features": ["bank"]}, "client_column"),
    ({"client_column": "bank", "categorical_features": [True, False]}, "one flag per feature"),
    ({"client_column": "bank", "epsilon": 1.0, "classes": [0, 1], "feature_ranges": [(0, 10), (0, 20), None],
      "categories": [0, 0, 4]}, "declared categories"),
])
def test_bad_table_layouts_are_refused(parts3: Any, params: dict[str, Any], match: str) -> None:
    df, y = _frame(parts3)
    with pytest.raises(ParameterError, match=match):
        HistogramForestClassifier(2, 3, **params).fit(df, y)


def test_rows_without_a_client_and_tables_of_only_the_client_column(parts3: Any) -> None:
    df, y = _frame(parts3)
    df.loc[5, "bank"] = None
    with pytest.raises(ParameterError, match="names no client"):
        HistogramForestClassifier(2, 3, client_column="bank").fit(df, y)
    with pytest.raises(ParameterError, match="no feature"):
        HistogramForestClassifier(2, 3, client_column=0).fit(np.arange(8.0).reshape(-1, 1), np.arange(8) % 2)
    with pytest.raises(ParameterError, match="1 sample"):
        HistogramForestRegressor(2, 3).fit(np.zeros((1, 2)), [0.5])
