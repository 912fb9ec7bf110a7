"""The scale benchmarks' synthetic table (securetrees.testing.synthetic)."""

from __future__ import annotations

import numpy as np
import pytest

from securetrees.errors import ParameterError
from securetrees.testing.synthetic import make_table
from securetrees.trees import RandomForestClassifier


def test_shape_columns_and_determinism() -> None:
    a, b = make_table(2000, 12, n_categorical=3, n_categories=5, seed=7), make_table(2000, 12, n_categorical=3,
                                                                                    n_categories=5, seed=7)
    assert a.X.shape == (2000, 12) and a.y.shape == (2000,)
    assert np.array_equal(a.X, b.X) and np.array_equal(a.y, b.y)
    assert a.categorical == [False] * 9 + [True] * 3
    codes = a.X[:, 9:]
    assert np.array_equal(codes, codes.round()) and codes.min() == 0 and codes.max() == 4
    assert set(np.unique(a.y)) == {0, 1}
    assert not np.array_equal(a.X, make_table(2000, 12, n_categorical=3, n_categories=5, seed=8).X)


def test_label_has_signal_in_the_documented_columns() -> None:
    """A forest beats the majority rate by far on held-out rows, and only with the signal columns:
    the same forest on the noise columns alone stays near the majority rate (fixed seeds: exact)."""
    train, test = make_table(4000, 20, n_categorical=4, seed=0), make_table(2000, 20, n_categorical=4, seed=1)
    majority = max(test.y.mean(), 1 - test.y.mean())
    forest = RandomForestClassifier(20, max_depth=6, categorical_features=train.categorical, random_state=0)
    accuracy = float(np.mean(forest.fit(train.X, train.y).predict(test.X) == test.y))
    assert accuracy > majority + 0.15
    noise = [j for j in range(20) if j not in (0, 1, 2, 3, 4, 16)]
    blind = RandomForestClassifier(20, max_depth=6, random_state=0).fit(train.X[:, noise], train.y)
    assert float(np.mean(blind.predict(test.X[:, noise]) == test.y)) < majority + 0.05


@pytest.mark.parametrize("kw", [{"n_rows": 0}, {"n_features": 0}, {"n_categorical": -1}, {"n_categories": 1},
                                {"n_features": 3, "n_categorical": 4}, {"n_rows": 2.5}, {"n_rows": True}])
def test_bad_parameters_raise_parameter_error(kw: dict[str, object]) -> None:
    args = {"n_rows": 10, "n_features": 5, "n_categorical": 1, "n_categories": 4, **kw}
    with pytest.raises(ParameterError):
        make_table(**args)  # type: ignore[arg-type]
