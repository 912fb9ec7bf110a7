"""The facade's table contract (specs/estimators.md, "HybridTree's parties"): ``host_features``,
``guest_features`` and ``guest_column`` describe who holds what; ``fit(X, y)`` and ``predict(X)``.

A DataFrame described by column names gives exactly the model of the same layout given as row
indexes (:func:`fit_layout`); every new refusal has its own case.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import KFold, cross_val_score

from securetrees.errors import ParameterError
from securetrees.protocols.hybridtree.testing import HybridData, fit_layout, with_guest_column

SITES = np.array(["site-a", "site-b", "site-c", "site-d"], dtype=object)  # sorted: guest u is SITES[u]


def _frame(data: HybridData) -> pd.DataFrame:
    """The guest column first (not last), string codes in the categorical guest column."""
    owner = with_guest_column(data.X, data.guest_rows)[:, -1].astype(np.int64)
    df = pd.DataFrame(data.X, columns=["h0", "h1", "h2", "g0", "g1", "g2"])
    df["g2"] = [f"c{int(v)}" for v in data.X[:, 5]]
    df.insert(0, "site", SITES[owner])
    return df


def _named(make: Any, kind: str = "clf", **kw: Any) -> Any:
    return make(kind, "secure", host_features=["h0", "h1", "h2"], guest_features=["g0", "g1", "g2"],
                guest_column="site", **kw)


def test_dataframe_by_names_equals_the_row_layout(make: Any, data: HybridData) -> None:
    df = _frame(data)
    labels = np.where(data.y == 1, "pos", "neg")
    named = _named(make).fit(df, labels)
    ref = fit_layout(make("clf", "secure", categorical_features=[5]), data.X, data.y, data.host_features,
                     data.guest_features, data.guest_rows)
    np.testing.assert_array_equal(named.decision_function(df),
                                  ref.decision_function(with_guest_column(data.X, data.guest_rows)))
    assert list(named.classes_) == ["neg", "pos"] and set(named.predict(df)) <= {"neg", "pos"}
    assert named.n_features_in_ == 7 and list(named.feature_names_in_) == list(df.columns)
    assert named.host_features_ == [1, 2, 3] and named.guest_features_ == [4, 5, 6]
    assert named.schema_.categorical_mask() == [True, False, False, False, False, False, True]
    assert named.n_guests_ == 4 and 0.75 <= named.score(df, labels) <= 1.0


def test_cross_val_score_slices_rows_with_their_guests(make: Any, data: HybridData) -> None:
    df = _frame(data)
    scores = cross_val_score(_named(make, "reg", n_estimators=3, learning_rate=0.5), df, data.y_reg,
                             cv=KFold(2, shuffle=True, random_state=0))
    assert scores.shape == (2,) and np.isfinite(scores).all() and scores.min() > 0.3


def test_predict_without_the_guest_column_is_host_only(make: Any, data: HybridData) -> None:
    df = _frame(data)
    m = _named(make).fit(df, data.y)
    nobody = df.assign(site=None)
    with pytest.warns(UserWarning, match="no guest column"):
        alone = m.decision_function(df.drop(columns="site"))
    np.testing.assert_array_equal(alone, m.decision_function(nobody))
    assert not np.array_equal(alone, m.decision_function(df))  # the guests' layers need the guests


def test_rows_no_guest_holds(make: Any, data: HybridData) -> None:
    df = _frame(data)
    df.loc[:19, "site"] = None
    m = _named(make).fit(df, data.y)
    assert np.all(m.host_._owner[:20] == -1) and np.all(m.host_._owner[20:] >= 0)
    assert all(not np.isin(np.arange(20), g._ids).any() for g in m.guests_)
    assert np.isfinite(m.decision_function(df)).all()


def test_simulation_default_and_one_sided_layouts(make: Any, data: HybridData) -> None:
    X = np.column_stack([data.X, data.X[:, :2]])  # 8 numeric columns
    m = make("reg", "secure", min_guests=3).fit(X, data.y_reg)
    assert m.host_features_ == [0, 1, 2, 3, 4, 5] and m.guest_features_ == [6, 7]
    np.testing.assert_array_equal(m.host_._owner, np.arange(len(X)) % 3)
    assert make("reg", "secure", host_features=[0, 1]).fit(X, data.y_reg).guest_features_ == [2, 3, 4, 5, 6, 7]
    assert make("reg", "secure", guest_features=[7]).fit(X, data.y_reg).host_features_ == [0, 1, 2, 3, 4, 5, 6]
    per_guest = make("reg", "secure", guest_features=[[6], [7], [6, 7]], host_features=[0, 1]).fit(X, data.y_reg)
    assert per_guest.guest_feature_lists_ == [[6], [7], [6, 7]]
    assert m.predict(X).shape == (len(X),)  # predict deals the test rows the same way


@pytest.mark.parametrize(("over", "match"), [
    ({"guest_column": "nope"}, "no column 'nope'"),
    ({"host_features": ["h0", "site"]}, "cannot be a host or guest feature"),
    ({"guest_features": ["g0", "site"]}, "cannot be a host or guest feature"),
    ({"categorical_features": ["site"]}, "cannot be a categorical feature"),
    ({"host_features": "h0"}, "list of column names"),
    ({"guest_features": "g0"}, "list of column names"),
    ({"guest_features": [["g0"], ["g1"]]}, "2 lists for 4 guests"),
    ({"guest_features": ["g0", "g0"]}, "twice"),
    ({"guest_features": ["g0", "h0"]}, "overlap"),
    ({"host_features": []}, "host must hold"),
    ({"guest_features": []}, "every guest must hold"),
])
def test_layout_refusals(make: Any, data: HybridData, over: dict[str, Any], match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        _named(make).set_params(**over).fit(_frame(data), data.y)


def test_guest_column_refusals(make: Any, data: HybridData) -> None:
    df = _frame(data)
    with pytest.raises(ParameterError, match="names no guest for any row"):
        _named(make).fit(df.assign(site=None), data.y)
    with pytest.raises(ParameterError, match="at least 3 guests"):
        _named(make).fit(df.assign(site=np.where(data.y == 1, "a", "b")), data.y)
    X = with_guest_column(data.X, data.guest_rows)
    m = make("clf", "secure", guest_column=-1).fit(X, data.y)
    X[5, -1] = 9.0
    with pytest.raises(ParameterError, match="names no guest of the fit"):
        m.predict(X)


@pytest.mark.parametrize(("n_guests", "match"), [(0, "positive int"), (True, "positive int"),
                                                  (2.5, "positive int"), (241, "cannot deal 240")])
def test_simulation_refusals(make: Any, data: HybridData, n_guests: Any, match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        make("clf", "secure", n_guests=n_guests).fit(data.X, data.y)


def test_one_column_cannot_be_split(make: Any, data: HybridData) -> None:
    with pytest.raises(ParameterError, match="at least two feature columns"):
        make("clf", "secure").fit(data.X[:, :1], data.y)


@pytest.mark.parametrize("key", ["guest_column", "n_guests", "host_features", "categorical_features"])
def test_a_deployment_refuses_the_table_parameters(key: str) -> None:
    """Deployed parties hold their own tables: the one-process table's parameters are no run key."""
    from securetrees.protocols.hybridtree.deploy import estimator_from

    run = {"guests": ["g0", "g1", "g2"], "guest_features": ["x1"]}
    assert estimator_from(run).n_estimators == 50
    with pytest.raises(ParameterError, match=key):
        estimator_from({**run, key: 1})
