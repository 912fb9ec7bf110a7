"""Binning (specs/trees.md "Binning"): bins agree with the threshold they stand for."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from securetrees.errors import ParameterError
from securetrees.trees import BinMapper, quantile_edges, uniform_edges

floats = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)


def test_quantile_edges_are_midpoints_when_few_distinct_values() -> None:
    np.testing.assert_array_equal(quantile_edges([3.0, 1.0, 2.0, 2.0, np.nan], 10), [1.5, 2.5])


def test_quantile_edges_respect_max_bins() -> None:
    x = np.arange(1000, dtype=float)
    e = quantile_edges(x, 8)
    assert e.size == 7
    np.testing.assert_allclose(e, np.percentile(x, np.linspace(0, 100, 9)[1:-1], method="midpoint"))


def test_uniform_edges_do_not_depend_on_data() -> None:
    np.testing.assert_array_equal(uniform_edges(0.0, 10.0, 4), [2.5, 5.0, 7.5])
    a = BinMapper.fit([[0.5], [0.6]], strategy="uniform", ranges=[(0.0, 10.0)], max_bins=4)
    b = BinMapper.fit([[9.0], [1.0]], strategy="uniform", ranges=[(0.0, 10.0)], max_bins=4)
    np.testing.assert_array_equal(a.edges[0], b.edges[0])


@given(arrays(np.float64, st.integers(1, 60), elements=floats | st.just(np.nan)),
       st.integers(2, 16), st.sampled_from(["quantile", "uniform"]))
def test_bin_test_equals_threshold_test(x: np.ndarray, max_bins: int, strategy: str) -> None:
    m = BinMapper.fit(x[:, None], max_bins=max_bins, strategy=strategy)
    bins = m.transform(x[:, None])[:, 0].astype(int)
    assert m.n_bins[0] <= max_bins
    missing = np.isnan(x)
    np.testing.assert_array_equal(bins == m.missing_bin, missing)
    for b in range(m.n_bins[0]):
        thr = m.threshold(0, b)
        np.testing.assert_array_equal((bins <= b)[~missing], (x <= thr)[~missing])


def test_categorical_bins_are_codes() -> None:
    m = BinMapper.fit([[0.0], [3.0], [np.nan]], categorical=[True])
    assert m.n_bins == (4,)
    np.testing.assert_array_equal(m.transform([[3.0], [np.nan], [0.0]])[:, 0], [3, 255, 0])
    assert m.threshold(0, 3) == 3.0


@pytest.mark.parametrize("bad", [[[-1.0]], [[1.5]], [[255.0]]])
def test_bad_category_codes_rejected(bad: list[list[float]]) -> None:
    with pytest.raises(ParameterError):
        BinMapper.fit(bad, categorical=[True])


@pytest.mark.parametrize(
    ("kwargs", "X"),
    [
        ({"max_bins": 1}, [[1.0]]),
        ({"max_bins": 70000}, [[1.0]]),
        ({"strategy": "magic"}, [[1.0]]),
        ({"categorical": [True, False]}, [[1.0]]),
        ({"strategy": "uniform", "ranges": [(1.0, 1.0)]}, [[1.0]]),
        ({"strategy": "uniform", "ranges": [(0.0, 1.0), (0.0, 1.0)]}, [[1.0]]),
        ({}, [1.0, 2.0]),
    ],
)
def test_bad_binning_parameters_rejected(kwargs: dict[str, object], X: object) -> None:
    with pytest.raises(ParameterError):
        BinMapper.fit(X, **kwargs)  # type: ignore[arg-type]


def test_transform_checks_width() -> None:
    m = BinMapper.fit([[1.0, 2.0]])
    with pytest.raises(ParameterError):
        m.transform([[1.0]])


def test_wide_bins_use_uint16() -> None:
    x = np.arange(600, dtype=float)[:, None]
    m = BinMapper.fit(x, max_bins=1000)
    assert m.transform(x).dtype == np.uint16
    assert m.n_bins[0] == 600
